"""[auth] and per-cluster access in the fleet file: validated like the rest of it, errors name file:line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import FleetConfigError, load_fleet, parse_fleet

CLUSTER = '[[clusters]]\nname = "eu"\nbootstrap_servers = "127.0.0.1:9092"\n'


def parse(text: str) -> object:
    return parse_fleet(text, source="fleet.toml", secrets_path="/nonexistent/secrets.toml")


def test_auth_and_access_are_read() -> None:
    fleet = parse('[auth]\nrequired = true\ngroups_claim = "realm_access.roles"\nmax_session_hours = 8\n'
                  'allowed_groups = ["staff"]\ndefault_access = { view = ["*"] }\n\n'
                  + CLUSTER + 'access = { view = ["group:sre", "user:a@b.c"], operate = ["group:ops"] }\n')
    assert fleet.auth.login and fleet.auth.groups_claims == ["realm_access.roles"]  # type: ignore[attr-defined]
    assert fleet.auth.max_session_hours == 8 and fleet.auth.default_access.view == ["*"]  # type: ignore[attr-defined]
    assert fleet.clusters[0].access.operate == ["group:ops"]  # type: ignore[attr-defined]


def test_without_auth_login_is_off_and_required_is_unset() -> None:
    fleet = parse(CLUSTER)
    assert fleet.auth.required is None and not fleet.auth.login  # type: ignore[attr-defined]
    assert fleet.clusters[0].access is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "expected"), [
    (CLUSTER + 'access = { view = ["sre"] }\n', "fleet.toml:4: cluster 'eu': key 'access.view': Value error, 'sre' is not a principal"),
    (CLUSTER + 'access = { view = ["group:"] }\n', "is not a principal"),
    (CLUSTER + 'access = { view = [" group:sre"] }\n', "is not a principal"),
    (CLUSTER + 'access = { admin = ["group:sre"] }\n', "fleet.toml:4: cluster 'eu': key 'access.admin': unknown key"),
    ('[auth]\nrequired = true\nrequire = true\n', "fleet.toml:3: auth: key 'require': unknown key"),
    ('[auth]\n\nmax_session_hours = 0\n', "fleet.toml:3: auth: key 'max_session_hours'"),
    ('[auth]\nmax_session_hours = 1000\n', "auth: key 'max_session_hours'"),
    ('[auth]\ngroups_claim = "realm_access..roles"\n', "fleet.toml:2: auth: key 'groups_claim'"),
    ('[auth]\nprovider = "my_idp"\n', "fleet.toml:2: auth: key 'provider'"),
    ('[auth]\ndefault_access = { view = ["team:x"] }\n', "fleet.toml:2: auth: key 'default_access.view'"),
    ('[auth]\nrequired = "yes"\n', "auth: key 'required'"),
])
def test_bad_auth_settings_name_file_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(FleetConfigError) as caught:
        parse(text)
    assert expected in str(caught.value)


@pytest.mark.parametrize("key", ["client_secret", "cookie_secret", "client_id", "server_metadata_url", "redirect_uri"])
def test_oidc_client_settings_belong_in_the_secrets_file(key: str) -> None:
    with pytest.raises(FleetConfigError) as caught:
        parse(f'[auth]\nrequired = true\n{key} = "value-that-must-not-be-echoed"\n')
    message = str(caught.value)
    assert f"fleet.toml:3: auth: key '{key}'" in message and ".streamlit/secrets.toml [auth]" in message
    assert "value-that-must-not-be-echoed" not in message


def test_the_ui_reads_grants_without_cluster_passwords(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text('[auth]\nrequired = true\n\n' + CLUSTER + 'security_protocol = "SASL_PLAINTEXT"\n'
                    'sasl_mechanism = "PLAIN"\nsasl_username = "u"\nsasl_password_env = "FLEETVIEW_UNSET_PW"\n'
                    'access = { view = ["group:sre"] }\n', encoding="utf-8")
    monkeypatch.delenv("FLEETVIEW_UNSET_PW", raising=False)
    with pytest.raises(FleetConfigError, match="no password found"):
        load_fleet(path, secrets_path=tmp_path / "none.toml")
    fleet = load_fleet(path, resolve_secrets=False)
    assert fleet.clusters[0].access.view == ["group:sre"]  # type: ignore[union-attr]
    assert fleet.clusters[0].password() is None
