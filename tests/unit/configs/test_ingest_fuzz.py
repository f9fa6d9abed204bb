"""Fuzz: random, cut and corrupted input to every file reader of `python -m backend ingest`.

Whatever arrives, every record read is either written or quarantined (read = written + quarantined), and
a canary secret placed in sensitive keys, credential-shaped values and broken records appears nowhere under
the lake (any file's bytes: Parquet, state JSON, stats) nor in what the command prints. The topic reader
shares the sink's record path (parse_json_record) and is covered against a real broker in
tests/integration/pipeline/test_pipeline_topic_ingest.py.
"""

from __future__ import annotations

import io
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from backend.cli import main
from backend.configs.ingest import IngestResult, ingest_java_log, ingest_properties, ingest_sink
from tests.unit.configs.helpers import cfg, lake_bytes_contain, record

CANARY = "Cnry9x7q"
SECRET_ENTRIES = [
    cfg("sasl.jaas.config", f'PlainLoginModule required username="u" password="{CANARY}";', "PASSWORD"),
    cfg("ssl.keystore.password", CANARY, "PASSWORD"),
    cfg("client.id", f"app password={CANARY}"),
    cfg("bootstrap.servers", f"u:{CANARY}@k1:9092"),
    cfg("my.custom.thing", CANARY),
]
JAVA_SECRETS = [f"sasl.jaas.config = PlainLoginModule required password=\"{CANARY}\";",
                f"ssl.truststore.password = {CANARY}", f"client.id = svc password={CANARY}",
                f"bootstrap.servers = [u:{CANARY}@k1:9092]"]


def _damage(text: str, rng: random.Random, how: int) -> str:
    if how == 0:
        return text
    if how == 1:
        return text[: rng.randrange(1, max(2, len(text)))]  # cut anywhere
    if how == 2:
        # A stray character in the record's identity fields (often breaking its JSON), never inside its configs: a
        # character inside "password=" or a key name would make the canary an ordinary value nothing can tell apart.
        at = rng.randrange(text.index('"configs"'))
        return text[:at] + rng.choice(["{", "}", '"', "\\", "\x00", "]", "ü", "\t"]) + text[at:]
    if how == 3:
        return json.dumps(json.loads(text) | {"configs": {"db.url": f"postgres://a:{CANARY}@db/x"}})
    return text.replace('"configs"', '"conf1gs"')


def _no_canary(lake: Path, printed: str) -> None:
    assert lake_bytes_contain(lake, CANARY) == []
    assert CANARY not in printed


def _balanced(result: IngestResult) -> None:
    assert result.records_read == result.records_written + result.quarantined_total


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), damages=st.lists(st.integers(0, 4), min_size=1, max_size=12))
def test_sink_fuzz(tmp_path_factory: object, seed: int, damages: list[int]) -> None:
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("fuzz-sink")  # type: ignore[attr-defined]
    sink, lake = root / "sink", root / "lake"
    sink.mkdir()
    lines = []
    for how in damages:
        entries = [cfg("acks", rng.choice(["all", "1", "-1"])), *rng.sample(SECRET_ENTRIES, 2)]
        lines.append(_damage(json.dumps(record(entries)), rng, how).replace("\n", " "))
    (sink / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        assert main(["ingest", "--sink", str(sink), "--lake", str(lake)]) == 0
    result = ingest_sink(str(lake), sink)  # a second run reads nothing new
    assert result.records_read == 0
    assert f"records read:        {len(lines)}" in out.getvalue()
    _no_canary(lake, out.getvalue())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), blocks=st.integers(1, 4), cut=st.floats(0.1, 1.0), stray=st.booleans())
@example(seed=2, blocks=2, cut=0.15625, stray=True)  # the file ends inside "bootstrap.servers = [u:<canary>@"
def test_java_log_fuzz(tmp_path_factory: object, seed: int, blocks: int, cut: float, stray: bool) -> None:
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("fuzz-log")  # type: ignore[attr-defined]
    parts = []
    for b in range(blocks):
        keys = ["acks = -1", "batch.size = 16384", f"client.id = c{b}", "linger.ms = 5", *rng.sample(JAVA_SECRETS, 2)]
        rng.shuffle(keys)
        body = "".join(f"\t{k}\n" for k in keys)
        if stray:
            body = body.replace("\tlinger", "[2026-11-20 09:14:02,312] WARN [t2] noise\n\tlinger", 1)
        parts.append(f"[2026-11-20 09:14:0{b},311] INFO [main-{b}] ProducerConfig values: \n{body}"
                     f" (org.apache.kafka.clients.producer.ProducerConfig)\n")
    text = "".join(parts)
    text = text[: max(1, int(len(text) * cut))]
    log = root / "client.log"
    log.write_text(text, encoding="utf-8")
    result = ingest_java_log(str(root / "lake"), log, cluster_id="prod")
    _balanced(result)
    _no_canary(root / "lake", "")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), files=st.integers(1, 4))
def test_properties_fuzz(tmp_path_factory: object, seed: int, files: int) -> None:
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("fuzz-props")  # type: ignore[attr-defined]
    base = root / "props" / "prod"
    base.mkdir(parents=True)
    for f in range(files):
        lines = ["# client.type: producer", "acks=all", f"client.id=p{f}", f"ssl.key.password={CANARY}",
                 f"sasl.jaas.config=PlainLoginModule required password=\"{CANARY}\";",
                 f"bootstrap.servers=u:{CANARY}@k1:9092", "linger.ms=5\\", "  0"]
        text = "\n".join(rng.sample(lines, len(lines)))
        (base / f"c{f}.properties").write_text(text[: rng.randrange(1, len(text) + 1)], encoding="utf-8")
    result = ingest_properties(str(root / "lake"), root / "props")
    _balanced(result)
    assert result.records_read == files
    _no_canary(root / "lake", "")
