"""Plotly figure factories: a tidy DataFrame in, a go.Figure out (no Streamlit here)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from backend.plain_text import visible

TEMPLATE = "fleetview"
SEVERITY_COLORS = {"critical": "#c62828", "warning": "#ef8f00", "info": "#1e88e5"}
_PALETTE = ["#1e88e5", "#43a047", "#ef8f00", "#8e24aa", "#00897b", "#c62828", "#6d4c41", "#546e7a"]


__all__ = [
    "SEVERITY_COLORS", "TEMPLATE", "agreement_heatmap", "alerts_over_time_chart", "categorical_distribution",
    "client_versions_chart",
    "default_share_chart", "drift_heatmap", "esc", "numeric_distribution", "register_template", "upgrade_timeline_chart",
    "version_matrix_chart", "group_lag_window_chart", "groups_by_status_chart", "STANDARDS_COLORS",
    "standards_matrix_chart", "standards_trend_chart",
]


def register_template() -> None:
    """Register the one 'fleetview' template; figures name it, so Plotly's global default stays untouched."""
    if TEMPLATE not in pio.templates:
        base = go.layout.Template(pio.templates["plotly_white"])
        base.layout.colorway = _PALETTE
        base.layout.font = {"family": "Inter, Helvetica, Arial, sans-serif", "size": 13}
        base.layout.margin = {"l": 60, "r": 20, "t": 50, "b": 50}
        base.layout.title = {"x": 0.0, "xanchor": "left"}
        pio.templates[TEMPLATE] = base


def esc(value: object) -> str:
    """Data as Plotly label text: hidden characters made visible (`backend.plain_text.visible`: a bidi override
    shows as <U+202E>), then HTML-escaped, since Plotly renders <a href>, <span style> and <br> in labels."""
    return html.escape(visible(value), quote=False)


def _escaped(values: object) -> list[str]:
    return [esc(v) for v in values]  # type: ignore[attr-defined]


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, template=TEMPLATE, xaxis_visible=False, yaxis_visible=False,
                      annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5,
                                    "xref": "paper", "yref": "paper"}])
    return fig


def version_matrix_chart(df: pd.DataFrame, *, title: str = "Broker versions by cluster") -> go.Figure:
    """Heatmap of clusters × software versions, cell = brokers."""
    register_template()
    if df.empty:
        return _empty(title, "no broker snapshots")
    grid = df.pivot_table(index="cluster", columns="version", values="brokers", aggfunc="sum")
    counts = grid.to_numpy()
    # An empty cell is no broker: blank, not a 0.
    text = [["" if pd.isna(v) else f"{int(v)}" for v in row] for row in counts]
    fig = go.Figure(go.Heatmap(z=counts, x=_escaped(grid.columns), y=_escaped(grid.index), text=text,
                               texttemplate="%{text}", colorscale="Blues", hoverongaps=False,
                               hovertemplate="%{y}<br>%{x}: %{z} broker(s)<extra></extra>"))
    fig.update_xaxes(tickangle=0, automargin=True)
    fig.update_layout(title=esc(title), template=TEMPLATE, height=max(260, 40 * len(grid) + 140))
    return fig


def upgrade_timeline_chart(df: pd.DataFrame, *, title: str = "Upgrade timeline") -> go.Figure:
    """Scatter of broker version changes over time, one row per cluster."""
    register_template()
    if df.empty:
        return _empty(title, "no version changes in the snapshot history")
    fig = go.Figure(go.Scatter(
        x=df["changed_at"], y=_escaped(df["cluster"]), mode="markers", marker={"size": 12},
        customdata=[[esc(b), esc(f), esc(t)] for b, f, t in zip(df["broker_id"], df["from_version"],
                                                                  df["to_version"], strict=True)],
        hovertemplate="%{x}<br>%{y}<br>broker %{customdata[0]}: %{customdata[1]} → %{customdata[2]}"
                      "<extra></extra>"))
    fig.update_layout(title=title, template=TEMPLATE, xaxis_title="time", yaxis_title="cluster")
    return fig


