"""The demo command: everything on the embedded default (lab fleet, poller, Spark job, UI)."""

from __future__ import annotations

from backend.demo.runner import add_demo_arguments, run_demo_command

__all__ = ["add_demo_arguments", "run_demo_command"]
