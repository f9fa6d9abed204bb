"""The import layers hold (import-linter, the contract in pyproject.toml), and a new upward import breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The packages the contract covers and pyproject.toml, copied where a test may break them."""
    for name in ("backend", "dashboard"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layers_of_the_tree_are_kept() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward_import", "contract"),
    [
        ("backend/store/lake.py", "import backend.config", "layers point down"),
        ("backend/store/readers.py", "from backend.collect import poller", "layers point down"),
        ("backend/kafka/wire.py", "import backend.views.charts", "layers point down"),
        ("backend/collect/checks.py", "import backend.pipeline.rules", "layers point down"),
        ("backend/views/frames.py", "import streamlit", "never imports streamlit"),
        # Siblings that import each other, even lazily or for type checking only, form an import circle.
        ("backend/service/job_worker.py", "from backend.service import driver", "no import circles"),
        ("dashboard/text.py", "from dashboard import components", "no import circles"),
    ],
)
def test_a_new_upward_import_breaks_the_contract(tree_copy: Path, module: str, upward_import: str, contract: str) -> None:
    target = tree_copy / module
    target.write_text(target.read_text() + f"\n{upward_import}  # noqa\n")
    result = _lint_imports(tree_copy)
    assert result.returncode != 0, result.stdout
    assert "0 broken" not in result.stdout  # an upward import usually closes a circle as well
    broken = result.stdout.split("Broken contracts", 1)[1]
    assert contract in broken
    named = module.removesuffix(".py").replace("/", ".")
    assert named in broken or f".{Path(module).stem} -> " in broken  # the circle contract names siblings relatively
