"""Fixtures for the login tests: the lab fleet's lake, a real OIDC provider, and the app with login on."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.config import load_fleet
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.conftest import StreamlitServer, stop_process_group, wait_for_streamlit
from tests.rig.kafka import ZooKeeperServer
from tests.rig.oidc import OidcProvider, provider_installed
from tests.rig.procs import REPO, free_port

# Two of the seven lab clusters are granted to the viewer; both have clients pushing configs, so every
# client-config page, export and the drift report has something to show for exactly these two.
GRANTED = ("prod-eu", "prod-us")
# Topic names found only on clusters the viewer may not see (client ids of the granted ones reuse words such as
# "billing" or "telemetry"); every topic id of those clusters is checked too.
HIDDEN_TOPICS = ("etl.events", "scratch")
COOKIE_SECRET = "fleetview-login-test-cookie-secret"  # signs the test server's cookies only
USERS: dict[str, dict[str, Any]] = {
    # view on prod-eu (group) and prod-us (group and, again, by e-mail: grants combine)
    "viewer": {"email": "viewer@example.com", "email_verified": True, "name": "Vera Viewer", "groups": ["team-eu"]},
    # a Keycloak-style token: roles nested under realm_access, no groups claim
    "keycloak": {"email": "kc@example.com", "email_verified": True, "realm_access": {"roles": ["team-us"]}},
    # may log in (visitors is an allowed group) but no cluster grants anything to it
    "nogrant": {"email": "nobody@example.com", "email_verified": True, "groups": ["visitors"]},
    # not in any allowed group
    "stranger": {"email": "stranger@example.com", "email_verified": True, "groups": ["contractors"]},
    "operator": {"email": "ops@example.com", "email_verified": True, "groups": ["kafka-admins"]},
}
AUTH_TOML = """[auth]
required = true
groups_claim = ["groups", "realm_access.roles"]
allowed_groups = ["team-eu", "team-us", "kafka-admins", "visitors"]
max_session_hours = {hours}
default_access = {{ operate = ["group:kafka-admins"] }}

"""
ACCESS = {
    "prod-eu": 'access = { view = ["group:team-eu"], operate = ["group:kafka-admins"] }',
    "prod-us": 'access = { view = ["group:team-eu", "group:team-us", "user:Viewer@Example.com"], '
               'operate = ["group:kafka-admins"] }',
}


@dataclass(frozen=True)
class LabLake:
    """A lake the poller, ingest and the Spark job wrote from the seven lab clusters."""

    path: Path
    fleet_text: str
    cluster_ids: dict[str, str]
    topics: dict[str, list[str]]
    topic_ids: dict[str, list[str]]

    def hidden_names(self) -> list[str]:
        """The lab clusters the viewer may not see."""
        return [name for name in self.cluster_ids if name not in GRANTED]


@pytest.fixture(scope="module")
def lab_lake(zookeeper: ZooKeeperServer, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabLake]:
    """Two polls of lab.toml's seven clusters (a topic recreated in between), 120 clients' configs, one analysis."""
    from backend.collect.poller import run_poller
    from backend.configs.ingest import ingest_sink
    from backend.lab.clientgen import push_client_fleet
    from backend.pipeline.job import run_analysis

    root = tmp_path_factory.mktemp("auth-lab")
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(root / "lab")
    lab = LabFleet(parse_lab_config(raw, REPO), zookeeper_connect=zookeeper.connect)
    lab.start()
    try:
        fleet_file = lab.write_fleet_file(root / "lab-clusters.toml")
        fleet = load_fleet(fleet_file, secrets_path=root / "no-secrets.toml")
        lake = root / "lake"
        _, outcomes = push_client_fleet(lab, 120, seed=20)
        assert any(o.status == "accepted" for o in outcomes)
        run_poller(fleet, str(lake), once=True)
        lab.recreate_topic("prod-eu", "payments")
        run_poller(fleet, str(lake), once=True)
        sink = lab.config.sink_dir
        assert sink is not None
        ingest_sink(str(lake), sink)
        run_analysis(str(lake))
        ids = {name: info.cluster_id for name, info in lab.clusters.items()}
        topics = {name: [t.name for t in lab.runtimes[name].spec.topics] for name in lab.clusters}
        topic_ids = {name: [lab.topic_id(name, t) for t in names] for name, names in topics.items()}
        yield LabLake(lake, fleet_file.read_text(encoding="utf-8"), ids, topics, topic_ids)
    finally:
        lab.stop()


def fleet_toml(lab: LabLake, max_session_hours: float = 12) -> str:
    """The lab's fleet file with [auth] and the grants of the login tests."""
    text = lab.fleet_text
    for name, access in ACCESS.items():
        line = f'name = "{name}"\n'
        assert line in text
        text = text.replace(line, line + access + "\n")
    return AUTH_TOML.format(hours=max_session_hours) + text


