"""Fixtures of the real-client tests: RealClients.java compiled once per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rig.clients import compile_real_clients


@pytest.fixture(scope="session")
def real_clients_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/clients/RealClients.java compiled (javac) into a temporary folder."""
    return compile_real_clients(tmp_path_factory.mktemp("real-clients-classes"))
