"""Typed model of lab.toml: the clusters, brokers, topics and policies the lab fleet emulates."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.lab.config_catalog import ConfigCatalog, config_value, load_catalogs
from backend.lab.groups import BEHAVIOURS, GROUP_TYPES, GroupSpec

PROFILES_FILE = Path(__file__).parent / "profiles" / "profiles.json"
DEFAULT_MAX_CONFIG_BYTES = 10240
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class LabConfigError(ValueError):
    """lab.toml (or a profile) is invalid; the message names the offending entry."""


@dataclass(frozen=True)
class Profile:
    """A broker software profile: what the emulated brokers say about themselves."""

    name: str
    title: str
    software_name: str
    software_version: str
    mode: str  # "zookeeper" or "kraft"
    kip885: bool
    internal_topics: tuple[str, ...]
    api_versions: tuple[tuple[int, int, int], ...]
    config_catalog: str = "kafka-4.3"  # family of broker_configs.json the brokers describe their configs from

    @property
    def catalog(self) -> ConfigCatalog:
        """The broker and topic configs these brokers declare."""
        return load_catalogs()[self.config_catalog]


@dataclass(frozen=True)
class BrokerSpec:
    """One lab broker: id, port (0 = any free port), rack, optional version override, its own configs."""

    id: int
    port: int = 0
    rack: str | None = None
    software_version: str | None = None
    configs: dict[str, str] = field(default_factory=dict)  # its server.properties: STATIC_BROKER_CONFIG
    dynamic_configs: dict[str, str] = field(default_factory=dict)  # set for this broker: DYNAMIC_BROKER_CONFIG


@dataclass(frozen=True)
class TopicSpec:
    """A topic the cluster starts with."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)  # topic overrides: DYNAMIC_TOPIC_CONFIG
    idle: bool = False  # no records since a fixed instant: its log end offsets stay put (groups reading it idle)


@dataclass(frozen=True)
class ZkSpec:
    """Where a ZooKeeper-mode cluster registers; connect None means the fleet-wide default."""

    chroot: str
    connect: str | None = None


@dataclass(frozen=True)
class PolicySpec:
    """The ClientConfigPolicy of KIP-1324 as the lab plays it."""

    push_config: bool = False
    sink_dir: str | None = None
    max_config_bytes: int = DEFAULT_MAX_CONFIG_BYTES


@dataclass(frozen=True)
class TlsSpec:
    """Server certificate and key (PEM paths) for the SSL / SASL_SSL listener."""

    certfile: str
    keyfile: str
    cafile: str | None = None  # only written into the fleet file for clients


