"""The fleet file: a TOML list of clusters, validated into typed models.

Passwords are never written in the fleet file. A cluster names an environment
variable (``sasl_password_env``) or relies on ``.streamlit/secrets.toml``
(``[passwords] <cluster name> = "..."``); the secret is resolved on demand and
never appears in a repr, a log line or an error message.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, ValidationError, field_validator

from backend.service_settings import ClientConfigSource, ServiceSettings
from backend.store.location import ENV_LAKE, check_lake_text, resolve_lake

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

DEFAULT_SECRETS_FILE = ".streamlit/secrets.toml"
ENV_FLEET = "FLEETVIEW_FLEET"
DEFAULT_FLEET_FILE = "clusters.toml"
_INLINE_SECRET_KEYS = {
    "password",
    "sasl_password",
    "sasl.password",
    "ssl_key_password",
    "ssl.key.password",
    "ssl_keystore_password",
    "ssl.keystore.password",
    "secret",
}


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


_CONVENTIONAL_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def _env_label(name: str) -> str:
    """'environment variable NAME' for a conventional UPPER_SNAKE name; otherwise the name is withheld,
    because a lower-case or one-word 'name' is more likely a password pasted into the wrong key."""
    if _CONVENTIONAL_ENV_NAME.fullmatch(name):
        return f"environment variable {name}"
    return "the environment variable it names (name withheld: it does not look like one)"


class FleetConfigError(ValueError):
    """A fleet file that cannot be used; the message names the file, line, cluster and key."""


class Secret:
    """A string that never shows itself in repr or str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret value; only for handing to a client library."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ZooKeeperConfig(_Strict):
    """Where a ZooKeeper-mode cluster registers (KIP-78 ``/cluster/id``)."""

    connect: str = Field(min_length=1)
    chroot: str = ""
    timeout_s: float = Field(default=5.0, gt=0, le=600, allow_inf_nan=False)

    @field_validator("chroot")
    @classmethod
    def _chroot_is_absolute(cls, value: str) -> str:
        if value and (not value.startswith("/") or value.endswith("/")):
            raise ValueError("chroot must start with '/' and not end with '/', e.g. \"/kafka\"")
        return value

    @property
    def connect_string(self) -> str:
        """The connect string with the chroot appended, as kazoo takes it."""
        return f"{self.connect}{self.chroot}"


@dataclass(frozen=True)
class SecuritySettings:
    """The security part of a cluster, grouped for the probe and the admin client."""

    protocol: str
    sasl_mechanism: str | None
    username: str | None
    password_env: str | None
    ssl_cafile: str | None
    ssl_certfile: str | None
    ssl_keyfile: str | None


# A principal in a grant: "group:<name>" (a value of the groups claim), "user:<value>" (the user claim, email by
# default; compared without case) or "*" (anyone who may log in).
_PRINCIPAL = re.compile(r"(group|user):\S.{0,254}|\*", re.DOTALL)
# OIDC client settings belong to Streamlit's secrets file, never to the fleet file.
_OIDC_SECRET_KEYS = {"client_id", "client_secret", "cookie_secret", "server_metadata_url", "redirect_uri",
                     "expose_tokens", "client_kwargs"}


def _check_principals(value: list[str]) -> list[str]:
    for principal in value:
        if not _PRINCIPAL.fullmatch(principal) or principal != principal.strip():
            raise ValueError(f"{principal!r} is not a principal: write \"group:NAME\", \"user:EMAIL\" or \"*\"")
    return value


class AccessGrant(_Strict):
    """Who may view a cluster and who may operate it (Poll now, Recompute); operate implies view."""

    view: list[str] = Field(default_factory=list, max_length=1000)
    operate: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("view", "operate")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        return _check_principals(value)


# A metrics_url template may name these fields of each broker (from Metadata).
_TEMPLATE_FIELDS = frozenset({"host", "broker_id", "port"})
_TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")
# One Prometheus label matcher, as in a selector: name op "value".
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_MATCHERS = re.compile(rf"(?:{_MATCHER}(?:,{_MATCHER})*,?\s*)?")


