"""A real OpenID Connect provider for the login tests: npm oidc-provider (tests/oidc, `make oidc-provider`)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rig.procs import LOG_FILES, REPO, RigError, free_port, log_tail

OIDC_DIR = REPO / "tests" / "oidc"
CLIENT_ID = "fleetview"
CLIENT_SECRET = "fleetview-test-client-secret"  # a test provider's client, on 127.0.0.1 only


def provider_installed() -> bool:
    """Whether `npm ci` has installed oidc-provider under tests/oidc and node is on PATH."""
    return (OIDC_DIR / "node_modules" / "oidc-provider" / "package.json").is_file() and shutil.which("node") is not None


@dataclass
class OidcProvider:
    """panva/oidc-provider on a free 127.0.0.1 port: users and their claims from `users`, one confidential client."""

    workdir: Path
    users: dict[str, dict[str, Any]]
    redirect_uris: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def issuer(self) -> str:
        """The issuer URL (also the base of every endpoint)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metadata_url(self) -> str:
        """The OpenID discovery document, what Streamlit's server_metadata_url names."""
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def log(self) -> Path:
        """The provider's stderr."""
        return self.workdir / "idp.log"

    def start(self, timeout_s: float = 30.0) -> None:
        """Write the config and start node; returns when it listens."""
        if not provider_installed():
            raise RigError("oidc-provider is not installed: run `make oidc-provider` (npm ci in tests/oidc)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "idp.json"
        config.write_text(json.dumps({
            "port": self.port, "issuer": self.issuer, "users": self.users,
            "clients": [{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": self.redirect_uris,
                         "post_logout_redirect_uris": self.redirect_uris, "grant_types": ["authorization_code"],
                         "response_types": ["code"]}],
        }), encoding="utf-8")
        LOG_FILES.append(self.log)
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(["node", str(OIDC_DIR / "idp.mjs"), str(config)], cwd=OIDC_DIR,
                                         stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RigError(f"oidc-provider exited early:\n{log_tail(self.log)}")
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready and self.proc.stdout.readline().startswith(b"ready "):
                return
        self.stop()
        raise RigError(f"oidc-provider did not start in {timeout_s:.0f}s:\n{log_tail(self.log)}")

    def stop(self) -> None:
        """Stop node (its whole process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)

    def secrets_toml(self, cookie_secret: str, *, redirect_host: str = "localhost") -> str:
        """A Streamlit secrets.toml [auth] for this provider (redirect_uri with Streamlit's {port} placeholder)."""
        return (f'[auth]\nredirect_uri = "http://{redirect_host}:{{port}}/oauth2callback"\n'
                f'cookie_secret = "{cookie_secret}"\nclient_id = "{CLIENT_ID}"\nclient_secret = "{CLIENT_SECRET}"\n'
                f'server_metadata_url = "{self.metadata_url}"\n'
                # oidc-provider rejects Streamlit's default prompt=select_account; "groups" puts groups in the ID token.
                'client_kwargs = { prompt = "login", scope = "openid email profile groups" }\n')
