"""Small reusable widgets: status badge, copyable id, empty states, export buttons, job progress."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backend.export import images
from backend.export.csv_safe import safe_csv
from backend.jobs import JobRegistry
from backend.plain_text import visible
from backend.views.display import visible_columns, visible_frame
from dashboard import audit, auth
from dashboard.text import option, plain, plain_list

__all__ = ["option", "plain", "plain_list"]  # the one plain-text rule (dashboard/text.py), re-exported for the pages

STATUS_COLORS = {"ok": "green", "degraded": "orange", "down": "red", "auth_failed": "red", "misrouted": "violet"}
# Plain text symbols: headless Chromium often lacks an emoji font.
STATUS_ICONS = {"ok": "✓", "degraded": "!", "down": "✗", "auth_failed": "✗", "misrouted": "≠"}
SEVERITY_MARKDOWN_COLORS = {"critical": "red", "warning": "orange", "info": "blue"}
PROVENANCE_HELP = (
    "reported: the broker answered KIP-885 (BrokerSoftwareName/Version in DescribeCluster); "
    "zookeeper: from its ZooKeeper registration; guessed: the broker lacks KIP-885, so the range of "
    "releases its ApiVersions fingerprint fits is shown; unknown: neither was available"
)
NO_LAKE_HELP = (
    "No poll snapshots in the lake {lake} yet. Run `make demo`, or poll your fleet with "
    "`python -m backend poll --once --config clusters.toml`, or press **Poll now** in the sidebar."
)
NO_RESULTS_HELP = (
    "The client-config pipeline has not run on {lake} yet. Press **Recompute** in the sidebar "
    "or run `python -m backend analyze`."
)


def data_table(frame: pd.DataFrame, *, key: str, name: str | None = None,
               column_config: dict[str, Any] | None = None, column_order: Iterable[str] | None = None,
               **kwargs: Any) -> Any:
    """Every table of the UI goes through here: the frame with hidden characters made visible in every text cell
    (a bidi override shows as <U+202E>), and under it a CSV download written by `safe_csv` (formula guard, no line
    break inside a cell). The dataframe toolbar's own CSV download and clipboard copy are off for the whole app
    (`client.disableDataExport`, see `ensure_no_raw_export`), so this button is the one way a table leaves as CSV.
    Takes st.dataframe's arguments and returns what it returns (the selection event with on_select)."""
    renamed = visible_columns(frame)
    config = {renamed.get(c, c): v for c, v in (column_config or {}).items()}
    order = [renamed.get(c, c) for c in column_order] if column_order is not None else None
    event = st.dataframe(visible_frame(frame), key=key, column_config=config or None, column_order=order, **kwargs)
    hidden = {c for c, v in (column_config or {}).items() if v is None}
    columns = [c for c in (column_order if column_order is not None else frame.columns) if c not in hidden]
    exported = frame.loc[:, columns]
    stem = file_stem(name or key)
    st.download_button("CSV", deferred_export(f"{stem}.csv", lambda: safe_csv(exported), _clusters_of(exported)),
                       file_name=f"{stem}.csv", mime="text/csv",
                       key=f"{key}_csv", on_click="ignore", icon=":material/download:", type="tertiary",
                       help="This table as CSV, with spreadsheet formulas neutralised")
    return event


RAW_EXPORT_OPTION = "client.disableDataExport"


def ensure_no_raw_export() -> bool:
    """Turn off the dataframe toolbar's CSV download and clipboard copy (they write cells as they are, formulas
    included) when the server was started without `client.disableDataExport = true` (.streamlit/config.toml, the
    service's command line); True when it had to, and the caller reruns so the browser gets the setting."""
    if st.get_option(RAW_EXPORT_OPTION):
        return False
    st.set_option(RAW_EXPORT_OPTION, True)
    return True


def status_badge(status: str, error: str | None = None) -> None:
    """Coloured status badge, with the error underneath when there is one."""
    st.badge(status, color=STATUS_COLORS.get(status, "gray"))  # type: ignore[arg-type]
    if error:
        st.caption(f":material/warning: {plain(error)}")


def status_cell(status: str) -> str:
    """Status text with an icon, for table cells."""
    return f"{STATUS_ICONS.get(status, '?')} {status}"


def colored_counts(counts: dict[str, int], colors: dict[str, str]) -> str:
    """Markdown like ':green[ok 3] · :red[down 1]' for tile captions."""
    return " · ".join(f":{colors.get(name, 'gray')}[{name} {n}]" for name, n in counts.items())


def cluster_link(name: str) -> str:
    """Relative URL of a cluster's page."""
    return "./cluster?" + urlencode({"cluster": name})


def copyable_id(label: str, value: str | None) -> None:
    """An id in a code block (Streamlit adds a copy button)."""
    st.caption(label)
    st.code(visible(value) or "—", language=None)  # literal, but a bidi override would still be obeyed


def no_lake(location: str) -> None:
    """Explain how to get data into an empty lake."""
    st.info(NO_LAKE_HELP.format(lake=plain(location)), icon=":material/inbox:")


def no_results(location: str) -> None:
    """Explain how to run the pipeline."""
    st.info(NO_RESULTS_HELP.format(lake=plain(location)), icon=":material/functions:")


