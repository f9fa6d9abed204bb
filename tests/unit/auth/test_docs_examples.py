"""Every fleet-file example in docs/auth.md parses, and the worked claims get the grants the text says."""

from __future__ import annotations

import re
from pathlib import Path

from backend.auth.grants import grants_for
from backend.config import parse_fleet

DOC = Path(__file__).resolve().parents[3] / "docs" / "auth.md"


def _fleet_examples() -> list[str]:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    return [b for b in blocks if "[auth]" in b and "client_secret" not in b]


def test_every_fleet_file_example_parses() -> None:
    examples = _fleet_examples()
    assert len(examples) >= 4
    for text in examples:
        fleet = parse_fleet(text, source="docs/auth.md", secrets_path="/nonexistent/secrets.toml")
        assert fleet.auth.required is True


def test_the_keycloak_example_grants_as_the_text_says() -> None:
    keycloak = next(t for t in _fleet_examples() if "realm_access.roles" in t)
    fleet = parse_fleet(keycloak, source="docs/auth.md", secrets_path="/nonexistent/secrets.toml")
    claims = {"sub": "k", "realm_access": {"roles": ["offline_access", "kafka-view-eu"]}, "groups": ["/sre"]}
    assert grants_for(claims, fleet) == {"prod-eu": "view"}


def test_the_entra_example_grants_by_app_role_and_user() -> None:
    entra = next(t for t in _fleet_examples() if "preferred_username" in t)
    fleet = parse_fleet(entra, source="docs/auth.md", secrets_path="/nonexistent/secrets.toml")
    oncall = {"sub": "o", "preferred_username": "OnCall@contoso.com", "roles": ["Fleetview.User"]}
    assert grants_for(oncall, fleet) == {"prod-us": "operate"}
    assert grants_for({"sub": "x", "preferred_username": "oncall@contoso.com"}, fleet) == {}  # not an allowed group
