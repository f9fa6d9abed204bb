"""One running `fleetview serve` on the lab fleet with login on, a real OIDC provider issuing JWT access tokens, shared
by every API, MCP, Schemathesis and audit test of this package (module scope: they all live in test_api.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc.jwk import RSAKey

from backend.config import load_fleet
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.e2e.auth.conftest import ACCESS, COOKIE_SECRET, GRANTED, HIDDEN_TOPICS, USERS
from tests.rig.kafka import ZooKeeperServer
from tests.rig.oidc import OidcProvider, client_credentials_token, provider_installed, user_token
from tests.rig.procs import LOG_FILES, REPO, free_port, log_tail

AUDIENCE = "urn:fleetview:api"
API_USER_CLIENT = ("api-user", "api-user-secret-for-tests")
REDIRECT = "http://127.0.0.1:9/callback"  # never followed: the test takes the code from the Location header
# Client-credentials clients (machines): their groups decide their grants, as a user's do.
MACHINES: dict[str, list[str]] = {
    "m-viewer": ["team-eu"],  # prod-eu and prod-us: 2 of the 7 lab clusters
    "m-ops": ["kafka-admins"],  # operate on every cluster (default_access)
    "m-auditor": ["kafka-admins", "auditors"],  # every cluster, and the audit grant
    "m-nogrant": ["visitors"],  # may log in, no cluster granted
    "m-stranger": ["contractors"],  # not in allowed_groups
    "m-burst": ["team-eu"],  # the rate-limit test's own principal
    "m-fuzz": ["kafka-admins"],  # Schemathesis's own principal
}
SHORT_LIVED = "m-short"  # tokens that live one second
USERS_API = {**USERS, "auditor": {"email": "auditor@example.com", "email_verified": True, "name": "Ada Auditor",
                                  "groups": ["kafka-admins", "auditors"]}}
AUTH_TOML = """[auth]
required = true
groups_claim = ["groups", "realm_access.roles"]
allowed_groups = ["team-eu", "team-us", "kafka-admins", "visitors", "auditors"]
default_access = {{ operate = ["group:kafka-admins"] }}
audit = ["group:auditors"]
api_audience = "{audience}"

[settings]
poll_interval_s = 4
group_interval_s = 3.5
group_window = 3

[service]
api_rate_per_s = 30
api_rate_burst = 60
audit_compact_interval_s = 1

"""


def secret(client: str) -> str:
    """A test client's secret (a provider on 127.0.0.1 only)."""
    return f"{client}-secret-for-tests"