class BrokerMetricsSource(_Strict):
    """[clusters.broker_metrics]: where the brokers' own JMX metrics are read (backend/collect/client_metrics.py).

    Exactly one of ``metrics_url`` (each broker's Prometheus JMX exporter: a template filled per broker from
    Metadata, e.g. "http://{host}:7071/metrics") or ``prometheus`` (a Prometheus server that scrapes the brokers,
    with the label ``matchers`` that select this cluster). Basic auth: ``username`` with the password from
    ``password_env`` or .streamlit/secrets.toml [metrics_passwords] <cluster name>, never inline.
    """

    metrics_url: str | None = Field(default=None, max_length=2000)
    prometheus: str | None = Field(default=None, max_length=2000)
    matchers: str = Field(default="", max_length=2000)
    username: str | None = Field(default=None, max_length=256)
    password_env: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    timeout_s: float | None = Field(default=None, gt=0, le=600, allow_inf_nan=False)
    # Whether the exporter's rules export KIP-896's DeprecatedRequestsPerSec. Only true makes "no series" mean "no such
    # request": a page cannot tell a meter never created (no such request since the broker started) from one dropped
    # by the rules; a series on a broker's page shows it is exported whatever this says.
    exports_deprecated_requests: bool | None = None

    _password: Secret | None = PrivateAttr(default=None)

    @field_validator("password_env")
    @classmethod
    def _names_an_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must name an environment variable (letters, digits and '_', not starting with a "
                             "digit); the value is withheld from this message")
        return value

    @field_validator("metrics_url", "prometheus")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from urllib.parse import urlsplit

        probe = _TEMPLATE_FIELD.sub("x", value)
        parts = urlsplit(probe)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        if "@" in parts.netloc:
            raise ValueError("must not hold credentials: use username and password_env")
        return value

    @field_validator("metrics_url")
    @classmethod
    def _template_fields(cls, value: str | None) -> str | None:
        if value is not None:
            unknown = sorted(set(_TEMPLATE_FIELD.findall(value)) - _TEMPLATE_FIELDS)
            if unknown:
                raise ValueError(f"unknown template field(s) {', '.join('{' + u + '}' for u in unknown)}; "
                                 "use {host}, {broker_id} or {port}")
        return value

    @field_validator("matchers")
    @classmethod
    def _label_matchers(cls, value: str) -> str:
        inner = value.strip()
        if inner.startswith("{") and inner.endswith("}"):
            inner = inner[1:-1]
        if not _MATCHERS.fullmatch(inner):
            raise ValueError('must be Prometheus label matchers such as job="kafka", cluster="prod"')
        return inner.strip().rstrip(",")

    def problems(self) -> list[tuple[str, str]]:
        """(key, problem) pairs for settings that are valid alone but not together."""
        out: list[tuple[str, str]] = []
        if bool(self.metrics_url) == bool(self.prometheus):
            out.append(("broker_metrics", "set exactly one of metrics_url or prometheus"))
        if self.prometheus is None and self.matchers:
            out.append(("broker_metrics.matchers", "only with prometheus"))
        if self.password_env and not self.username:
            out.append(("broker_metrics.username", "required with password_env"))
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            out.append(("broker_metrics.ssl_keyfile", "ssl_certfile and ssl_keyfile go together"))
        return out

    @property
    def kind(self) -> str:
        """'metrics_url' or 'prometheus'."""
        return "metrics_url" if self.metrics_url else "prometheus"

    @property
    def label(self) -> str:
        """Where the series are read, for messages (holds no secret)."""
        return self.metrics_url or f"{self.prometheus} {{{self.matchers}}}"

    def password(self) -> str | None:
        """The basic-auth password, resolved from the environment or secrets.toml."""
        return self._password.reveal() if self._password else None

    def __repr__(self) -> str:
        return f"BrokerMetricsSource({self.kind}={self.label!r})"

    __str__ = __repr__


