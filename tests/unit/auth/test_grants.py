"""The grant function: claims and the fleet file in, {cluster: role} out; deny by default, union of grants."""

from __future__ import annotations

from typing import Any

import pytest

from backend.auth.grants import claim_strings, claim_value, grants_for, may_log_in, operates_all, principals
from backend.config import Fleet, parse_fleet


def fleet(auth: str = "", clusters: dict[str, str | None] | None = None) -> Fleet:
    """A fleet file with login on, the given [auth] lines and clusters (name -> access line or None)."""
    text = "[auth]\nrequired = true\n" + auth + "\n"
    for name, access in (clusters or {}).items():
        text += f'[[clusters]]\nname = "{name}"\nbootstrap_servers = "127.0.0.1:9092"\n'
        text += f"access = {access}\n\n" if access else "\n"
    return parse_fleet(text, source="test.toml", secrets_path="/nonexistent/secrets.toml")


ALICE = {"sub": "a1", "email": "alice@example.com", "email_verified": True, "groups": ["sre", "dev"]}


def test_a_group_grants_view_and_nothing_else_is_granted() -> None:
    f = fleet(clusters={"eu": '{ view = ["group:sre"] }', "us": '{ view = ["group:payments"] }', "none": None})
    assert grants_for(ALICE, f) == {"eu": "view"}


def test_a_user_grant_matches_the_email_without_case() -> None:
    f = fleet(clusters={"eu": '{ operate = ["user:Alice@Example.COM"] }', "us": '{ view = ["user:bob@example.com"] }'})
    assert grants_for(ALICE, f) == {"eu": "operate"}


def test_an_unverified_email_names_nobody() -> None:
    f = fleet(clusters={"eu": '{ view = ["user:alice@example.com"] }'})
    assert grants_for({**ALICE, "email_verified": False}, f) == {}
    assert grants_for({k: v for k, v in ALICE.items() if k != "email_verified"}, f) == {"eu": "view"}


def test_another_user_claim_can_be_chosen() -> None:
    f = fleet('user_claim = "preferred_username"\n', clusters={"eu": '{ view = ["user:alice"] }'})
    assert grants_for({"sub": "x", "preferred_username": "ALICE", "email": "other@example.com"}, f) == {"eu": "view"}


def test_deny_by_default_without_a_grant_or_a_default() -> None:
    f = fleet(clusters={"eu": None, "us": None})
    assert grants_for(ALICE, f) == {}


def test_the_default_grant_covers_clusters_without_their_own() -> None:
    f = fleet('default_access = { view = ["group:sre"] }\n',
              clusters={"eu": None, "us": '{ view = ["group:payments"] }'})
    assert grants_for(ALICE, f) == {"eu": "view"}  # us has its own grant, which does not name sre


def test_grants_combine_by_union_and_operate_wins() -> None:
    f = fleet(clusters={"eu": '{ view = ["group:sre"], operate = ["user:alice@example.com"] }',
                        "us": '{ view = ["group:dev", "group:nobody"] }',
                        "ap": '{ view = ["group:nobody"], operate = ["group:dev"] }'})
    assert grants_for(ALICE, f) == {"eu": "operate", "us": "view", "ap": "operate"}


def test_a_string_claim_and_a_list_claim_both_work() -> None:
    f = fleet(clusters={"eu": '{ view = ["group:sre"] }'})
    assert grants_for({**ALICE, "groups": "sre"}, f) == {"eu": "view"}
    assert grants_for({**ALICE, "groups": ["dev", "sre"]}, f) == {"eu": "view"}
    assert grants_for({**ALICE, "groups": "sre,dev"}, f) == {}  # one string is one group, never split
    assert grants_for({**ALICE, "groups": {"sre": True}}, f) == {}  # neither a string nor a list: no groups


def test_nested_claim_paths_keycloak_style() -> None:
    f = fleet('groups_claim = "realm_access.roles"\n', clusters={"eu": '{ view = ["group:kafka-view"] }'})
    kc = {"sub": "k", "realm_access": {"roles": ["offline_access", "kafka-view"]}, "groups": ["sre"]}
    assert grants_for(kc, f) == {"eu": "view"}
    assert grants_for({"sub": "k", "groups": ["kafka-view"]}, f) == {}  # only the configured path counts


def test_several_claims_at_once_and_a_key_holding_dots() -> None:
    f = fleet('groups_claim = ["groups", "resource_access.fleetview.roles", "https://example.com/groups"]\n',
              clusters={"a": '{ view = ["group:one"] }', "b": '{ view = ["group:two"] }',
                        "c": '{ view = ["group:three"] }'})
    claims = {"sub": "x", "groups": ["one"], "resource_access": {"fleetview": {"roles": ["two"]}},
              "https://example.com/groups": ["three"]}
    assert grants_for(claims, f) == {"a": "view", "b": "view", "c": "view"}


def test_anyone_who_may_log_in_matches_star() -> None:
    f = fleet('allowed_groups = ["staff"]\n', clusters={"eu": '{ view = ["*"] }'})
    assert grants_for({"sub": "x", "groups": ["staff"]}, f) == {"eu": "view"}
    assert grants_for({"sub": "y", "groups": ["guests"]}, f) == {}


def test_allowed_groups_gate_every_grant() -> None:
    f = fleet('allowed_groups = ["sre"]\n', clusters={"eu": '{ operate = ["user:bob@example.com"] }'})
    bob = {"sub": "b", "email": "bob@example.com", "groups": ["dev"]}
    assert not may_log_in(bob, f.auth)
    assert grants_for(bob, f) == {}
    assert may_log_in(ALICE, f.auth)


def test_no_claims_no_grants() -> None:
    f = fleet('default_access = { view = ["*"] }\n', clusters={"eu": None})
    assert grants_for({}, f) == {}


def test_group_names_are_exact() -> None:
    f = fleet(clusters={"eu": '{ view = ["group:/sre"] }'})  # Keycloak's full group path
    assert grants_for(ALICE, f) == {}
    assert grants_for({**ALICE, "groups": ["/sre"]}, f) == {"eu": "view"}


def test_operates_all_needs_operate_on_every_cluster_of_the_fleet() -> None:
    f = fleet(clusters={"eu": '{ operate = ["group:sre"] }', "us": '{ view = ["group:sre"] }'})
    assert not operates_all(grants_for(ALICE, f), f)
    f2 = fleet('default_access = { operate = ["group:sre"] }\n', clusters={"eu": None, "us": None})
    assert operates_all(grants_for(ALICE, f2), f2)


@pytest.mark.parametrize(("value", "expected"), [
    ("a", {"a"}), (["a", "b", 3], {"a", "b", "3"}), ([None, True, {"x": 1}, ""], set()), (None, set()),
    (True, set()), ("", set()),
])
def test_claim_strings(value: Any, expected: set[str]) -> None:
    assert claim_strings(value) == expected


def test_claim_value_walks_paths_and_literal_keys() -> None:
    claims = {"a": {"b": {"c": 1}}, "a.b": "literal", "x.y": {"z": 2}}
    assert claim_value(claims, "a.b") == "literal"
    assert claim_value(claims, "a.b.c") == 1
    assert claim_value(claims, "x.y.z") == 2
    assert claim_value(claims, "a.q") is None
    assert principals({"sub": "s", "email": "A@B.c", "groups": "g"}, fleet().auth) == {"*", "group:g", "user:a@b.c"}
