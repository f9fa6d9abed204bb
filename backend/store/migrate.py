"""Migration of a schema-version-1 lake (every row of every poll) to the v2 model.

The v1 polls are replayed, oldest first, through the v2 writer: the change log records every
id, version, controller and topic-id change the v1 snapshots show, the last poll with data of
each cluster becomes the current state, and the v1 `fleet_alerts` become incidents (a condition
raised by consecutive polls is one incident). `cluster_snapshots` is already the v2 status table
and stays as it is. The v1 snapshot tables are not deleted: retention removes them as they age.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import pandas as pd

from backend.store import state
from backend.store.lake import Lake, LakeFile, poll_id_time
from backend.store.model import Alert, FleetPoll
from backend.store.readers import FleetState
from backend.store.schemas import (
    BROKER_SNAPSHOTS,
    CHANGES,
    CLUSTER_SNAPSHOTS,
    FLEET_ALERTS,
    INCIDENTS,
    LEGACY_TABLES,
    TOPIC_SNAPSHOTS,
    ZK_SNAPSHOTS,
)
from backend.store.snapshots import snapshots_from_state

log = logging.getLogger(__name__)


def needs_migration(lake: Lake) -> bool:
    """Whether the lake holds v1 snapshot tables that were not migrated yet."""
    manifest = state.read_manifest(lake)
    if manifest is not None and manifest.get("migrated_v1"):
        return False
    return any(lake.days(t) for t in LEGACY_TABLES)


class PollWriter(Protocol):
    """What the replay needs of a fleet writer (backend.store.fleet_writer.FleetWriter, which calls migrate_v1)."""

    manifest: dict[str, Any]
    version: str | None

    def write(self, poll: FleetPoll, *, status_rows: bool = True) -> object:
        """Write one poll."""

    def close(self, at: datetime) -> None:
        """Flush what the writer holds."""


def migrate_v1(lake: Lake, open_writer: Callable[[], PollWriter]) -> bool:
    """Replay a v1 lake's polls through a writer that does not migrate (restarting if a previous migration was cut short).

    `open_writer` is called once the v2 state is emptied, so the writer starts from nothing.
    """
    log.warning("migrating the v1 lake %s to the v2 model", lake.location)
    for path in (lake.state_dir(), f"{lake.root}/{CHANGES}", f"{lake.root}/{INCIDENTS}"):
        try:
            lake.fs.delete_dir(path)
        except FileNotFoundError:
            pass
    writer = open_writer()
    by_poll: dict[str, dict[str, list[LakeFile]]] = defaultdict(lambda: defaultdict(list))
    for table in (CLUSTER_SNAPSHOTS, BROKER_SNAPSHOTS, TOPIC_SNAPSHOTS, ZK_SNAPSHOTS, FLEET_ALERTS):
        for f in lake.files(table):
            by_poll[f.poll_id][table].append(f)
    last_at = None
    for poll_id in sorted(by_poll):
        files = by_poll[poll_id]
        if not files.get(CLUSTER_SNAPSHOTS):
            continue
        frames = {t: lake.read(t, fs).to_pandas() for t, fs in files.items()}
        frames = {t: f[f["poll_id"] == poll_id] for t, f in frames.items()}
        clusters = frames[CLUSTER_SNAPSHOTS]
        snaps = snapshots_from_state(FleetState(
            clusters=clusters,
            brokers=frames.get(BROKER_SNAPSHOTS, pd.DataFrame()),
            topics=frames.get(TOPIC_SNAPSHOTS, pd.DataFrame()),
            zk_nodes=frames.get(ZK_SNAPSHOTS, pd.DataFrame()),
        ))
        alerts = [
            Alert(rule=r.rule, severity=r.severity, cluster_name=r.cluster_name, subject=r.subject,
                  evidence=json.loads(r.evidence_json or "{}"), explanation=r.explanation or "",
                  doc_url=r.doc_url or "")
            for r in frames.get(FLEET_ALERTS, pd.DataFrame(columns=["rule"])).itertuples(index=False)
        ]
        at = poll_id_time(poll_id)
        writer.write(FleetPoll(poll_id, at, [snaps[n] for n in sorted(snaps)], alerts, 0.0), status_rows=False)
        last_at = at
    if last_at is not None:
        writer.close(last_at)
    done = {**writer.manifest, "migrated_v1": True, "generation": int(writer.manifest.get("generation", 0)) + 1}
    writer.version = state.commit_manifest(lake, done, writer.version)
    writer.manifest = done
    return True