class ClusterConfig(_Strict):
    """One cluster of the fleet."""

    name: str = Field(min_length=1, max_length=100)
    bootstrap_servers: list[str] = Field(min_length=1)
    tags: dict[str, str] = Field(default_factory=dict)
    zookeeper: ZooKeeperConfig | None = None
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password_env: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password_env: str | None = None
    ssl_check_hostname: bool = True
    # Who may see and operate this cluster when login is on; None: [auth] default_access applies.
    access: AccessGrant | None = None
    # Where the brokers' JMX metrics are read (client inventory, KIP-511/KIP-896); None: not read.
    broker_metrics: BrokerMetricsSource | None = None

    _password: Secret | None = PrivateAttr(default=None)
    _ssl_key_password: Secret | None = PrivateAttr(default=None)

    @field_validator("sasl_password_env", "ssl_key_password_env")
    @classmethod
    def _names_an_environment_variable(cls, value: str | None) -> str | None:
        # A password pasted here instead of a variable name must not be echoed: the message shows no value.
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must name an environment variable (letters, digits and '_', not starting with a "
                             "digit); the value is withheld from this message")
        return value

    @field_validator("name")
    @classmethod
    def _name_is_simple(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
            raise ValueError("name may hold letters, digits, '.', '_' and '-' only")
        return value

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _split_bootstrap(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port(cls, value: list[str]) -> list[str]:
        for server in value:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port")
        return value

    def combination_problems(self) -> list[tuple[str, str]]:
        """(key, problem) pairs for settings that are valid alone but not together."""
        problems: list[tuple[str, str]] = []
        if self.uses_sasl and not self.sasl_mechanism:
            problems.append(("sasl_mechanism", f"required with security_protocol {self.security_protocol}"))
        if self.uses_sasl and not self.sasl_username:
            problems.append(("sasl_username", f"required with security_protocol {self.security_protocol}"))
        if not self.uses_sasl:
            for key in ("sasl_mechanism", "sasl_username", "sasl_password_env"):
                if getattr(self, key):
                    problems.append((key, "needs security_protocol SASL_PLAINTEXT or SASL_SSL"))
        if not self.uses_tls:
            for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                if getattr(self, key):
                    problems.append((key, "needs security_protocol SSL or SASL_SSL"))
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            problems.append(("ssl_keyfile" if self.ssl_certfile else "ssl_certfile", "ssl_certfile and ssl_keyfile go together"))
        if self.broker_metrics is not None:
            problems.extend(self.broker_metrics.problems())
        return problems

    def __repr__(self) -> str:
        return f"ClusterConfig(name={self.name!r}, bootstrap_servers={self.bootstrap_servers!r}, security_protocol={self.security_protocol!r})"

    __str__ = __repr__

    @property
    def uses_sasl(self) -> bool:
        """Whether the cluster authenticates with SASL."""
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        """Whether the connection is wrapped in TLS."""
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def security(self) -> SecuritySettings:
        """The security settings grouped in one value."""
        return SecuritySettings(
            protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            username=self.sasl_username,
            password_env=self.sasl_password_env,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
        )

    def password(self) -> str | None:
        """The SASL password, resolved from the environment or secrets.toml."""
        return self._password.reveal() if self._password else None

    def ssl_key_password(self) -> str | None:
        """The password of the client key, if any."""
        return self._ssl_key_password.reveal() if self._ssl_key_password else None

    def librdkafka_config(self, request_timeout_s: float = 10.0) -> dict[str, Any]:
        """The confluent-kafka configuration for this cluster (holds the secret: never log it)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": ",".join(self.bootstrap_servers),
            "security.protocol": self.security_protocol,
            "socket.timeout.ms": int(request_timeout_s * 1000),
            "socket.connection.setup.timeout.ms": int(request_timeout_s * 1000),
        }
        if self.uses_sasl:
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.password() or ""
        if self.uses_tls:
            if self.ssl_cafile:
                conf["ssl.ca.location"] = self.ssl_cafile
            if self.ssl_certfile:
                conf["ssl.certificate.location"] = self.ssl_certfile
                conf["ssl.key.location"] = self.ssl_keyfile
            if self.ssl_key_password():
                conf["ssl.key.password"] = self.ssl_key_password()
            if not self.ssl_check_hostname:
                conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf


class Settings(_Strict):
    """Fleet-wide settings."""

    # Bounds keep every later computation finite: inf or 1e300 seconds would crash the poller at its
    # first sleep or deadline, 1e12 days of retention the date arithmetic (docs/security.md).
    poll_interval_s: float = Field(default=30.0, gt=0, le=86_400, allow_inf_nan=False)
    request_timeout_s: float = Field(default=10.0, gt=0, le=600, allow_inf_nan=False)
    poll_deadline_s: float = Field(default=30.0, gt=0, le=3_600, allow_inf_nan=False)
    lake_path: str = "./lake"
    # Further lakes the UI may switch to, by name; the browser can choose only among these.
    lakes: dict[str, str] = Field(default_factory=dict)
    spark_master: str = "local[*]"
    # The address the Spark driver binds and advertises. Unset: 127.0.0.1 (its ports are unauthenticated and it holds
    # every cluster's client configs); a remote master's executors need an address they can reach (docs/spark.md).
    spark_driver_host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.:\-\[\]]{1,253}$")
    retention_days: int = Field(default=30, ge=1, le=3_650)
    # The audit table (who did and read what, docs/api.md) keeps its own, longer retention.
    audit_retention_days: int = Field(default=365, ge=1, le=3_650)
    secrets_file: str = DEFAULT_SECRETS_FILE
    # What one cluster may cost a poll (docs/security.md, "Hostile brokers and ZooKeeper").
    # A Metadata answer above this many bytes is refused (16 MiB fits 200,000 partitions).
    max_metadata_response_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024, le=1024 * 1024 * 1024)
    # Brokers probed per cluster per poll; the others get a row saying they were not probed.
    max_brokers_probed: int = Field(default=256, ge=1, le=10_000)
    # Concurrent probes per cluster (each cluster has its own threads: one cannot starve another).
    probe_concurrency: int = Field(default=16, ge=1, le=256)
    # Broker and topic configurations (DescribeConfigs) are read by the poll at most this often; 0 turns it off.
    config_interval_s: float = Field(default=600.0, ge=0, le=86_400, allow_inf_nan=False)
    # Topics per DescribeConfigs request.
    config_batch_topics: int = Field(default=200, ge=1, le=5_000)
    # Consumer groups (ListGroups, Describe*, OffsetFetch, ListOffsets; read-only) are read at most this often; 0 = off.
    group_interval_s: float = Field(default=60.0, ge=0, le=86_400, allow_inf_nan=False)
    # Groups described and fetched per cluster per read; the others are listed with a row saying they were not read.
    max_groups_per_cluster: int = Field(default=20_000, ge=1, le=1_000_000)
    # Reads in the sliding window a group's status is judged from (Burrow-style), kept per group in the lake.
    group_window: int = Field(default=10, ge=3, le=100)
    # A group with members and lag whose committed offsets have not moved for this long is "stopped".
    group_stopped_after_s: float = Field(default=3_600.0, gt=0, le=30 * 86_400, allow_inf_nan=False)
    # /metrics: per cluster, the groups (worst first) with their own lag series, and the (group, topic) series.
    group_metrics_max_groups: int = Field(default=500, ge=0, le=100_000)
    group_metrics_max_topics: int = Field(default=2_000, ge=0, le=1_000_000)
    # The brokers' JMX metrics (clusters with [clusters.broker_metrics]) are read at most this often; 0 turns it off.
    client_metrics_interval_s: float = Field(default=60.0, ge=0, le=86_400, allow_inf_nan=False)
    # A deprecated request (KIP-896) counts as in use until its count has not grown for this long.
    client_metrics_window_s: float = Field(default=3_600.0, gt=0, le=30 * 86_400, allow_inf_nan=False)
    # An exporter page (or Prometheus answer) above this many bytes is refused.
    client_metrics_max_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024, le=1024 * 1024 * 1024)
    # A topic across the fleet (docs/search.md): MirrorMaker 2 names a remote copy <source alias><separator><topic>.
    # The aliases to look for (unset: the fleet's cluster names) and replication.policy.separator.
    mirror_aliases: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]] | None = Field(default=None,
                                                                                                  max_length=1000)
    mirror_separator: str = Field(default=".", pattern=r"^[A-Za-z0-9._-]{1,16}$")
    # The policy file (docs/standards.md), relative to the fleet file; unset: policies.toml beside it when present.
    policies: str | None = Field(default=None, min_length=1, max_length=4096)

    @field_validator("lake_path")
    @classmethod
    def _lake_path_is_a_lake(cls, value: str) -> str:
        check_lake_text(value)
        return value

    @field_validator("lakes")
    @classmethod
    def _lakes_are_named_lakes(cls, value: dict[str, str]) -> dict[str, str]:
        for name, location in value.items():
            if not name.strip() or len(name) > 64:
                raise ValueError(f"lake names must be 1-64 characters, got {name!r}")
            check_lake_text(location)
        return value


class AuthSettings(_Strict):
    """[auth]: the product's login settings (the OIDC provider itself is set in .streamlit/secrets.toml [auth]).

    ``required``: true turns login on; false (with ``--insecure-no-login``) allows serving beyond loopback without
    login; unset means no login, on loopback only.
    """

    required: StrictBool | None = None  # a TOML boolean: "yes" or "false" in quotes is refused
    # The [auth.<provider>] of secrets.toml to log in with; None: the settings directly under [auth].
    provider: str | None = Field(default=None, pattern=r"^[A-Za-z0-9-]{1,64}$")
    # Where the groups are in the ID token: a claim name or a dotted path ("realm_access.roles"); several allowed.
    groups_claim: str | list[str] = "groups"
    user_claim: str = Field(default="email", min_length=1, max_length=200)
    # When set, only members of one of these groups may log in at all.
    allowed_groups: list[str] = Field(default_factory=list, max_length=1000)
    # Sessions older than this (from the ID token's auth_time, else iat) are logged out; Streamlit's cookie lasts 30 days.
    max_session_hours: float = Field(default=12.0, gt=0, le=720, allow_inf_nan=False)
    # The grant of every cluster that has no `access` of its own; None: such clusters are shown to nobody.
    default_access: AccessGrant | None = None
    # Who may read the audit log (the Audit page, GET /api/v1/audit): principals as in `access`; nobody by default.
    audit: list[str] = Field(default_factory=list, max_length=1000)
    # The API's bearer tokens must name this audience (`aud`); unset: the client_id of the provider in secrets.toml.
    api_audience: str | None = Field(default=None, min_length=1, max_length=500)

    @field_validator("audit")
    @classmethod
    def _audit_principals(cls, value: list[str]) -> list[str]:
        return _check_principals(value)

    @field_validator("groups_claim")
    @classmethod
    def _claim_paths(cls, value: str | list[str]) -> str | list[str]:
        paths = [value] if isinstance(value, str) else value
        if not paths or any(not p or len(p) > 200 or any(not part for part in p.split(".")) for p in paths):
            raise ValueError("must be a claim name or dotted path such as \"groups\" or \"realm_access.roles\", "
                             "or a list of them")
        return value

    @property
    def groups_claims(self) -> list[str]:
        """The group claim paths as a list."""
        return [self.groups_claim] if isinstance(self.groups_claim, str) else list(self.groups_claim)

    @property
    def login(self) -> bool:
        """Whether login is on."""
        return self.required is True


class Fleet(_Strict):
    """The whole fleet file."""

    settings: Settings = Field(default_factory=Settings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    clusters: list[ClusterConfig] = Field(default_factory=list)
    # `serve`: its ports and schedules, and the client-config sources it ingests (backend/service).
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    client_configs: list[ClientConfigSource] = Field(default_factory=list)
    source: str = ""

    def cluster(self, name: str) -> ClusterConfig:
        """The cluster with this name."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


def load_fleet(path: str | os.PathLike[str], secrets_path: str | os.PathLike[str] | None = None, *,
               resolve_secrets: bool = True) -> Fleet:
    """Read, validate and resolve secrets for a fleet file; raise FleetConfigError naming file, line and key.

    ``resolve_secrets=False`` validates everything but leaves passwords unresolved (the UI needs only names and
    grants, and has no business holding cluster passwords)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FleetConfigError(f"{path}: cannot read the fleet file: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FleetConfigError(f"{path}:{line}: the fleet file is not UTF-8 text (byte {exc.start + 1} cannot be "
                               "decoded); save it as UTF-8") from None
    return parse_fleet(text, source=str(path), secrets_path=secrets_path, resolve_secrets=resolve_secrets)


def parse_fleet(text: str, *, source: str = "<fleet>", secrets_path: str | os.PathLike[str] | None = None,
                resolve_secrets: bool = True) -> Fleet:
    """Validate fleet-file text; see load_fleet."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message holds line and column, never values.
        raise FleetConfigError(f"{source}: not valid TOML: {exc}") from None
    lines = _KeyLines(text)
    clusters_raw = raw.get("clusters", [])
    if not isinstance(clusters_raw, list):
        raise FleetConfigError(f"{source}:{lines.find(None, 'clusters')}: key 'clusters' must be [[clusters]] tables")
    for index, cluster_raw in enumerate(clusters_raw):
        if isinstance(cluster_raw, dict):
            _refuse_inline_secrets(cluster_raw, index, source, lines)
    _refuse_inline_secrets({k: v for k, v in raw.items() if k != "clusters"}, None, source, lines)
    _refuse_oidc_secrets(raw.get("auth"), source, lines)

    try:
        fleet = Fleet.model_validate({**raw, "source": source})
    except ValidationError as exc:
        raise FleetConfigError(_describe(exc, raw, source, lines)) from None

    seen: dict[str, int] = {}
    for index, cluster in enumerate(fleet.clusters):
        if cluster.name in seen:
            line = lines.find(index, "name")
            raise FleetConfigError(
                f"{source}:{line}: cluster '{cluster.name}': key 'name': duplicate cluster name "
                f"(first defined in cluster #{seen[cluster.name] + 1})"
            )
        seen[cluster.name] = index
        for key, problem in cluster.combination_problems():
            raise FleetConfigError(f"{source}:{lines.find(index, key)}: cluster '{cluster.name}': key '{key}': {problem}")

    _check_sources(fleet, seen, source, lines)
    if not resolve_secrets:
        return fleet
    secrets_file = secrets_path if secrets_path is not None else fleet.settings.secrets_file
    secrets = _read_secret_table(secrets_file, "passwords")
    metrics_secrets = _read_secret_table(secrets_file, "metrics_passwords") if any(c.broker_metrics for c in fleet.clusters) else {}
    for index, cluster in enumerate(fleet.clusters):
        _resolve_secrets(cluster, secrets, index, source, lines)
        _resolve_metrics_secret(cluster, metrics_secrets, index, source, lines)
    return fleet


def _check_sources(fleet: Fleet, clusters: dict[str, int], source: str, lines: _KeyLines) -> None:
    labels: dict[str, int] = {}
    for index, entry in enumerate(fleet.client_configs):
        where = f"{source}:{lines.table_start('client_configs', index)}: client_configs #{index + 1}"
        if entry.cluster and entry.cluster not in clusters:
            raise FleetConfigError(f"{where}: key 'cluster': no [[clusters]] entry is named '{entry.cluster}'")
        if entry.label in labels:
            raise FleetConfigError(f"{where}: key 'name': '{entry.label}' is used by client_configs "
                                   f"#{labels[entry.label] + 1} too; give each source its own name")
        labels[entry.label] = index


def _refuse_inline_secrets(table: dict[str, Any], index: int | None, source: str, lines: _KeyLines) -> None:
    where = f"cluster '{table.get('name', f'#{index + 1}')}'" if index is not None else "settings"
    for key, _value in _walk(table):
        leaf = key.rsplit(".", 1)[-1].lower()
        if leaf in _INLINE_SECRET_KEYS or key.lower() in _INLINE_SECRET_KEYS:
            line = lines.find(index, key)
            raise FleetConfigError(
                f"{source}:{line}: {where}: key '{key}': passwords are never written in the fleet file; "
                "name an environment variable with sasl_password_env, or put it in .streamlit/secrets.toml "
                "under [passwords]"
            )


def _refuse_oidc_secrets(auth: Any, source: str, lines: _KeyLines) -> None:
    if not isinstance(auth, dict):
        return
    for key in auth:
        if key in _OIDC_SECRET_KEYS:
            raise FleetConfigError(
                f"{source}:{lines.find(None, f'auth.{key}')}: auth: key '{key}': the OpenID Connect provider is set in "
                ".streamlit/secrets.toml [auth] (Streamlit's st.login), never in the fleet file; see docs/auth.md"
            )


def _walk(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        items.append((dotted, value))
        if isinstance(value, dict):
            items.extend(_walk(value, dotted + "."))
    return items


def _describe(exc: ValidationError, raw: dict[str, Any], source: str, lines: _KeyLines) -> str:
    messages = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in error["loc"]]
        index: int | None = None
        where = "settings"
        key_parts = loc
        if loc and loc[0] == "clusters" and len(loc) > 1 and loc[1].isdigit():
            index = int(loc[1])
            cluster_raw = raw.get("clusters", [])[index]
            name = cluster_raw.get("name") if isinstance(cluster_raw, dict) else None
            where = f"cluster '{name}'" if name else f"cluster #{index + 1}"
            key_parts = loc[2:]
        elif loc and loc[0] == "settings":
            key_parts = loc[1:]
        elif loc and loc[0] == "auth" and len(loc) > 1:
            where, key_parts = "auth", loc[1:]
        elif loc and loc[0] == "client_configs" and len(loc) > 1 and loc[1].isdigit():
            where = f"client_configs #{int(loc[1]) + 1}"
            key = ".".join(loc[2:]) or "(table)"
            messages.append(f"{source}:{lines.table_start('client_configs', int(loc[1]))}: {where}: key '{key}': "
                            + ("unknown key" if error["type"] == "extra_forbidden" else error["msg"]))
            continue
        key = ".".join(key_parts) if key_parts else "(table)"
        text = error["msg"]
        if error["type"] == "extra_forbidden":
            text = "unknown key"
        elif error["type"] == "literal_error":
            text = f"{text} (got {_shown_value(raw, loc)!r})"
        line = lines.find(index, f"auth.{key}" if where == "auth" else key) if key_parts else lines.cluster_start(index)
        messages.append(f"{source}:{line}: {where}: key '{key}': {text}")
    return "; ".join(messages)


def _shown_value(raw: Any, loc: list[str]) -> Any:
    node = raw
    for part in loc:
        if isinstance(node, list) and part.isdigit():
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _read_secret_table(path: str | os.PathLike[str], table: str) -> dict[str, str]:
    """One [table] of secrets.toml (passwords, metrics_passwords): cluster name -> password; {} without the file."""
    secrets_file = Path(path)
    if not secrets_file.is_file():
        return {}
    try:
        data = tomllib.loads(secrets_file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FleetConfigError(f"{secrets_file}: not valid TOML: {exc}") from None
    found = data.get(table, {})
    if not isinstance(found, dict):
        raise FleetConfigError(f"{secrets_file}: key '{table}' must be a table of cluster name = password")
    return {str(k): str(v) for k, v in found.items()}


def _resolve_secrets(cluster: ClusterConfig, secrets: dict[str, str], index: int, source: str, lines: _KeyLines) -> None:
    if cluster.uses_sasl:
        value = None
        if cluster.sasl_password_env:
            value = os.environ.get(cluster.sasl_password_env)
        if value is None:
            value = secrets.get(cluster.name)
        if value is None:
            hint = f"{_env_label(cluster.sasl_password_env)} is not set and " if cluster.sasl_password_env else ""
            line = lines.find(index, "sasl_password_env") if cluster.sasl_password_env else lines.cluster_start(index)
            raise FleetConfigError(
                f"{source}:{line}: cluster '{cluster.name}': key 'sasl_password_env': no password found: "
                f"{hint}.streamlit/secrets.toml has no [passwords] entry '{cluster.name}'"
            )
        cluster._password = Secret(value)
    if cluster.ssl_key_password_env:
        key_password = os.environ.get(cluster.ssl_key_password_env)
        if key_password is None:
            line = lines.find(index, "ssl_key_password_env")
            raise FleetConfigError(
                f"{source}:{line}: cluster '{cluster.name}': key 'ssl_key_password_env': "
                f"{_env_label(cluster.ssl_key_password_env)} is not set"
            )
        cluster._ssl_key_password = Secret(key_password)


def _resolve_metrics_secret(cluster: ClusterConfig, secrets: dict[str, str], index: int, source: str,
                            lines: _KeyLines) -> None:
    metrics = cluster.broker_metrics
    if metrics is None or not metrics.username:
        return
    value = os.environ.get(metrics.password_env) if metrics.password_env else None
    if value is None:
        value = secrets.get(cluster.name)
    if value is None:
        hint = f"{_env_label(metrics.password_env)} is not set and " if metrics.password_env else ""
        raise FleetConfigError(
            f"{source}:{lines.find(index, 'broker_metrics.password_env')}: cluster '{cluster.name}': key "
            f"'broker_metrics.password_env': no password found: {hint}.streamlit/secrets.toml has no "
            f"[metrics_passwords] entry '{cluster.name}'")
    metrics._password = Secret(value)


class _KeyLines:
    """Finds the line of a key in TOML text, per [[clusters]] table, for error messages."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"-]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_.\"-]+)\s*=")

    def __init__(self, text: str) -> None:
        self._entries: list[tuple[int | None, str, int]] = []
        self._starts: dict[int, int] = {}
        self._table_starts: dict[str, list[int]] = {}
        cluster: int | None = None
        table = ""
        for lineno, line in enumerate(text.splitlines(), start=1):
            header = self._HEADER.match(line)
            if header:
                name = header.group(1).replace('"', "")
                if line.lstrip().startswith("[["):
                    self._table_starts.setdefault(name, []).append(lineno)
                if line.lstrip().startswith("[[") and name == "clusters":
                    cluster = 0 if cluster is None else cluster + 1
                    self._starts[cluster] = lineno
                    table = ""
                elif name.startswith("clusters."):
                    table = name[len("clusters.") :]
                else:
                    cluster, table = None, name
                continue
            key = self._KEY.match(line)
            if key:
                dotted = key.group(1).replace('"', "")
                full = f"{table}.{dotted}" if table else dotted
                self._entries.append((cluster, full, lineno))
                inline = re.findall(r"([A-Za-z0-9_-]+)\s*=", line.split("=", 1)[1])
                for sub in inline:
                    self._entries.append((cluster, f"{full}.{sub}", lineno))

    def find(self, cluster: int | None, key: str) -> int | str:
        """The line of key in the given cluster table (or top level), else the table's first line."""
        wanted = key.removeprefix("settings.")
        for entry_cluster, entry_key, lineno in self._entries:
            if entry_cluster == cluster and entry_key.removeprefix("settings.") == wanted:
                return lineno
        for entry_cluster, entry_key, lineno in self._entries:
            if entry_cluster == cluster and wanted.startswith(entry_key + "."):
                return lineno
        return self.cluster_start(cluster)

    def table_start(self, table: str, index: int) -> int | str:
        """The line of the index-th [[table]] header, or '?' when unknown."""
        starts = self._table_starts.get(table, [])
        return starts[index] if index < len(starts) else "?"

    def cluster_start(self, cluster: int | None) -> int | str:
        """The line of the cluster's [[clusters]] header, or '?' when unknown."""
        if cluster is None:
            return "?"
        return self._starts.get(cluster, "?")


def default_fleet_file(environ: Mapping[str, str] | None = None) -> str | None:
    """The fleet file in use when none is named: $FLEETVIEW_FLEET, else ./clusters.toml when it exists."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_FLEET) or DEFAULT_FLEET_FILE
    return path if Path(path).is_file() else None


def configured_lake(
    explicit: str | None = None,
    *,
    fleet_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The lake for every CLI and the UI: --lake, $FLEETVIEW_LAKE, the fleet file's lake_path, else ./lake.

    The fleet file is the one named, else $FLEETVIEW_FLEET or ./clusters.toml when present; it is read only
    when neither the flag nor the environment decides (a broken one raises its FleetConfigError).
    """
    env = os.environ if environ is None else environ
    if (explicit and explicit.strip()) or (env.get(ENV_LAKE) or "").strip():
        return resolve_lake(explicit, environ=env)
    path = fleet_file or default_fleet_file(env)
    lake_path = None
    if path:  # the fleet file decides only when flag and env are silent
        lake_path = load_fleet(path).settings.lake_path
    return resolve_lake(None, fleet_lake_path=lake_path, environ=env)