@dataclass
class AuthApp:
    """The app with login on: its URL (the redirect_uri's host), the provider and the files it reads."""

    server: StreamlitServer
    url: str
    idp: OidcProvider
    fleet_file: Path
    lab: LabLake
    start: Callable[[], StreamlitServer]

    def restart(self) -> None:
        """Stop the UI server and start a new one on the same port, lake, fleet file and secrets."""
        stop_process_group(self.server.proc)
        self.server = self.start()

    def set_max_session_hours(self, hours: float) -> None:
        """Rewrite the fleet file with another max_session_hours (the app re-reads it when it changes)."""
        self.fleet_file.write_text(fleet_toml(self.lab, hours), encoding="utf-8")


@pytest.fixture(scope="module")
def auth_app(lab_lake: LabLake, streamlit_app: Callable[..., StreamlitServer],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthApp]:
    """oidc-provider on 127.0.0.1 and `streamlit run` with login on, one of each for the module."""
    if not provider_installed():
        pytest.skip("oidc-provider is not installed: run `make oidc-provider`")
    work = tmp_path_factory.mktemp("auth-app")
    port = free_port()
    # The browser must use the redirect_uri's host name: Streamlit's state cookie lives on it.
    url = f"http://localhost:{port}"
    idp = OidcProvider(work / "idp", USERS, [f"{url}/oauth2callback"])
    idp.start()
    try:
        fleet_file = work / "clusters.toml"
        fleet_file.write_text(fleet_toml(lab_lake), encoding="utf-8")
        secrets = work / "secrets.toml"
        secrets.write_text(idp.secrets_toml(COOKIE_SECRET), encoding="utf-8")
        def start() -> StreamlitServer:
            return streamlit_app(lab_lake.path, {"FLEETVIEW_FLEET": str(fleet_file)}, port=port,
                                 extra_args=["--secrets.files", str(secrets)])

        yield AuthApp(start(), url, idp, fleet_file, lab_lake, start)
    finally:
        idp.stop()


def block_the_internet(context: Any) -> None:
    """Only the app and the provider are reachable (the provider's stock pages import web fonts)."""
    context.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith(("http://localhost", "http://127.0.0.1")) else route.abort())


def login(page: Any, app: AuthApp, user: str) -> None:
    """Log in through the app's Log in button and the provider's own sign-in and consent forms."""
    page.goto(f"{app.url}/")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector("input[name=login]", timeout=30000)
    assert page.url.startswith(app.idp.issuer)
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "any password: the provider's development form takes any")
    page.get_by_role("button", name="Sign-in").click()
    # Then the provider's consent step (a new interaction), or straight back to the app.
    page.locator("button:has-text('Continue'), [data-testid='stApp']").first.wait_for(timeout=30000)
    if not page.url.startswith(app.url):
        page.get_by_role("button", name="Continue").click()
    page.wait_for_url(lambda u: u.startswith(app.url), timeout=30000)
    wait_for_streamlit(page)