def unreadable_files(paths: list[str]) -> None:
    """Warn about lake files that were skipped because they cannot be read."""
    if paths:
        shown = ", ".join(plain(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        st.warning(f"Skipped unreadable result files: {shown}. Press **Recompute** (or run "
                   "`python -m backend analyze`) to rewrite them.", icon=":material/warning:")


def file_stem(title: str) -> str:
    """A safe download file name from a chart title: 'Value shares · acks' -> 'value-shares-acks'."""
    return "-".join(re.findall(r"[a-z0-9.]+", title.lower())) or "chart"


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _image_maker(fig: go.Figure, fmt: str) -> Callable[[], bytes]:
    return lambda: images.figure_image(fig, fmt)


def _clusters_of(frame: pd.DataFrame | None) -> list[str]:
    for column in ("cluster_name", "cluster"):
        if frame is not None and column in frame:
            return sorted({str(c) for c in frame[column].dropna().unique()})[:50]
    return []


def deferred_export(name: str, make: Callable[[], Any], clusters: Iterable[str] = ()) -> Callable[[], Any]:
    """A deferred download's data maker that writes an audit record (who, what, clusters) when it is fetched."""
    fleet, _ = auth.policy()
    return audit.on_export(fleet, auth.person(), name, make, clusters)


def audit_journal(fleet: Any) -> str | None:
    """The audit journal directory this UI writes to (its records not yet rolled into the lake are read there)."""
    return audit.journal_of(fleet)


def export_recorder(name: str, clusters: Iterable[str] = ()) -> Callable[[], None]:
    """An on_click callback for a download button: the audit record of the export (who, what, which clusters)."""
    fleet, _ = auth.policy()
    person, chosen = auth.person(), tuple(clusters)
    return lambda: audit.write(fleet, person, "export", name, clusters=chosen)


def export_buttons(fig: go.Figure | None, frame: pd.DataFrame | None, *, name: str, key: str) -> None:
    """Download buttons: chart as PNG, SVG and HTML; data as CSV and Parquet."""
    cols = st.columns(5)
    clusters = _clusters_of(frame)
    if fig is not None:
        cols[0].download_button("PNG", deferred_export(f"{name}.png", _image_maker(fig, "png"), clusters),
                                file_name=f"{name}.png", mime="image/png",
                                key=f"{key}_png", on_click="ignore", icon=":material/image:")
        cols[1].download_button("SVG", deferred_export(f"{name}.svg", _image_maker(fig, "svg"), clusters),
                                file_name=f"{name}.svg", mime="image/svg+xml", key=f"{key}_svg", on_click="ignore")
        cols[2].download_button("HTML", images.figure_html(fig), file_name=f"{name}.html", mime="text/html",
                                key=f"{key}_html", on_click=export_recorder(f"{name}.html", clusters))
    if frame is not None:
        cols[3].download_button("CSV", safe_csv(frame), file_name=f"{name}.csv", mime="text/csv",
                                key=f"{key}_csv", on_click=export_recorder(f"{name}.csv", clusters))
        cols[4].download_button("Parquet", _parquet_bytes(frame), file_name=f"{name}.parquet",
                                mime="application/vnd.apache.parquet", key=f"{key}_parquet",
                                on_click=export_recorder(f"{name}.parquet", clusters))


@st.cache_resource
def job_registry() -> JobRegistry:
    """One registry of background jobs per server process."""
    return JobRegistry()


@st.fragment(run_every=2)
def job_progress() -> None:
    """Live status of the latest poll and analyze jobs (re-runs every 2 s, never blocks); for operators only, since
    a poll's output names every cluster."""
    if not auth.may_operate():
        return
    registry = job_registry()
    for kind in ("poll", "analyze"):
        job = registry.current(kind)
        if job is None:
            continue
        status = registry.status(job)
        icon = {"running": ":material/hourglass_top:", "succeeded": ":material/check_circle:",
                "failed": ":material/error:"}[status.state]
        st.caption(f"{icon} {kind}: {status.state} ({status.elapsed_s:.0f} s)")
        if status.tail:
            st.code("\n".join(visible(line) for line in status.tail[-4:]), language=None)


@st.fragment(run_every=5)
def service_block(location: str, *, with_error: bool = True) -> None:
    """The running service's jobs: last run (age, duration, outcome), next run, last error; plain text."""
    import time

    from backend.service.status import service_for_lake
    from backend.views.service_views import service_lines

    status = service_for_lake(location)[1]
    if status is None:
        st.caption("The service stopped.")
        return
    st.text("\n".join(visible(line) for line in service_lines(status, time.time(), with_error=with_error)))


def shared_cluster_ids(collisions: dict[str, list[str]]) -> None:
    """Warn that clusters share a cluster id, so their client-config results are shown under the joined name."""
    if not collisions:
        return
    listed = "; ".join(f"{', '.join(plain(n) for n in names)} report {plain(cid)}" for cid, names in collisions.items())
    st.warning(f"Clusters share a cluster id (KIP-78 ids should be unique): {listed}. Their client-config results "
               "cannot be told apart, so they are shown under the joined name \"a / b (same cluster id)\", "
               "never under one of the names alone.", icon=":material/content_copy:")
