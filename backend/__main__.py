"""`python -m backend`: the command line of the fleet view."""

from __future__ import annotations

import sys

from backend.cli import main

if __name__ == "__main__":
    sys.exit(main())