@dataclass(frozen=True)
class SaslUser:
    """A SASL user; the password comes inline (lab data) or from an environment variable."""

    name: str
    password: str | None = field(default=None, repr=False)
    password_env: str | None = None

    def secret(self) -> str:
        """Return the password, reading password_env if set."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise LabConfigError(f"SASL user {self.name!r}: environment variable {self.password_env} is not set")
            return value
        return self.password or ""


@dataclass(frozen=True)
class SaslSpec:
    """SASL mechanisms offered and the users accepted."""

    mechanisms: tuple[str, ...]
    users: tuple[SaslUser, ...]


@dataclass(frozen=True)
class MetricsClientSpec:
    """A client the lab broker's metrics endpoint reports as connected (KIP-511), besides the real connections.

    `deprecated` holds "Request:version" pairs (e.g. "Produce:2") it sends at `rate` requests per second on each
    broker (KIP-896's DeprecatedRequestsPerSec count grows by that).
    """

    software_name: str
    software_version: str
    connections: int = 1
    listener: str = "PLAINTEXT"
    deprecated: tuple[tuple[str, int], ...] = ()
    rate: float = 1.0


@dataclass(frozen=True)
class ClusterSpec:
    """One emulated cluster."""

    name: str
    profile: Profile
    brokers: tuple[BrokerSpec, ...]
    topics: tuple[TopicSpec, ...] = ()
    controller_id: int | None = None
    zookeeper: ZkSpec | None = None
    misrouted_to: str | None = None
    policy: PolicySpec = PolicySpec()
    tls: TlsSpec | None = None
    sasl: SaslSpec | None = None
    tags: dict[str, str] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)  # every broker's server.properties: STATIC_BROKER_CONFIG
    dynamic_configs: dict[str, str] = field(default_factory=dict)  # cluster-wide: DYNAMIC_DEFAULT_BROKER_CONFIG
    groups: tuple[GroupSpec, ...] = ()  # synthetic consumer groups (backend/lab/groups.py)
    synthetic_groups: int = 0  # that many more healthy groups, generated (benchmarks)
    metrics_clients: tuple[MetricsClientSpec, ...] = ()  # extra clients the metrics endpoint reports

    @property
    def effective_controller(self) -> int:
        """The controller broker id (configured, else the lowest broker id)."""
        if self.controller_id is not None:
            return self.controller_id
        return min(b.id for b in self.brokers)


@dataclass(frozen=True)
class LabConfig:
    """The whole lab: clusters plus where state and sinks live."""

    clusters: tuple[ClusterSpec, ...]
    state_dir: Path
    state_file: Path
    sink_dir: Path
    host: str = "127.0.0.1"
    zookeeper_connect: str | None = None

    def cluster(self, name: str) -> ClusterSpec:
        """Return the cluster named `name` or raise KeyError."""
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)


def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    """Read the profile data file into Profile objects keyed by profile name."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Profile] = {}
    for name, p in raw.items():
        if name.startswith("_"):
            continue
        out[name] = Profile(
            name=name,
            title=p["title"],
            software_name=p["software_name"],
            software_version=p["software_version"],
            mode=p["mode"],
            kip885=bool(p["kip885"]),
            internal_topics=tuple(p.get("internal_topics", ())),
            api_versions=tuple((int(k), int(lo), int(hi)) for k, lo, hi in p["api_versions"]),
            config_catalog=p.get("config_catalog", "kafka-4.3"),
        )
    return out


def _req(table: dict[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise LabConfigError(f"{where}: missing required key {key!r}")
    return table[key]


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LabConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _configs(raw: Any, catalog: ConfigCatalog, where: str, *, topic: bool = False,
             dynamic: bool = False) -> dict[str, str]:
    """A table of broker or topic configs from lab.toml, checked against the catalog of the profile."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LabConfigError(f"{where}: expected a table of config = value")
    known = catalog.topic if topic else catalog.broker
    out: dict[str, str] = {}
    for key, value in raw.items():
        kind = "topic" if topic else "broker"
        definition = known.get(key)
        if definition is None:
            raise LabConfigError(f"{where}: unknown {kind} config {key!r} for the {catalog.family} catalog")
        if dynamic and getattr(definition, "read_only", False):
            raise LabConfigError(f"{where}: {key!r} is read-only on a real broker; set it in configs (static)")
        try:
            out[key] = config_value(value, definition.type, f"{where} {key}")
        except ValueError as exc:
            raise LabConfigError(str(exc)) from None
    return out


def _parse_groups(raw: Any, topics: set[str], where: str) -> tuple[GroupSpec, ...]:
    """[[clusters.groups]]: name, topics, type (classic/consumer/share), behaviour, members, client_id, assignor."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise LabConfigError(f"{where}: groups must be an array of tables")
    out = []
    for i, g in enumerate(raw):
        gw = f"{where} groups[{i}]"
        name = _req(g, "name", gw)
        group_topics = tuple(_req(g, "topics", gw))
        unknown = [t for t in group_topics if t not in topics]
        if unknown:
            raise LabConfigError(f"{gw}: unknown topics {unknown} (the cluster has {sorted(topics)})")
        kind = g.get("type", "classic")
        if kind not in GROUP_TYPES:
            raise LabConfigError(f"{gw}: type must be one of {', '.join(GROUP_TYPES)}, got {kind!r}")
        behaviour = g.get("behaviour", "healthy")
        if behaviour not in BEHAVIOURS:
            raise LabConfigError(f"{gw}: behaviour must be one of {', '.join(BEHAVIOURS)}, got {behaviour!r}")
        out.append(GroupSpec(name=str(name), topics=group_topics, type=kind, behaviour=behaviour,
                             members=_int(g.get("members", 2), gw), client_id=g.get("client_id"),
                             assignor=g.get("assignor")))
    names = [g.name for g in out]
    if len(set(names)) != len(names):
        raise LabConfigError(f"{where}: duplicate group names {names}")
    return tuple(out)


def _parse_cluster(raw: dict[str, Any], profiles: dict[str, Profile], index: int) -> ClusterSpec:
    name = _req(raw, "name", f"clusters[{index}]")
    where = f"cluster {name!r}"
    profile_name = _req(raw, "profile", where)
    if profile_name not in profiles:
        raise LabConfigError(f"{where}: unknown profile {profile_name!r} (known: {', '.join(sorted(profiles))})")
    profile = profiles[profile_name]
    catalog = profile.catalog
    brokers = []
    for i, b in enumerate(_req(raw, "brokers", where)):
        bw = f"{where} brokers[{i}]"
        brokers.append(
            BrokerSpec(
                id=_int(_req(b, "id", bw), bw),
                port=_int(b.get("port", 0), bw),
                rack=b.get("rack"),
                software_version=b.get("software_version"),
                configs=_configs(b.get("configs"), catalog, f"{bw} configs"),
                dynamic_configs=_configs(b.get("dynamic_configs"), catalog, f"{bw} dynamic_configs", dynamic=True),
            )
        )
    if not brokers:
        raise LabConfigError(f"{where}: needs at least one broker")
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        raise LabConfigError(f"{where}: duplicate broker ids {ids}")
    topics = []
    for i, t in enumerate(raw.get("topics", [])):
        tw = f"{where} topics[{i}]"
        rf = _int(t.get("replication_factor", 1), tw, 1)
        if rf > len(brokers):
            raise LabConfigError(f"{tw}: replication_factor {rf} exceeds broker count {len(brokers)}")
        idle = t.get("idle", False)
        if not isinstance(idle, bool):
            raise LabConfigError(f"{tw} idle: expected true or false, got {idle!r}")
        topics.append(TopicSpec(name=_req(t, "name", tw), partitions=_int(t.get("partitions", 1), tw, 1),
                                replication_factor=rf, idle=idle,
                                configs=_configs(t.get("configs"), catalog, f"{tw} configs", topic=True)))
    zk = None
    if "zookeeper" in raw:
        z = raw["zookeeper"]
        zk = ZkSpec(chroot=z.get("chroot", f"/{name}"), connect=z.get("connect"))
        if not zk.chroot.startswith("/"):
            raise LabConfigError(f"{where}: zookeeper.chroot must start with '/'")
        if profile.mode != "zookeeper":
            raise LabConfigError(f"{where}: profile {profile_name!r} is KRaft; only ZooKeeper-mode profiles register in ZooKeeper")
    p = raw.get("policy", {})
    policy = PolicySpec(
        push_config=bool(p.get("push_config", False)),
        sink_dir=p.get("sink_dir"),
        max_config_bytes=_int(p.get("client_config_max_bytes", DEFAULT_MAX_CONFIG_BYTES), f"{where} policy", 1),
    )
    tls = None
    if "tls" in raw:
        tls = TlsSpec(certfile=_req(raw["tls"], "certfile", where), keyfile=_req(raw["tls"], "keyfile", where),
                      cafile=raw["tls"].get("cafile"))
    sasl = None
    if "sasl" in raw:
        s = raw["sasl"]
        mechs = tuple(s.get("mechanisms", ["PLAIN"]))
        for m in mechs:
            if m not in SASL_MECHANISMS:
                raise LabConfigError(f"{where}: unsupported SASL mechanism {m!r}")
        users = tuple(
            SaslUser(name=_req(u, "name", where), password=u.get("password"), password_env=u.get("password_env"))
            for u in s.get("users", [])
        )
        sasl = SaslSpec(mechanisms=mechs, users=users)
    controller = raw.get("controller_id")
    if controller is not None and controller not in ids:
        raise LabConfigError(f"{where}: controller_id {controller} is not one of the brokers {ids}")
    tags = {str(k): str(v) for k, v in raw.get("tags", {}).items()}
    metrics_clients = tuple(_metrics_client(c, f"{where} metrics_clients[{i}]")
                            for i, c in enumerate(raw.get("metrics_clients", [])))
    return ClusterSpec(
        name=name, profile=profile, brokers=tuple(brokers), topics=tuple(topics), controller_id=controller,
        zookeeper=zk, misrouted_to=raw.get("misrouted_to"), policy=policy, tls=tls, sasl=sasl, tags=tags,
        configs=_configs(raw.get("configs"), catalog, f"{where} configs"),
        dynamic_configs=_configs(raw.get("dynamic_configs"), catalog, f"{where} dynamic_configs", dynamic=True),
        groups=_parse_groups(raw.get("groups"), {t.name for t in topics}, where),
        synthetic_groups=_int(raw.get("synthetic_groups", 0), f"{where} synthetic_groups"),
        metrics_clients=metrics_clients,
    )


def _metrics_client(raw: dict[str, Any], where: str) -> MetricsClientSpec:
    deprecated = []
    for item in raw.get("deprecated", []):
        request, _, version = str(item).partition(":")
        if not request or not version.isdigit():
            raise LabConfigError(f"{where}: deprecated entries are \"Request:version\" such as \"Produce:2\", got {item!r}")
        deprecated.append((request, int(version)))
    try:
        rate = float(raw.get("rate", 1.0))
    except (TypeError, ValueError):
        raise LabConfigError(f"{where}: rate must be a number") from None
    return MetricsClientSpec(software_name=str(_req(raw, "software_name", where)),
                             software_version=str(_req(raw, "software_version", where)),
                             connections=_int(raw.get("connections", 1), where), listener=str(raw.get("listener", "PLAINTEXT")),
                             deprecated=tuple(deprecated), rate=rate)


def parse_lab_config(raw: dict[str, Any], base_dir: Path, profiles: dict[str, Profile] | None = None) -> LabConfig:
    """Build a LabConfig from a parsed TOML dict; relative paths resolve against base_dir."""
    profiles = profiles if profiles is not None else load_profiles()
    lab = raw.get("lab", {})
    state_dir = base_dir / lab.get("state_dir", ".lab")
    clusters = tuple(_parse_cluster(c, profiles, i) for i, c in enumerate(raw.get("clusters", [])))
    if not clusters:
        raise LabConfigError("lab config defines no [[clusters]]")
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise LabConfigError(f"duplicate cluster names: {names}")
    for c in clusters:
        if c.misrouted_to is not None and c.misrouted_to not in names:
            raise LabConfigError(f"cluster {c.name!r}: misrouted_to {c.misrouted_to!r} is not a lab cluster")
    return LabConfig(
        clusters=clusters,
        state_dir=state_dir,
        state_file=base_dir / lab["state_file"] if "state_file" in lab else state_dir / "state.json",
        sink_dir=base_dir / lab["sink_dir"] if "sink_dir" in lab else state_dir / "sink",
        host=lab.get("host", "127.0.0.1"),
        zookeeper_connect=lab.get("zookeeper_connect"),
    )


def load_lab_config(path: str | Path) -> LabConfig:
    """Read and validate a lab.toml file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise LabConfigError(f"lab config not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise LabConfigError(f"{path}: invalid TOML: {exc}") from exc
    return parse_lab_config(raw, path.resolve().parent)
