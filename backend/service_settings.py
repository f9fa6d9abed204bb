"""The fleet file's service tables: `[service]` (schedules, ports, bounds) and `[[client_configs]]` (ingest sources)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SOURCE_KINDS = ("sink", "topic", "java_log", "properties")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServiceSettings(_Strict):
    """How `serve` runs: where the UI and the metrics listen, each job's schedule, restart and memory bounds."""

    ui: bool = True
    ui_address: str = "127.0.0.1"
    ui_port: int = Field(default=8501, ge=0, le=65535)
    # The UI under a sub-path of a reverse proxy (https://proxy/fleetview/): "fleetview" (Streamlit's baseUrlPath).
    ui_base_path: str = Field(default="", pattern=r"^[A-Za-z0-9._~/-]*$", max_length=200)
    metrics_address: str = "127.0.0.1"
    metrics_port: int = Field(default=9308, ge=0, le=65535)
    # The read-only HTTP API and MCP endpoint (docs/api.md): one more supervised child on its own port (0: a free one).
    api: bool = True
    api_address: str = "127.0.0.1"
    api_port: int = Field(default=8502, ge=0, le=65535)
    # Requests per second per principal (a token's subject, or the client address without login), and the burst.
    api_rate_per_s: float = Field(default=20.0, gt=0, le=100_000, allow_inf_nan=False)
    api_rate_burst: int = Field(default=100, ge=1, le=1_000_000)
    # The audit log's journals are rolled into the lake's audit table this often.
    audit_compact_interval_s: float = Field(default=10.0, gt=0, le=3_600, allow_inf_nan=False)
    # Where the service keeps status.json, requests/, logs/ and its lock; "" = <lake>/_state/service (local lakes).
    state_dir: str = ""
    # Ingest sources run on their own interval_s; analyze refreshes incrementally on this one.
    analyze_interval_s: float = Field(default=300.0, gt=0, le=7 * 86_400, allow_inf_nan=False)
    # A full recomputation (instead of a refresh) this often; 0 turns it off.
    full_analyze_interval_s: float = Field(default=86_400.0, ge=0, le=365 * 86_400, allow_inf_nan=False)
    analyze: bool = True
    # The warm Spark driver (Python + its JVM) is replaced after a run that leaves it above this.
    analyze_max_rss_mb: int = Field(default=3072, ge=256, le=1_048_576)
    # A child that exits unexpectedly is restarted after restart_backoff_s, doubling per quick failure.
    restart_backoff_s: float = Field(default=1.0, gt=0, le=600, allow_inf_nan=False)
    restart_backoff_max_s: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    # An ingest or analyze run that takes longer than this is abandoned: its worker is replaced.
    job_timeout_s: float = Field(default=3600.0, gt=0, le=7 * 86_400, allow_inf_nan=False)
    # SIGTERM/SIGINT: children get this long to finish their write before SIGKILL (the whole stop stays under 15 s).
    stop_timeout_s: float = Field(default=12.0, gt=0, le=14, allow_inf_nan=False)


class ClientConfigSource(_Strict):
    """One client-config source that `serve` ingests on its interval (exactly one of sink/topic/java_log/properties)."""

    name: str = ""
    sink: str | None = None
    topic: str | None = None
    java_log: str | None = None  # a glob: every matching file
    properties: str | None = None
    # topic: the connection and security of this [[clusters]] entry, or bootstrap_servers (PLAINTEXT).
    cluster: str | None = None
    bootstrap_servers: list[str] | None = None
    # java_log: the cluster id recorded for its clients (default: bootstrap:<bootstrap.servers> of each block).
    cluster_id: str | None = None
    interval_s: float = Field(default=60.0, gt=0, le=7 * 86_400, allow_inf_nan=False)
    timeout_s: float = Field(default=10.0, gt=0, le=600, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_source(self) -> ClientConfigSource:
        given = [kind for kind in SOURCE_KINDS if getattr(self, kind)]
        if len(given) != 1:
            raise ValueError("give exactly one of sink, topic, java_log, properties"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.topic and not (self.cluster or self.bootstrap_servers):
            raise ValueError("topic needs cluster (a [[clusters]] name) or bootstrap_servers")
        if not self.topic and (self.cluster or self.bootstrap_servers):
            raise ValueError("cluster and bootstrap_servers apply to a topic source only")
        if self.cluster_id and not self.java_log:
            raise ValueError("cluster_id applies to a java_log source only")
        if self.name and not _NAME.fullmatch(self.name):
            raise ValueError("name may hold letters, digits, '.', '_' and '-' only")
        return self

    @property
    def kind(self) -> Literal["sink", "topic", "java_log", "properties"]:
        """Which kind of source this is."""
        for kind in SOURCE_KINDS:
            if getattr(self, kind):
                return kind  # type: ignore[return-value]
        raise AssertionError("validated: one source kind is set")

    @property
    def location(self) -> str:
        """The directory, glob or topic this source reads."""
        return str(getattr(self, self.kind))

    @property
    def label(self) -> str:
        """The name shown in status, logs and metrics: the given name, else kind + place."""
        return self.name or f"{self.kind}:{self.location}"
