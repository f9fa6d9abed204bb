"""Rules over a cluster's client inventory (the brokers' own JMX metrics), as fleet alerts and so incidents.

- `client_deprecated_protocol` (standing): clients used protocol versions Kafka 4.0 removed (KIP-896) within
  the window; one incident per cluster, its evidence names request, version and software.
- `client_below_floor` (standing): client software older than what Kafka 4.x serves is connected (Java below
  2.1, librdkafka below 1.8.2; backend/kafka/client_floors.py).
- `client_unknown_software_appeared` (event): clients that send no software name (a client before 2.4, or one that
  does not send ApiVersions v3) connected where the last inventory had none.
Pure functions of the snapshot (and the previous poll's); clusters whose inventory was never read raise nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.kafka import client_floors
from backend.store.inventory_model import InventorySnapshot
from backend.store.model import Alert, ClusterSnapshot

DOC = "docs/client-inventory.md"
SAMPLE = 20


@dataclass(frozen=True)
class ClientRule:
    """One rule of the catalog (docs/fleet-rules.md)."""

    id: str
    severity: str
    kind: str  # standing / event
    title: str
    when: str


RULES: tuple[ClientRule, ...] = (
    ClientRule("client_deprecated_protocol", "critical", "standing",
               "Clients use protocol versions Kafka 4.0 removed",
               "a broker's KIP-896 count (DeprecatedRequestsPerSec) grew within client_metrics_window_s"),
    ClientRule("client_below_floor", "warning", "standing", "Client software older than Kafka 4.x serves",
               "a connected client reports Java (apache-kafka-java) below 2.1 or librdkafka below 1.8.2 (KIP-896)"),
    ClientRule("client_unknown_software_appeared", "warning", "event", "Clients without a software name appeared",
               "clients that send no KIP-511 name (a client before 2.4, or one that does not send ApiVersions v3: the "
               "broker says `unknown`) are connected and the cluster's previous inventory had none"),
)
ONE_OFF = frozenset(r.id for r in RULES if r.kind == "event")


def _alert(rule_id: str, s: ClusterSnapshot, subject: str, evidence: dict[str, object], explanation: str) -> Alert:
    rule = next(r for r in RULES if r.id == rule_id)
    return Alert(rule.id, rule.severity, s.cluster_name, subject, evidence, explanation, DOC)


def _has_unknown(inventory: InventorySnapshot | None) -> bool:
    return inventory is not None and any(name == "unknown" for name, _ in inventory.software())


def inventory_alerts(previous: ClusterSnapshot | None, snapshot: ClusterSnapshot) -> list[Alert]:
    """Every client-inventory rule over one cluster (nothing when its inventory was never read)."""
    inventory = snapshot.inventory
    if inventory is None:
        return []
    alerts: list[Alert] = []
    uses = inventory.in_use()
    if uses:
        named = sorted({f"{u.request} v{u.version} by {u.software_name} {u.software_version}" for u in uses})
        alerts.append(_alert("client_deprecated_protocol", snapshot, "deprecated protocol",
                             {"requests": named[:SAMPLE], "count": len(named),
                              "brokers": sorted({str(u.broker_id if u.broker_id is not None else u.endpoint) for u in uses})},
                             f"{len(named)} client request kinds on protocol versions Kafka 4.0 removed (KIP-896), "
                             f"e.g. {named[0]}: those clients fail against Kafka 4.x."))
    below = []
    for (name, version), connections in sorted(inventory.software().items()):
        verdict = client_floors.check(name, version)
        if verdict.below:
            below.append({"software_name": name, "software_version": version, "connections": connections,
                          "floor": f"{verdict.family} {verdict.floor_text}"})
    if below:
        alerts.append(_alert("client_below_floor", snapshot, "client software",
                             {"software": below[:SAMPLE], "count": len(below)},
                             f"{len(below)} client software versions older than Kafka 4.x serves are connected, e.g. "
                             f"{below[0]['software_name']} {below[0]['software_version']} (floor "
                             f"{below[0]['floor']}, KIP-896)."))
    before = previous.inventory if previous is not None else None
    if before is not inventory and _has_unknown(inventory) and not _has_unknown(before):
        count = inventory.software().get(("unknown", "unknown"), 0) or sum(
            n for (name, _), n in inventory.software().items() if name == "unknown")
        alerts.append(_alert("client_unknown_software_appeared", snapshot, "unknown software",
                             {"connections": count},
                             f"{count} connections from clients that send no software name (KIP-511: a client "
                             "before 2.4, or one that does not send ApiVersions v3) appeared; the KIP-896 series tell "
                             "whether they use removed protocol versions."))
    return alerts
