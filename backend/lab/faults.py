"""Per-broker fault injection, switchable at run time through the API or a JSON control file."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path

FAULT_MODES = ("latency_ms", "refuse", "drop_mid_response", "malformed", "stopped")


@dataclass
class BrokerFaults:
    """The faults active on one broker; all off by default."""

    latency_ms: int = 0
    refuse: bool = False  # stop listening: connections are refused
    drop_mid_response: bool = False  # send half a response frame, then close
    malformed: bool = False  # answer with a frame that does not parse
    stopped: bool = False  # broker down: refuses connections, leaves metadata and ZooKeeper

    def active(self) -> bool:
        """True when any fault is on."""
        return any(getattr(self, f.name) for f in fields(self))


def parse_faults(raw: dict[str, object], where: str) -> BrokerFaults:
    """Validate one broker's fault table from the control file."""
    unknown = set(raw) - set(FAULT_MODES)
    if unknown:
        raise ValueError(f"{where}: unknown fault modes {sorted(unknown)} (known: {', '.join(FAULT_MODES)})")
    latency = raw.get("latency_ms", 0)
    if isinstance(latency, bool) or not isinstance(latency, int) or latency < 0:
        raise ValueError(f"{where}: latency_ms must be a non-negative integer")
    flags = {}
    for name in FAULT_MODES[1:]:
        value = raw.get(name, False)
        if not isinstance(value, bool):
            raise TypeError(f"{where}: {name} must be true or false")
        flags[name] = value
    return BrokerFaults(latency_ms=latency, **flags)


def read_control_file(path: Path) -> dict[tuple[str, int], BrokerFaults]:
    """Read {"<cluster>": {"<broker id>": {mode: value}}}; a missing file means no faults."""
    if not path.exists():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8") or "{}")
    if not isinstance(raw, dict):
        raise TypeError(f"{path}: the control file must hold a JSON object")
    out: dict[tuple[str, int], BrokerFaults] = {}
    for cluster, brokers in raw.items():
        if not isinstance(brokers, dict):
            raise TypeError(f"{path}: cluster {cluster!r} must map broker ids to fault tables")
        for broker, table in brokers.items():
            if not isinstance(table, dict):
                raise TypeError(f"{path}: {cluster}/{broker} must be a table of fault modes")
            out[(cluster, int(broker))] = parse_faults(table, f"{path}: {cluster}/{broker}")
    return out


def write_control_file(path: Path, faults: dict[tuple[str, int], BrokerFaults]) -> None:
    """Write the control file atomically (only brokers with an active fault are kept)."""
    doc: dict[str, dict[str, dict[str, object]]] = {}
    for (cluster, broker), f in sorted(faults.items()):
        if f.active():
            doc.setdefault(cluster, {})[str(broker)] = {k: v for k, v in asdict(f).items() if v}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".faults-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def set_fault_in_file(path: Path, cluster: str, broker_id: int, mode: str, value: int | bool) -> None:
    """Flip one fault of one broker in the control file (what an external test or the CLI uses)."""
    if mode not in FAULT_MODES:
        raise ValueError(f"unknown fault mode {mode!r} (known: {', '.join(FAULT_MODES)})")
    faults = read_control_file(path)
    current = faults.get((cluster, broker_id), BrokerFaults())
    table = asdict(current)
    table[mode] = value
    faults[(cluster, broker_id)] = parse_faults(table, f"{cluster}/{broker_id}")
    write_control_file(path, faults)
