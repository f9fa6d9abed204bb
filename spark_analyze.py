"""spark-submit entry file of the client-config pipeline: `spark-submit [options] spark_analyze.py --lake L`.

It sits at the repository root so that `backend` is importable as spark-submit runs it (the script's
folder is first on sys.path); it takes the flags of `python -m backend analyze`.
"""

from __future__ import annotations

import sys

from backend.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
