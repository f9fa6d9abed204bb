"""The librdkafka helper process stays small: it imports librdkafka and the admin modules, not the lake's stack."""

from __future__ import annotations

import subprocess
import sys

from tests.rig.procs import REPO


def test_the_helper_imports_neither_pandas_nor_pyarrow_nor_the_fleet_file() -> None:
    code = ("import sys, backend.kafka.admin_child; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'pyarrow', 'pydantic', 'numpy', 'kazoo') or m.startswith('backend.'))))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                            timeout=60).stdout.split()
    assert loaded == ["backend.kafka", "backend.kafka.admin", "backend.kafka.admin_child", "backend.kafka.admin_wire"]
