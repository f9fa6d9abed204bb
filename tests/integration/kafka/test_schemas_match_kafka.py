"""The codec's schemas and the release table against the message JSON inside the real kafka-clients jars."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from backend.kafka import protocol as P
from backend.kafka import versions as V
from backend.kafka.versions_build import advertised_table, api_table_from_jar
from tests.rig.kafka import KAFKA_KRAFT_VERSION, KAFKA_ZK_VERSION
from tests.rig.procs import kafka_libs

MESSAGES = {
    P.API_API_VERSIONS: "ApiVersions",
    P.API_METADATA: "Metadata",
    P.API_DESCRIBE_CLUSTER: "DescribeCluster",
    P.API_SASL_HANDSHAKE: "SaslHandshake",
    P.API_SASL_AUTHENTICATE: "SaslAuthenticate",
    P.API_DESCRIBE_CONFIGS: "DescribeConfigs",
    P.API_FIND_COORDINATOR: "FindCoordinator",
    P.API_LIST_GROUPS: "ListGroups",
    P.API_DESCRIBE_GROUPS: "DescribeGroups",
    P.API_CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    P.API_SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    P.API_OFFSET_FETCH: "OffsetFetch",
    P.API_LIST_OFFSETS: "ListOffsets",
    P.API_DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
}
# APIs that arrived after 3.9: the 3.9.2 jar has no message JSON for them (checked, not skipped).
SINCE_4 = {P.API_DESCRIBE_SHARE_GROUP_OFFSETS}
_SCALARS = ("int8", "int16", "int32", "int64", "string", "bytes", "uuid", "bool", "float64")


def _jar(version: str) -> Path:
    return kafka_libs(version) / f"kafka-clients-{version}.jar"


def _strip_comments(text: str) -> str:
    out, in_string, i = [], False, 0
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return re.sub(r",(\s*[\]}])", r"\1", "".join(out))


def _message_json(version: str, name: str) -> dict[str, Any]:
    with zipfile.ZipFile(_jar(version)) as zf:
        return json.loads(_strip_comments(zf.read(f"common/message/{name}.json").decode()))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _in(spec: str | None, v: int) -> bool:
    rng = P._vrange(spec)
    return rng is not None and rng[0] <= v <= rng[1]


def _json_shape(fields: list[dict[str, Any]], v: int, flexible: bool,
                common: dict[str, list[dict[str, Any]]] | None = None) -> list[tuple[Any, ...]]:
    """Each field present in version v: (name, type, nullable, tag, sub-fields); structs resolved through commonStructs."""
    common = common or {}
    out = []
    for f in fields:
        if not _in(f["versions"], v):
            continue
        if "tag" in f and not flexible:
            continue
        t = f["type"]
        sub: list[tuple[Any, ...]] = []
        if t.startswith("[]") and t[2:] not in _SCALARS:
            sub = _json_shape(f.get("fields") or common[t[2:]], v, flexible, common)
            t = "[]struct"
        elif not t.startswith("[]") and t not in _SCALARS:  # one nested struct
            sub = _json_shape(f.get("fields") or common[t], v, flexible, common)
            t = "struct"
        out.append((_snake(f["name"]), t, _in(f.get("nullableVersions"), v), f.get("tag"), tuple(sub)))
    return out


def _our_shape(fields: tuple[P.Field, ...], v: int, flexible: bool) -> list[tuple[Any, ...]]:
    out = []
    for f in fields:
        if not _in(f.versions, v):
            continue
        if f.tag is not None and not flexible:
            continue
        sub = _our_shape(f.fields, v, flexible) if f.type in ("[]struct", "struct") else []
        out.append((f.name, f.type, _in(f.nullable, v), f.tag, tuple(sub)))
    return out


@pytest.mark.parametrize("kafka_version", [KAFKA_ZK_VERSION, KAFKA_KRAFT_VERSION])
@pytest.mark.parametrize("api_key", sorted(MESSAGES))
def test_codec_fields_match_kafkas_message_json(kafka_version: str, api_key: int) -> None:
    schema = P.SCHEMAS[api_key]
    if api_key in SINCE_4 and kafka_version == KAFKA_ZK_VERSION:
        with zipfile.ZipFile(_jar(kafka_version)) as zf:
            assert f"common/message/{MESSAGES[api_key]}Request.json" not in zf.namelist()
        return
    for kind, ours in (("Request", schema.request), ("Response", schema.response)):
        spec = _message_json(kafka_version, MESSAGES[api_key] + kind)
        assert spec["apiKey"] == api_key
        lo, hi = P._vrange(spec["validVersions"]) or (0, -1)
        flexible_from = (P._vrange(spec["flexibleVersions"]) or (None, None))[0]
        assert schema.flexible_from == flexible_from
        assert schema.valid_versions[0] <= lo and schema.valid_versions[1] >= hi
        for v in range(lo, hi + 1):
            flexible = schema.is_flexible(v)
            common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
            assert _our_shape(ours, v, flexible) == _json_shape(spec["fields"], v, flexible, common), (
                f"{MESSAGES[api_key]}{kind} v{v} differs from kafka-clients-{kafka_version}")


def test_kip885_version_is_the_next_free_describe_cluster_version_of_the_newest_broker() -> None:
    for kind in ("Request", "Response"):
        spec = _message_json(KAFKA_KRAFT_VERSION, f"DescribeCluster{kind}")
        assert (P._vrange(spec["validVersions"]) or (0, 0))[1] + 1 == P.DESCRIBE_CLUSTER_KIP885_VERSION


def test_push_config_api_key_and_error_code_are_unused_by_the_newest_broker() -> None:
    with zipfile.ZipFile(_jar(KAFKA_KRAFT_VERSION)) as zf:
        keys = {json.loads(_strip_comments(zf.read(n).decode()))["apiKey"]
                for n in zf.namelist() if n.startswith("common/message/") and n.endswith("Request.json")}
    assert P.PUSH_CONFIG_API_KEY not in keys and max(keys) < 200
    api_versions = _message_json(KAFKA_KRAFT_VERSION, "ApiVersionsRequest")
    assert (P._vrange(api_versions["validVersions"]) or (0, 0))[1] < P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION


@pytest.mark.parametrize(("kafka_version", "listener", "family"), [
    (KAFKA_ZK_VERSION, "zkBroker", "zk"),
    (KAFKA_ZK_VERSION, "broker", "kraft"),
    (KAFKA_KRAFT_VERSION, "broker", "kraft"),
])
def test_release_table_rows_equal_what_the_jars_say(kafka_version: str, listener: str, family: str) -> None:
    release = ".".join(kafka_version.split(".")[:2])
    row = next(r for r in V.release_rows() if r.release == release and r.family == family)
    from_jar = api_table_from_jar(_jar(kafka_version), listener)
    assert row.apis == advertised_table(from_jar, release, family)
    if release.startswith("4."):
        # The one documented difference: 4.x brokers advertise Produce from v0 (KAFKA-18659).
        assert from_jar[0][0] == 3 and row.apis[0][0] == 0
