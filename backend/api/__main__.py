"""`python -m backend.api --config F --lake L --port P`: the API process `fleetview serve` supervises."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Serve the API (and /mcp) with uvicorn until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m backend.api", description=__doc__)
    parser.add_argument("--config", required=True, help="the fleet file (grants, [auth])")
    parser.add_argument("--lake", required=True)
    parser.add_argument("--journal-dir", default=None, help="the audit journal directory (default: none, straight "
                                                            "into the lake)")
    parser.add_argument("--secrets", default=None, help="Streamlit's secrets.toml naming the OpenID provider")
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8502)
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second per principal")
    parser.add_argument("--burst", type=int, default=100)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from backend.configs.sensitive import install_log_filter

    install_log_filter()
    import uvicorn

    from backend.api.app import ApiSettings, create_app

    app = create_app(ApiSettings(lake=args.lake, fleet_file=Path(args.config),
                                 journal_dir=Path(args.journal_dir) if args.journal_dir else None,
                                 secrets_file=args.secrets, address=args.address, rate_per_s=args.rate,
                                 rate_burst=args.burst))
    uvicorn.run(app, host=args.address, port=args.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=5, server_header=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
