"""A hostile lab fleet (issue 32): brokers and clients that send what an attacker would, and the lake they leave.

Cluster `evil` lies in every field it controls: a rack that is a spreadsheet formula, a software version with CR,
ESC, BEL and a bidi override, topics named with a bidi override, over 249 characters or with a NUL, config values
and topic overrides starting with = + - @, DescribeConfigs answers that add a topic and a broker nobody asked for,
and a long error text carrying a password. Cluster `calm` is an honest neighbour. A client pushes configs whose key
names are Markdown links and images (KIP-1324 PushConfig to the lab broker, written to its sink by the lab's policy).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from backend.kafka import protocol as P
from backend.lab.broker_configs import HostileAnswers
from backend.lab.clients import CollectedConfig, PushEntry, push_config
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config

EVIL = "evil.invalid"
SECRET = "hunter2-H"
FORMULA_RACK = f'=HYPERLINK("http://{EVIL}","x")'
BIDI_TOPIC = "abc\u202egpj.exe"
LONG_TOPIC = "L" * 300
NUL_TOPIC = "nul\x00x"
GHOST_TOPIC = "<script>alert(1)</script> ghost"
CONTROL_VERSION = "4.3.1\r\x1b[31m\x07\u202e"
# A 32,000-byte broker error message (the most a Kafka string field holds), a secret at its start and past 4 KiB.
ERROR_TEXT = "x" * 100 + f" password={SECRET} " + "y" * 8000 + f" token={SECRET}-T " + "z" * 23800
HOSTILE_KEYS = (f"![x](http://{EVIL}/i.png)", f"[click](http://{EVIL}/x)", f"<img src='http://{EVIL}/h.png'>",
                "abc\u202egpj.exe.key")
HOSTILE_CLIENT_ID = f"[client](http://{EVIL}/c) \u202eevil"
# What clients of `evil` tell its brokers (KIP-511 software, as its metrics endpoint serves it) and its group's name.
HOSTILE_SOFTWARE = f"=HYPERLINK(\"http://{EVIL}/s\") <b id='injected'>sw</b> [sw](http://{EVIL}/sw)\n\"q\""
HOSTILE_GROUP = f"[group](http://{EVIL}/g) <img src='http://{EVIL}/g.png'> =1+1"


def hostile_lab(state_dir: Path, *, clients: bool = False) -> LabFleet:
    """The two-cluster lab (not started); with ``clients``, `evil` also has a consumer group with a hostile name and
    client id, and its metrics endpoint reports a hostile client software that uses a removed protocol version."""
    raw = {"lab": {"state_dir": str(state_dir)}, "clusters": [
        {"name": "evil", "profile": "apache-kafka-4-kraft-kip885", "policy": {"push_config": True},
         "configs": {"compression.type": FORMULA_RACK, "log.message.timestamp.type": "+1+1",
                     "max.connections.per.ip.overrides": "-2+3", "listener.security.protocol.map": "@SUM(A1)"},
         "brokers": [{"id": 1, "rack": FORMULA_RACK}, {"id": 2, "software_version": CONTROL_VERSION}],
         "topics": [{"name": "orders", "configs": {"compression.type": "=1+1", "message.timestamp.type": "@x"}},
                    {"name": BIDI_TOPIC}, {"name": LONG_TOPIC, "configs": {"retention.ms": 2000}},
                    {"name": NUL_TOPIC, "configs": {"retention.ms": 3000}}]},
        {"name": "calm", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1, "rack": "r1"}],
         "topics": [{"name": "orders"}]},
    ]}
    if clients:
        raw["clusters"][0]["groups"] = [{"name": HOSTILE_GROUP, "topics": ["orders"], "members": 2,
                                         "client_id": HOSTILE_CLIENT_ID}]
        raw["clusters"][0]["metrics_clients"] = [{"software_name": HOSTILE_SOFTWARE, "software_version": "0.10 @SUM(A1)",
                                                  "deprecated": ["Produce:2"], "connections": 2}]
    return LabFleet(parse_lab_config(raw, state_dir))


def make_hostile(lab: LabFleet) -> None:
    """Switch on evil's hostile DescribeConfigs answers."""
    lab.set_hostile_answers("evil", HostileAnswers(extra_topics={GHOST_TOPIC: {"retention.ms": "1"}}, extra_broker="99",
                                                   errors={(P.RESOURCE_BROKER, "2"): ERROR_TEXT}))


@dataclass(frozen=True)
class Pushed:
    """What the hostile client's push came to."""

    status: str
    sink_dir: Path


def push_hostile_keys(lab: LabFleet) -> Pushed:
    """A client pushes its configs to evil's first broker with Markdown, HTML and bidi in the key names (KIP-1324)."""
    info = lab.clusters["evil"]
    broker = info.brokers[0]
    entries = (PushEntry("acks", "all", "STRING", False), PushEntry("linger.ms", "5", "LONG", False),
               *(PushEntry(key, "v", "STRING", False) for key in HOSTILE_KEYS))
    outcome = push_config(broker.host, broker.port, CollectedConfig(entries, ()), client_instance_id=str(uuid.uuid4()),
                          client_id=HOSTILE_CLIENT_ID, software_name="apache-kafka-java", software_version="3.9.0")
    assert info.sink_dir is not None
    return Pushed(outcome.status, Path(info.sink_dir))
