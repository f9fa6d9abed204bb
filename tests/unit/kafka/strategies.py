"""Hypothesis strategies that build valid message bodies straight from the codec's schemas."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from backend.kafka import protocol as P

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
TEXT = st.text(max_size=12)
UUIDS = st.binary(min_size=16, max_size=16).map(P.uuid_to_kafka_str)


def _active(f: P.Field, version: int) -> bool:
    rng = P._vrange(f.versions)
    return rng is not None and rng[0] <= version <= rng[1]


def _nullable(f: P.Field, version: int) -> bool:
    rng = P._vrange(f.nullable)
    return rng is not None and rng[0] <= version <= rng[1]


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in _INTS:
        bits = _INTS[t]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return TEXT
    if t == "bytes":
        return st.binary(max_size=24)
    if t == "uuid":
        return UUIDS
    if t == "float64":
        return st.floats(allow_nan=False)
    raise AssertionError(t)


def field_value(f: P.Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    """Values valid for one field at one version."""
    if f.type.startswith("[]"):
        inner = f.type[2:]
        item = body(f.fields, version, flexible) if inner == "struct" else _scalar(inner)
        base: st.SearchStrategy[Any] = st.lists(item, max_size=3)
    elif f.type == "struct":  # one nested struct, never null
        return body(f.fields, version, flexible)
    else:
        base = _scalar(f.type)
    if _nullable(f, version):
        return st.none() | base
    return base


def body(fields: tuple[P.Field, ...], version: int, flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with a value for every field active at this version."""
    parts = {
        f.name: field_value(f, version, flexible)
        for f in fields
        if _active(f, version) and (f.tag is None or flexible)
    }
    return st.fixed_dictionaries(parts)


def expected(fields: tuple[P.Field, ...], version: int, flexible: bool, value: dict[str, Any]) -> dict[str, Any]:
    """What decoding the encoded value must give: the value plus defaults for absent fields."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.name in value:
            v = value[f.name]
            if f.type == "[]struct" and v is not None:
                v = [expected(f.fields, version, flexible, item) for item in v]
            elif f.type == "struct":
                v = expected(f.fields, version, flexible, v)
            out[f.name] = v
        else:
            out[f.name] = f.default_value()
    return out


def all_versions() -> list[tuple[int, int]]:
    """Every (api_key, version) the codec implements."""
    out = []
    for key, schema in sorted(P.SCHEMAS.items()):
        lo, hi = schema.valid_versions
        out.extend((key, v) for v in range(lo, hi + 1))
    return out
