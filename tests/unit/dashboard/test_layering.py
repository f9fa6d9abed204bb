"""backend/ never imports Streamlit or the dashboard, and the dashboard never pulls in Spark or Kafka clients."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return {line.split(".")[0] for line in done.stdout.splitlines()}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_module_under_backend_imports_dashboard_or_streamlit() -> None:
    offenders = {str(path.relative_to(ROOT)): sorted(_imported_roots(path) & {"dashboard", "streamlit", "pages"})
                 for path in sorted((ROOT / "backend").rglob("*.py"))}
    offenders = {name: found for name, found in offenders.items() if found}
    assert len(list((ROOT / "backend").rglob("*.py"))) > 50
    assert offenders == {}


def test_backend_export_views_and_jobs_do_not_import_streamlit() -> None:
    loaded = _modules_after("import backend.export.cli, backend.export.report, backend.export.images, backend.jobs, "
                            "backend.views.fleet_views, backend.views.config_views, backend.views.charts")
    assert "backend" in loaded
    assert not loaded & {"streamlit", "dashboard"}


def test_dashboard_modules_do_not_import_spark_or_kafka_clients() -> None:
    loaded = _modules_after("import dashboard.data, dashboard.charts, dashboard.components")
    assert "streamlit" in loaded
    assert not loaded & {"pyspark", "confluent_kafka", "kazoo"}