@dataclass
class ApiRig:
    """The lab, its lake, the provider, and `serve` with its API, UI and metrics endpoints."""

    lab: LabFleet
    lake: Path
    workdir: Path
    idp: OidcProvider
    keys: list[RSAKey]
    proc: subprocess.Popen[bytes]
    log: Path
    api: str  # http://127.0.0.1:PORT/api/v1
    ui: str  # http://localhost:PORT (the redirect_uri's host)
    metrics: str
    fleet_file: Path
    cluster_ids: dict[str, str]
    topics: dict[str, list[str]]
    topic_ids: dict[str, list[str]]
    started: float = field(default_factory=time.monotonic)
    short_token: str = ""
    short_token_at: float = 0.0
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        """The API's origin (the MCP endpoint is {base}/mcp)."""
        return self.api.removesuffix("/api/v1")

    @property
    def journal_dir(self) -> Path:
        """Where the service's processes write their audit journals."""
        return self.lake / "_state" / "service" / "audit"

    def token(self, client: str) -> str:
        """A client-credentials access token of a test machine (cached for the module)."""
        if client not in self.tokens:
            self.tokens[client] = client_credentials_token(self.idp, client, secret(client))
        return self.tokens[client]

    def user_token(self, user: str) -> str:
        """A user's access token (authorization code flow through the provider's forms)."""
        key = f"user:{user}"
        if key not in self.tokens:
            self.tokens[key] = user_token(self.idp, user, *API_USER_CLIENT, REDIRECT, AUDIENCE)
        return self.tokens[key]

    def get(self, path: str, client: str | None = "m-ops", token: str | None = None, **kwargs: Any) -> httpx.Response:
        """GET {api}{path} with a machine's token (client=None and token=None: no token)."""
        headers = dict(kwargs.pop("headers", {}) or {})
        bearer = token or (self.token(client) if client else None)
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        return httpx.get(f"{self.api}{path}", headers=headers, timeout=60, **kwargs)

    def hidden(self) -> list[str]:
        """The lab clusters the 2-of-7 viewer may not see."""
        return [name for name in self.cluster_ids if name not in GRANTED]

    def secrets_of(self, names: list[str]) -> list[str]:
        """Names, cluster ids, topic ids and distinctive topic names of the given clusters."""
        found = list(names) + [self.cluster_ids[n] for n in names if self.cluster_ids.get(n)]
        found += [tid for n in names for tid in self.topic_ids[n]]
        return found + [t for n in names for t in self.topics[n] if t in HIDDEN_TOPICS]

    def logs(self) -> str:
        """serve's log and its children's, for failure messages."""
        parts = [f"--- serve\n{log_tail(self.log, 60)}"]
        for path in sorted((self.lake / "_state" / "service" / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n{log_tail(path, 40)}")
        return "\n".join(parts)

    def rotate_keys(self) -> RSAKey:
        """Restart the provider on the same port with a new signing key only (the API has the old one cached)."""
        new = RSAKey.generate_key(2048, parameters={"kid": f"k{len(self.keys) + 1}", "alg": "RS256", "use": "sig"},
                                  private=True)
        self.keys.append(new)
        self.idp.stop()
        self.idp.jwks = {"keys": [new.as_dict(private=True)]}
        self.idp.start()
        self.tokens.clear()
        return new


def _jwk(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}, private=True)


@pytest.fixture(scope="module")
def api_rig(zookeeper: ZooKeeperServer, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiRig]:
    """The lab's seven clusters polled twice (a topic recreated between), 120 clients' configs analysed, then
    `serve --no-analyze` on that lake with login on, its UI, its API on a free port and the real provider."""
    if not provider_installed():
        pytest.fail("oidc-provider is not installed: run `make oidc-provider`")
    from backend.collect.poller import run_poller
    from backend.configs.ingest import ingest_sink
    from backend.lab.clientgen import push_client_fleet
    from backend.pipeline.job import run_analysis

    root = tmp_path_factory.mktemp("api-rig")
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(root / "lab")
    lab = LabFleet(parse_lab_config(raw, REPO), zookeeper_connect=zookeeper.connect)
    lab.start()
    proc: subprocess.Popen[bytes] | None = None
    idp: OidcProvider | None = None
    try:
        lab_fleet = lab.write_fleet_file(root / "lab-clusters.toml")
        lake = root / "lake"
        push_client_fleet(lab, 120, seed=20)
        fleet = load_fleet(lab_fleet, secrets_path=root / "no-secrets.toml")
        run_poller(fleet, str(lake), once=True)
        lab.recreate_topic("prod-eu", "payments")
        run_poller(fleet, str(lake), once=True)
        assert lab.config.sink_dir is not None
        ingest_sink(str(lake), lab.config.sink_dir)
        run_analysis(str(lake))

        ui_port, metrics_port = free_port(), free_port()
        keys = [_jwk("k1")]
        clients = [{"client_id": name, "client_secret": secret(name), "grant_types": ["client_credentials"],
                    "response_types": [], "redirect_uris": [], "groups": groups} for name, groups in MACHINES.items()]
        clients += [{"client_id": SHORT_LIVED, "client_secret": secret(SHORT_LIVED), "grant_types": ["client_credentials"],
                     "response_types": [], "redirect_uris": [], "groups": ["team-eu"], "token_ttl": 1},
                    {"client_id": API_USER_CLIENT[0], "client_secret": API_USER_CLIENT[1],
                     "grant_types": ["authorization_code"], "response_types": ["code"], "redirect_uris": [REDIRECT]}]
        idp = OidcProvider(root / "idp", USERS_API, [f"http://localhost:{ui_port}/oauth2callback"],
                           extra_clients=clients, jwks={"keys": [keys[0].as_dict(private=True)]}, resource=AUDIENCE)
        idp.start()
        short = client_credentials_token(idp, SHORT_LIVED, secret(SHORT_LIVED))
        short_at = time.monotonic()

        text = lab_fleet.read_text(encoding="utf-8")
        for name, access in ACCESS.items():
            line = f'name = "{name}"\n'
            text = text.replace(line, line + access + "\n")
        fleet_file = root / "clusters.toml"
        fleet_file.write_text(AUTH_TOML.format(audience=AUDIENCE) + text, encoding="utf-8")
        secrets_file = root / "secrets.toml"
        secrets_file.write_text(idp.secrets_toml(COOKIE_SECRET), encoding="utf-8")
        log = root / "serve.log"
        LOG_FILES.append(log)
        cmd = [sys.executable, "-m", "backend", "serve", "--config", str(fleet_file), "--lake", str(lake),
               "--secrets", str(secrets_file), "--metrics-port", str(metrics_port), "--ui-port", str(ui_port),
               "--api-port", "0", "--no-analyze"]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONPATH": str(REPO)})
        api = _wait_for_api(proc, log)
        rig = ApiRig(lab, lake, root, idp, keys, proc, log, api, f"http://localhost:{ui_port}",
                     f"http://127.0.0.1:{metrics_port}", fleet_file,
                     {n: i.cluster_id for n, i in lab.clusters.items()},
                     {n: [t.name for t in lab.runtimes[n].spec.topics] for n in lab.clusters}, {},
                     short_token=short, short_token_at=short_at)
        rig.topic_ids = {n: [lab.topic_id(n, t) for t in ts] for n, ts in rig.topics.items()}
        yield rig
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if idp is not None:
            idp.stop()
        lab.stop()


def _wait_for_api(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> str:
    """The `API: http://HOST:PORT/api/v1` line serve prints, once the API answers there."""
    deadline = time.monotonic() + timeout_s
    api = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited ({proc.returncode}):\n{log_tail(log, 80)}")
        if api is None:
            found = re.search(r"^API: (http://\S+/api/v1)$", log.read_text(encoding="utf-8", errors="replace"), re.M)
            api = found.group(1).replace("//localhost:", "//127.0.0.1:") if found else None
        if api is not None:
            try:
                if httpx.get(f"{api}/openapi.json", timeout=5).status_code == 200:
                    return api
            except httpx.HTTPError:
                pass
        time.sleep(0.5)
    raise AssertionError(f"the API did not answer within {timeout_s:.0f}s:\n{log_tail(log, 80)}")


def decoded(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JWT's header and claims (not verified)."""
    import base64

    def part(text: str) -> dict[str, Any]:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))  # type: ignore[no-any-return]

    header, claims, _ = token.split(".")
    return part(header), part(claims)
