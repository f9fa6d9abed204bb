"""The policy file: every kind of mistake is refused with its line, key and why; good files parse to what they say."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.standards.policy import PolicyFileError, load_policies, parse_policies

REPO = Path(__file__).resolve().parents[3]
GOOD = """\
[[policies]]
id = "rf"
title = "RF 3"
check = "topic_shape"
replication_factor = { min = 3 }

"""


def refused(text: str) -> str:
    with pytest.raises(PolicyFileError) as caught:
        parse_policies(text, source="p.toml")
    return str(caught.value)


# (what is wrong, the text, the line, the key named, words of the reason)
MISTAKES = [
    ("not TOML", 'x = "unterminated\n', 1, None, "not valid TOML"),
    ("unknown top-level key", 'polices = []\n', 1, "polices", "unknown key"),
    ("policies not tables", 'policies = "x"\n', 1, "policies", "must be [[policies]] tables"),
    ("missing id", '[[policies]]\ntitle = "t"\ncheck = "cluster"\nmode = "kraft"\n', 1, "id", "required"),
    ("bad id", '[[policies]]\nid = "a b"\ntitle = "t"\ncheck = "cluster"\nmode = "kraft"\n', 2, "id", "an id is"),
    ("missing check", '[[policies]]\nid = "a"\ntitle = "t"\n', 1, "check", "required"),
    ("unknown check", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "topics"\n', 4, "check", "unknown check"),
    ("key of another check", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "cluster"\nmode = "kraft"\n'
                             'config = "x"\n', 6, "config", "unknown key for a cluster check"),
    ("missing title", '[[policies]]\nid = "a"\ncheck = "cluster"\nmode = "kraft"\n', 1, "title", "required"),
    ("bad severity", '[[policies]]\nid = "a"\ntitle = "t"\nseverity = "high"\ncheck = "cluster"\nmode = "kraft"\n',
     4, "severity", "must be one of critical, warning, info"),
    ("bad selector", '[[policies]]\nid = "a"\ntitle = "t"\nselect = { env = 3 }\ncheck = "cluster"\n'
                     'mode = "kraft"\n', 4, "select.env", "must be a tag value"),
    ("bad negation", '[[policies]]\nid = "a"\ntitle = "t"\nselect = { env = { no = "x" } }\ncheck = "cluster"\n'
                     'mode = "kraft"\n', 4, "select.env", "takes one key: not"),
    ("missing require", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "broker_config"\nconfig = "x.y"\n', 1,
     "require", "required"),
    ("requirement typo", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "broker_config"\nconfig = "x"\n'
                         'require = { mn = 2 }\n', 6, "require.mn", "unknown key"),
    ("min not a number", GOOD.replace("min = 3", 'min = "three"'), 5, "replication_factor.min", "must be a number"),
    ("min above max", GOOD.replace("min = 3", "min = 5, max = 3"), 5, "replication_factor.min", "is above max"),
    ("list without a word", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "broker_config"\nconfig = "x"\n'
                            'require = ["a", "b"]\n', 6, "require", "one_of"),
    ("empty one_of", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "broker_config"\nconfig = "x"\n'
                     'require = { one_of = [] }\n', 6, "require.one_of", "non-empty list"),
    ("bad where", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "topic_shape"\npartitions = { max = 9 }\n'
                  'where = { rf = { min = 3 } }\n', 6, "where.rf", "unknown condition"),
    ("bad version", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "cluster"\nversion_min = "three"\n', 5,
     "version_min", "is not a release"),
    ("floor above ceiling", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "cluster"\nversion_min = "4.0"\n'
                            'version_max = "3.9"\n', 5, "version_min", "above version_max"),
    ("bad mode", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "cluster"\nmode = "zk"\n', 5, "mode",
     "must be one of kraft, zookeeper"),
    ("empty cluster check", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "cluster"\n', 1, "(table)",
     "needs mode, version_min and/or version_max"),
    ("bad client type", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "client_config"\nclient_type = "app"\n'
                        'key = "acks"\nrequire = 1\n', 5, "client_type", "must be one of producer"),
    ("bad unreported", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "client_config"\nclient_type = "producer"\n'
                       'key = "acks"\nrequire = 1\nunreported = "ignore"\n', 8, "unreported", "must be one of"),
    ("bad floor", '[[policies]]\nid = "a"\ntitle = "t"\ncheck = "client_software"\n'
                  'floors = { "apache-kafka-java" = 3 }\n', 5, "floors.apache-kafka-java", "must be a version"),
    ("bad effective", GOOD.replace('check = "topic_shape"', 'effective = "soon"\ncheck = "topic_shape"'), 4,
     "effective", "must be a date"),
    ("naive datetime", GOOD.replace('check = "topic_shape"', 'effective = 2026-01-01T00:00:00\ncheck = "topic_shape"'),
     4, "effective", "needs a time zone"),
    ("duplicate id", GOOD + GOOD, 8, "id", "duplicate policy id (first defined in policy #1)"),
    ("waiver of no policy", GOOD + '[[waivers]]\npolicy = "nope"\ncluster = "c"\nowner = "o"\nreason = "r"\n'
                                   'expires = 2030-01-01\n', 8, "policy", "no policy has the id 'nope'"),
    ("waiver without expiry", GOOD + '[[waivers]]\npolicy = "rf"\ncluster = "c"\nowner = "o"\nreason = "r"\n', 7,
     "expires", "every waiver ends"),
    ("waiver without owner", GOOD + '[[waivers]]\npolicy = "rf"\ncluster = "c"\nreason = "r"\nexpires = 2030-01-01\n',
     7, "owner", "required"),
    ("waiver topic and group", GOOD + '[[waivers]]\npolicy = "rf"\ncluster = "c"\ntopic = "t"\ngroup = "g"\n'
                                     'owner = "o"\nreason = "r"\nexpires = 2030-01-01\n', 11, "group", "not both"),
    ("waiver unknown key", GOOD + '[[waivers]]\npolicy = "rf"\ncluster = "c"\nowner = "o"\nreason = "r"\n'
                                 'expires = 2030-01-01\nuntil = 2030-01-01\n', 13, "until", "unknown key"),
]


@pytest.mark.parametrize(("what", "text", "line", "key", "why"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_every_mistake_names_line_key_and_why(what: str, text: str, line: int, key: str | None, why: str) -> None:
    """Each kind of mistake, at its line and key."""
    message = refused(text)
    assert message.startswith(f"p.toml:{line}:"), message
    if key is not None:
        assert f"key '{key}'" in message, message
    assert why in message, message


def test_a_bad_regular_expression_names_the_pattern() -> None:
    message = refused(GOOD.replace('check = "topic_shape"', 'check = "topic_shape"\ntopics = ["re:(orders"]'))
    assert message.startswith("p.toml:5:") and "key 'topics'" in message and "'re:(orders'" in message


def test_errors_name_the_policy_by_id_and_position() -> None:
    message = refused(GOOD + GOOD.replace('"rf"', '"rf2"').replace("min = 3", "min = true"))
    assert "policy 'rf2' (#2)" in message and message.startswith("p.toml:11:")


def test_load_reads_a_file_and_refuses_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    path.write_bytes(GOOD.encode() + b'# \xff\n')
    with pytest.raises(PolicyFileError, match=r"policies.toml:7: the policy file is not UTF-8"):
        load_policies(path)
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policies(tmp_path / "missing.toml")


def test_the_example_file_parses_with_every_check_kind_and_its_waivers() -> None:
    policies = load_policies(REPO / "policies.example.toml")
    assert len(policies.policies) >= 10
    assert {p.check for p in policies.policies} == {"broker_config", "topic_config", "topic_shape", "cluster",
                                                   "consumer_groups", "client_config", "client_software"}
    assert {w.policy for w in policies.waivers} <= {p.id for p in policies.policies}
    lines = (REPO / "policies.example.toml").read_text().splitlines()
    for p in policies.policies:  # each policy's line is its [[policies]] header
        assert lines[p.line - 1].strip() == "[[policies]]" and f'id = "{p.id}"' in lines[p.line]


def test_selectors_patterns_and_requirements_mean_what_they_say() -> None:
    policies = parse_policies("""
[[policies]]
id = "a"
title = "t"
select = { env = ["prod", "staging"], team = { not = "sandbox" }, tier = "*" }
check = "topic_config"
config = "retention.ms"
require = { max = 604800000 }
topics = ["orders.*", "re:^pay"]
exclude_topics = ["*.tmp"]
""")
    policy = policies.policies[0]
    assert policy.select.matches({"env": "prod", "team": "core", "tier": "1"})
    assert not policy.select.matches({"env": "prod", "team": "sandbox", "tier": "1"})
    assert not policy.select.matches({"env": "dev", "team": "core", "tier": "1"})
    assert not policy.select.matches({"env": "prod", "team": "core"})  # tier must be present
    patterns = policy.params["topics"]
    assert patterns.matches("orders.eu") and patterns.matches("payments") and not patterns.matches("orders.eu.tmp")
    assert not patterns.matches("xpayments") and not patterns.matches("my-orders.eu")
    assert policy.wanted() == "retention.ms <= 604800000"
    assert policy.rule == "policy:a"
    assert parse_policies("").policies == ()
