"""backend/ never imports Streamlit, and the dashboard never pulls in Spark or Kafka clients."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return {line.split(".")[0] for line in done.stdout.splitlines()}


def test_backend_export_and_jobs_do_not_import_streamlit() -> None:
    loaded = _modules_after("import backend.export.cli, backend.export.report, backend.export.images, backend.jobs")
    assert "backend" in loaded
    assert "streamlit" not in loaded


def test_dashboard_modules_do_not_import_spark_or_kafka_clients() -> None:
    loaded = _modules_after("import dashboard.data, dashboard.charts, dashboard.components")
    assert "streamlit" in loaded
    assert not loaded & {"pyspark", "confluent_kafka", "kazoo"}
