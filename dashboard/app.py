"""Streamlit entrypoint: page config, the login gate, shared sidebar (lake, tag filters, Poll now, Recompute), navigation."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the repo root.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from backend import jobs  # noqa: E402 - needs the sys.path bootstrap above
from backend.configs.sensitive import install_log_filter  # noqa: E402
from backend.views import fleet_views  # noqa: E402
from dashboard import audit, auth, charts, components, data  # noqa: E402
from dashboard.search_box import search_box  # noqa: E402

PAGES = (
    ("../pages/fleet.py", "Fleet", ":material/hub:", "fleet"),
    ("../pages/cluster.py", "Cluster", ":material/dns:", "cluster"),
    ("../pages/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    ("../pages/consumer_groups.py", "Consumer groups", ":material/groups:", "consumer_groups"),
    ("../pages/client_configs.py", "Client configs", ":material/tune:", "client_configs"),
    ("../pages/clients.py", "Clients", ":material/devices:", "clients"),
    ("../pages/upgrade.py", "Upgrade readiness", ":material/upgrade:", "upgrade"),
    ("../pages/standards.py", "Standards", ":material/rule:", "standards"),
    ("../pages/alerts.py", "Alerts", ":material/notifications:", "alerts"),
    ("../pages/export.py", "Export", ":material/download:", "export"),
    ("../pages/search.py", "Search", ":material/search:", "search"),
    ("../pages/across.py", "Across the fleet", ":material/public:", "across"),
    ("../pages/audit.py", "Audit", ":material/policy:", "audit"),  # holders of the audit grant only (pages())
)
# Reached from links (the Search page's hits), not listed in the sidebar: Streamlit folds a list of more than 12
# pages behind "View more".
DETAIL_PAGES = frozenset({"across"})


def pages() -> list[st.Page]:
    """Every page at its own URL path (/fleet, /cluster, ...); the Fleet page is also the default, at /.

    Streamlit serves its default page at / only, under a page hash made from its url_path: the default is a copy of
    the Fleet page under another url_path, and the Fleet page itself stays reachable at /fleet, hidden from the
    sidebar so it is listed once.
    """
    default = PAGES[0]
    listed = [st.Page(default[0], title=default[1], icon=default[2], url_path="home", default=True)]
    listed.append(st.Page(default[0], title=default[1], icon=default[2], url_path=default[3], visibility="hidden"))
    listed += [st.Page(path, title=title, icon=icon, url_path=url, visibility="hidden" if url in DETAIL_PAGES else "visible")
               for path, title, icon, url in PAGES[1:] if url != "audit" or auth.may_audit_log()]
    return listed


def sidebar(access: auth.Access) -> None:
    """Shared widgets: who is logged in, lake path, tag filters, Poll now / Recompute and their progress."""
    with st.sidebar:
        auth.logout_button()
        names = list(data.lake_choices())
        st.selectbox("Lake", names, key="app_lake", disabled=len(names) < 2,
                     help="The lakes the fleet file names ([settings] lake_path and lakes), or $FLEETVIEW_LAKE.")
        location = data.lake()
        if problem := data.lake_error(location):
            st.error(components.plain(problem), icon=":material/error:")
        has_snapshots, _ = data.lake_state(location)
        if has_snapshots:
            options = fleet_views.tag_options(data.latest_clusters(location))
            for key in fleet_views.TAG_KEYS:
                st.multiselect(key, options.get(key, []), key=f"app_tag_{key}", placeholder=f"all {key}s")
            search_box(location)
        job_buttons(location, access)


def job_buttons(location: str, access: auth.Access) -> None:
    """The service block, and Poll now / Recompute: run by the service when it runs, else as background jobs."""
    service = data.service_status(location)
    if service is not None:
        # A job's last error may name any cluster of the fleet: its text goes to operators of them all.
        components.service_block(location, with_error=access.operate_all)
    if not access.operate_all:
        st.caption("Poll now and Recompute need the operate role on every cluster of the fleet file.")
        return
    registry = components.job_registry()
    fleet = data.fleet_file()
    if st.button("Poll now", width="stretch", key="app_poll", icon=":material/refresh:",
                 help="Asks the running service to poll now" if service is not None
                 else "Runs python -m backend poll --once in the background"):
        audit_operate("poll_now")
        if jobs.run_job("poll", registry, lake=location, fleet_file=fleet, cwd=Path(_ROOT)) == "service":
            st.toast("The service polls now.")
    if st.button("Recompute", width="stretch", key="app_recompute", icon=":material/functions:",
                 help="Asks the running service to run the analysis next" if service is not None
                 else "Runs python -m backend analyze in the background"):
        audit_operate("recompute")
        if jobs.run_job("analyze", registry, lake=location, fleet_file=fleet, cwd=Path(_ROOT)) == "service":
            st.toast("The service runs the analysis next.")
    if service is None and (registry.current("poll") or registry.current("analyze")):
        components.job_progress()


def audit_operate(job: str) -> None:
    """The audit record of an operate action (Poll now, Recompute: every cluster of the fleet file)."""
    fleet, _ = auth.policy()
    audit.write(fleet, auth.person(), "operate", job, clusters=[c.name for c in fleet.clusters] if fleet else [])


def audit_view(navigation: st.navigation) -> None:  # type: ignore[valid-type]
    """The audit record of a page view (when the page or its cluster/group changes, not at every rerun)."""
    fleet, _ = auth.policy()
    params = {k: str(st.query_params.get(k)) for k in ("cluster", "group") if st.query_params.get(k)}
    if "cluster" in params and not data.may_view(data.lake(), params["cluster"]):
        return  # the page refuses it and records the refusal
    audit.page_view(fleet, auth.person(), getattr(navigation, "url_path", "") or "home", params)


# The favicon is the product's own file (sent inline as a data: URL): a :material/...: icon would make every
# browser fetch it from fonts.gstatic.com.
ICON = Path(__file__).resolve().parent / "icon.svg"


def main() -> None:
    """Configure the app, draw the shared sidebar and run the selected page."""
    st.set_page_config(page_title="Kafka fleet view", page_icon=ICON, layout="wide")
    charts.register_template()
    install_log_filter()  # idempotent: the server's log never carries a credential-shaped value
    access = auth.gate()  # before any page or sidebar widget: stops the run at the login or "no access" page
    navigation = st.navigation(pages())
    if components.ensure_no_raw_export():
        st.rerun()  # the browser learns the option from the next run's session message (same page: after navigation)
    audit_view(navigation)
    sidebar(access)
    if access.banner:
        st.warning(access.banner, icon=":material/lock_open:")
    components.unreadable_files(data.lake_problems(data.lake()))
    navigation.run()


if __name__ == "__main__":
    main()