def drift_heatmap(df: pd.DataFrame, *, title: str = "Config drift (TVD) by key and cluster pair") -> go.Figure:
    """Heatmap of keys (rows, most drifting first) × cluster pairs, cell = total variation distance."""
    register_template()
    if df.empty:
        return _empty(title, "no drift results for these clusters")
    fig = go.Figure(go.Heatmap(z=df.to_numpy(), x=_escaped(df.columns), y=_escaped(df.index), zmin=0, zmax=1,
                               colorscale="OrRd", colorbar={"title": "TVD"},
                               text=df.round(2).to_numpy(), texttemplate="%{text}",
                               hovertemplate="%{y}<br>%{x}<br>TVD %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=title, template=TEMPLATE, height=max(300, 28 * len(df) + 160))
    return fig


def categorical_distribution(df: pd.DataFrame, *, key: str, title: str | None = None,
                             spellings: dict[str, str] | None = None) -> go.Figure:
    """Stacked 100% bars: share of client instances per value of one key, one bar per cluster.

    Rows with ``folded=True`` (config_views.top_values) are drawn grey; ``spellings`` (normalised value ->
    reported spellings) is shown on hover.
    """
    register_template()
    title = title or f"{esc(key)}: value share per cluster"
    frame = df[df["key"] == key]
    if frame.empty:
        return _empty(title, f"no distribution for {esc(key)}")
    folded = set(frame.loc[frame["folded"].astype(bool), "value"]) if "folded" in frame.columns else set()
    grouped = frame.groupby(["cluster", "value"], dropna=False)["instance_count"].sum().reset_index()
    totals = grouped.groupby("cluster")["instance_count"].transform("sum")
    grouped["share"] = grouped["instance_count"] / totals
    spellings = spellings or {}
    fig = go.Figure()
    values = grouped["value"].fillna("(null)")
    order = sorted(values.unique(), key=lambda v: (v in folded, -grouped.loc[values == v, "instance_count"].sum(), v))
    for value in order:
        part = grouped[values == value]
        said = f" (reported as {spellings[value]})" if value in spellings else ""
        fig.add_bar(x=_escaped(part["cluster"]), y=part["share"], name=esc(value),
                    marker_color="#b0bec5" if value in folded else None,
                    customdata=[[n, esc(value), esc(said)] for n in part["instance_count"]],
                    hovertemplate="%{x}<br>%{customdata[1]}%{customdata[2]}: %{y:.1%} "
                                  "(%{customdata[0]} instances)<extra></extra>")
    fig.update_layout(title=title, template=TEMPLATE, barmode="stack", yaxis_tickformat=".0%",
                      yaxis_range=[0, 1], legend_title="value")
    return fig


def agreement_heatmap(df: pd.DataFrame, *, title: str = "How far clients agree, per key and cluster") -> go.Figure:
    """Heatmap of keys × clusters, cell = share of instances on the key's dominant value (text: that value)."""
    register_template()
    if df.empty:
        return _empty(title, "no client-config distributions")
    keys = list(dict.fromkeys(df["key"]))
    clusters = sorted(df["cluster"].unique())
    cell = df.set_index(["key", "cluster"])
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    custom: list[list[list[object]]] = []
    for k in keys:
        zr: list[float | None] = []
        tr: list[str] = []
        cr: list[list[object]] = []
        for c in clusters:
            if (k, c) in cell.index:
                row = cell.loc[(k, c)]
                value = str(row["dominant_value"])
                zr.append(float(row["dominant_share"]))
                tr.append(esc(value if len(value) <= 14 else value[:13] + "…"))
                cr.append([esc(value), int(row["instances"]), int(row["values"])])
            else:
                zr.append(None)
                tr.append("")
                cr.append(["", 0, 0])
        z.append(zr)
        text.append(tr)
        custom.append(cr)
    fig = go.Figure(go.Heatmap(
        z=z, x=_escaped(clusters), y=_escaped(keys), zmin=0, zmax=1, text=text, texttemplate="%{text}",
        customdata=custom, colorscale=[[0, "#c62828"], [0.5, "#ffb74d"], [1, "#e8f5e9"]], hoverongaps=False,
        colorbar={"title": "dominant<br>share", "tickformat": ".0%"},
        hovertemplate="%{y} · %{x}<br>dominant value %{customdata[0]}: %{z:.0%} of %{customdata[1]} instances"
                      "<br>%{customdata[2]} distinct values<extra></extra>"))
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(side="top", tickangle=0, automargin=True)
    fig.update_layout(title=title, template=TEMPLATE, height=max(300, 24 * len(keys) + 150))
    return fig


def numeric_distribution(df: pd.DataFrame, *, key: str, title: str | None = None) -> go.Figure:
    """Box per cluster from the numeric summary (min, median, p90, max) of one key."""
    register_template()
    title = title or f"{esc(key)}: distribution per cluster"
    frame = df[df["key"] == key]
    if frame.empty:
        return _empty(title, f"no numeric summary for {esc(key)}")
    fig = go.Figure()
    for _, row in frame.iterrows():
        label = esc(row["cluster"] + (f" ({row['client_type']})" if row.get("client_type") else ""))
        # Precomputed boxes need their own x: without one, plotly draws every trace at x=0, on top of each other.
        fig.add_trace(go.Box(name=label, x=[label], lowerfence=[row["min"]], q1=[row["min"]], median=[row["p50"]],
                             q3=[row["p90"]], upperfence=[row["max"]], boxpoints=False))
    fig.update_layout(title=title, template=TEMPLATE, showlegend=False,
                      yaxis_title=f"{esc(key)} (box: min–p90, whiskers to max)")
    fig.update_xaxes(type="category")
    return fig


def default_share_chart(df: pd.DataFrame, *, title: str = "Default vs overridden") -> go.Figure:
    """Horizontal stacked bars of default vs overridden share per cluster and key."""
    register_template()
    if df.empty:
        return _empty(title, "no default-share results")
    label = _escaped(df["cluster"] + " · " + df["key"])
    fig = go.Figure([
        go.Bar(y=label, x=df["default_share"], name="default", orientation="h"),
        go.Bar(y=label, x=1 - df["default_share"], name="overridden", orientation="h"),
    ])
    fig.update_layout(title=title, template=TEMPLATE, barmode="stack", xaxis_tickformat=".0%",
                      height=max(280, 24 * len(df) + 140))
    return fig


def client_versions_chart(df: pd.DataFrame, *, title: str = "Client software per cluster") -> go.Figure:
    """Stacked bars of client instances per software name and version, one bar per cluster."""
    register_template()
    if df.empty:
        return _empty(title, "no client software results")
    frame = df.assign(software=df["client_software_name"].fillna("unknown") + " "
                      + df["client_software_version"].fillna("?"))
    grouped = frame.groupby(["cluster", "software"])["instances"].sum().reset_index()
    fig = go.Figure([go.Bar(x=_escaped(part["cluster"]), y=part["instances"], name=esc(sw))
                     for sw, part in grouped.groupby("software")])
    fig.update_layout(title=title, template=TEMPLATE, barmode="stack", yaxis_title="client instances")
    return fig


def alerts_over_time_chart(df: pd.DataFrame, *, title: str = "Alerts over time") -> go.Figure:
    """Stacked bars of alerts per time bucket, coloured by severity."""
    register_template()
    if df.empty:
        return _empty(title, "no alerts")
    fig = go.Figure([go.Bar(x=part["bucket"], y=part["alerts"], name=esc(sev),
                            marker_color=SEVERITY_COLORS.get(sev))
                     for sev, part in df.groupby("severity")])
    fig.update_layout(title=title, template=TEMPLATE, barmode="stack", yaxis_title="alerts")
    return fig


def group_lag_window_chart(df: pd.DataFrame, *, group: str, title: str | None = None) -> go.Figure:
    """A group's lag at each read of its window (read_at, lag): the trend its status is judged on."""
    register_template()
    title = title or f"Lag of {esc(group)} over its window"
    if df.empty:
        return _empty(title, "no reads yet")
    lag = df["lag"].astype("float64")
    fig = go.Figure(go.Scatter(x=df["read_at"], y=lag, mode="lines+markers", name="lag",
                               hovertemplate="%{x|%H:%M:%S}<br>lag %{y:,.0f}<extra></extra>"))
    fig.update_layout(title=title, template=TEMPLATE, yaxis_title="records behind", height=300, showlegend=False)
    return fig


def groups_by_status_chart(df: pd.DataFrame, *, title: str = "Consumer groups by status") -> go.Figure:
    """Stacked bars of groups per cluster (x: cluster) and status (one column per status)."""
    register_template()
    if df.empty:
        return _empty(title, "no groups")
    colors = {"ok": "#43a047", "lagging": "#ef8f00", "stalled": "#c62828", "stopped": "#6d4c41",
              "empty_with_lag": "#8e24aa", "unknown": "#9e9e9e"}
    statuses = [c for c in df.columns if c != "status"] if "status" in df.columns else []
    fig = go.Figure([go.Bar(x=_escaped(statuses), y=[row[c] for c in statuses], name=esc(row["status"]),
                            marker_color=colors.get(str(row["status"])))
                     for _, row in df.iterrows()])
    fig.update_layout(title=title, template=TEMPLATE, barmode="stack", yaxis_title="groups")
    return fig


STANDARDS_COLORS = {"violation": "#c62828", "unknown": "#9e9e9e", "upcoming": "#ef8f00", "waived": "#8e24aa",
                    "pass": "#43a047", "": "#ffffff"}
_STANDARDS_CODES = {"": 0, "pass": 1, "waived": 2, "upcoming": 3, "unknown": 4, "violation": 5}


def standards_matrix_chart(df: pd.DataFrame, *, title: str = "Policies by cluster") -> go.Figure:
    """Policy x cluster grid (index: policy id, columns: clusters, cells: status; '' = does not apply)."""
    register_template()
    if df.empty:
        return _empty(title, "no policy results")
    codes = df.map(lambda s: _STANDARDS_CODES.get(str(s), 0))
    n = len(_STANDARDS_CODES) - 1
    scale: list[list[object]] = []
    for status, code in sorted(_STANDARDS_CODES.items(), key=lambda kv: kv[1]):
        scale += [[max((code - 0.5) / n, 0.0), STANDARDS_COLORS[status]], [min((code + 0.5) / n, 1.0),
                                                                             STANDARDS_COLORS[status]]]
    text = df.map(lambda s: esc(s or "does not apply"))
    fig = go.Figure(go.Heatmap(z=codes.to_numpy(), x=_escaped(df.columns), y=_escaped(df.index), zmin=0, zmax=n,
                               colorscale=scale, showscale=False,
                               text=text.to_numpy(), hovertemplate="%{y} on %{x}: %{text}<extra></extra>",
                               xgap=2, ygap=2))
    fig.update_layout(title=title, template=TEMPLATE, height=max(300, 28 * len(df) + 120),
                      yaxis={"autorange": "reversed"})
    return fig


def standards_trend_chart(df: pd.DataFrame, *, title: str = "Policies passing over 30 days") -> go.Figure:
    """% passing per day (day, name, percent_passing): one line per name (the fleet, clusters or policies)."""
    register_template()
    if df.empty:
        return _empty(title, "no history yet: the poller records the policies' status every day")
    fig = go.Figure([go.Scatter(x=part["day"], y=part["percent_passing"], mode="lines+markers", name=esc(name),
                                hovertemplate="%{x|%Y-%m-%d}: %{y:.1f}% passing<extra>" + esc(name) + "</extra>")
                     for name, part in df.groupby("name", sort=True)])
    fig.update_layout(title=title, template=TEMPLATE, yaxis={"title": "% passing", "range": [0, 105]},
                      height=360)
    return fig
