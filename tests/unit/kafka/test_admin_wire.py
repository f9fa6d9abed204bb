"""The helper's lines: admin results survive the hop exactly, hostile text stays one line, bad shapes are refused."""

from __future__ import annotations

import pytest

from backend.kafka import admin_wire as W
from backend.kafka.admin import ClusterDescription, MetadataView, NodeInfo, TopicInfo, TopicListing

HOSTILE = ["t\nnext line", "\ud800lone", "<b>x</b>", "\u202egnp.exe", "", "é" * 300]


def _hop(message: dict) -> dict:
    line = W.dumps(message)
    assert line.count(b"\n") == 1 and line.endswith(b"\n") and line.isascii()
    return W.loads(line)


def test_every_result_comes_back_equal() -> None:
    nodes = [NodeInfo(1, "h\n1", 9092, None), NodeInfo(2, "h2", 9093, "rack\u202e")]
    description = ClusterDescription("id\u0000", 2, nodes, ["DESCRIBE", "ALTER"])
    view = MetadataView(None, None, nodes, HOSTILE)
    listing = TopicListing(
        topics=[TopicInfo(name, None if i % 2 else "AAAAAAAAAAAAAAAAAAAAAQ", bool(i % 2), i, 3, 1, 0, {1, 2, 7})
                for i, name in enumerate(HOSTILE)],
        failed={"x\ny": "KafkaError{code=UNKNOWN}"},
    )
    got = _hop({"result": W.encode_description(description)})["result"]
    assert W.decode_description(got) == description
    assert W.decode_view(_hop({"result": W.encode_view(view)})["result"]) == view
    assert W.decode_listing(_hop({"result": W.encode_listing(listing)})["result"]) == listing
    assert W.decode_errors(_hop({"r": W.encode_errors([(-195, "down\n")])})["r"]) == [(-195, "down\n")]


@pytest.mark.parametrize("value", [
    None, [], {"brokers": [[1, "h", 9092]], "topic_names": []},
    {"brokers": [[True, "h", 9092, None]], "topic_names": []},
    {"brokers": [[1, "h", "9092", None]], "topic_names": []},
    {"brokers": [], "topic_names": [1]},
    {"brokers": [], "topic_names": ["t"], "cluster_id": 5},
])
def test_a_view_of_the_wrong_shape_is_refused(value: object) -> None:
    with pytest.raises(W.WireError):
        W.decode_view(value)


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n", b"\xff\xfe\n", b"{\"a\": NaN}\n"])
def test_a_line_that_is_no_json_object_is_refused(line: bytes) -> None:
    with pytest.raises(W.WireError):
        W.loads(line)


def test_a_listing_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(W.WireError):
        W.decode_listing({"topics": [["t", None, 1, 1, 1, 0, 0, []]], "failed": {}})  # internal must be a bool
    with pytest.raises(W.WireError):
        W.decode_listing({"topics": [], "failed": {"t": 3}})
