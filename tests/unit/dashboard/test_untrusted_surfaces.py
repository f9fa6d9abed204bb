"""Every table of the UI goes through components.data_table (visible cells, the one formula-safe CSV download):
a page that calls st.dataframe, st.data_editor or st.table itself fails here (docs/security.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RAW_TABLES = {"dataframe", "data_editor", "table"}


def _raw_table_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_TABLES:
            owner = node.func.value
            # st.dataframe(...), cols[0].dataframe(...), with-block containers: any receiver but a frame's own methods
            if not (isinstance(owner, ast.Name) and owner.id in {"pd", "frame", "df"}):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.func.attr}(")
    return found


def test_no_page_draws_a_table_but_through_data_table() -> None:
    files = sorted((ROOT / "pages").glob("*.py")) + sorted((ROOT / "dashboard").glob("*.py"))
    calls = [c for path in files for c in _raw_table_calls(path)]
    allowed = [c for c in calls if c.startswith("dashboard/components.py")]
    assert len(allowed) == 1, calls  # the one st.dataframe, inside data_table
    assert [c for c in calls if c not in allowed] == []


def test_the_raw_toolbar_export_is_off_in_the_repo_config_and_the_service_command() -> None:
    assert "disableDataExport = true" in (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert '"--client.disableDataExport", "true"' in (ROOT / "backend" / "service" / "supervisor.py").read_text(
        encoding="utf-8")
