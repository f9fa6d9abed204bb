"""The fleet file refuses bad input with the file, line, cluster and key, and never shows a secret."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from backend.config import FleetConfigError, load_fleet, parse_fleet

REPO = Path(__file__).resolve().parents[3]
NO_SECRETS = "/nonexistent/secrets.toml"
BASE = '[[clusters]]\nname = "alpha"\nbootstrap_servers = ["127.0.0.1:9092"]\n'


def refusal(text: str, **kwargs: object) -> str:
    with pytest.raises(FleetConfigError) as info:
        parse_fleet(text, source="fleet.toml", secrets_path=kwargs.pop("secrets_path", NO_SECRETS))  # type: ignore[arg-type]
    return str(info.value)


def test_example_file_loads_with_passwords_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETVIEW_PROD_EU_PASSWORD", "example-secret-42")
    fleet = load_fleet(REPO / "clusters.example.toml", secrets_path=NO_SECRETS)
    assert [c.name for c in fleet.clusters] == ["prod-eu", "legacy-zk", "staging-mtls"]
    prod = fleet.cluster("prod-eu")
    assert prod.password() == "example-secret-42"
    assert prod.librdkafka_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    assert fleet.cluster("legacy-zk").zookeeper.connect_string.endswith("/kafka")  # type: ignore[union-attr]
    assert fleet.cluster("staging-mtls").librdkafka_config()["ssl.certificate.location"] == "/etc/fleetview/client.pem"
    assert fleet.settings.poll_interval_s == 30
    # The example shows how access works: a cluster's own grant, and the default for the others.
    from backend.auth.grants import grants_for

    assert fleet.auth.required is None and fleet.cluster("prod-eu").access is not None
    payments = grants_for({"email": "bob@example.com", "groups": ["payments"]}, fleet)
    assert payments == {"prod-eu": "view"}
    sre = grants_for({"email": "carol@example.com", "groups": ["sre"]}, fleet)
    assert sre == {"legacy-zk": "view", "staging-mtls": "view"}
    admins = grants_for({"email": "dan@example.com", "groups": ["kafka-admins"]}, fleet)
    assert set(admins.values()) == {"operate"} and set(admins) == {"prod-eu", "legacy-zk", "staging-mtls"}


def test_unknown_cluster_key_names_line_cluster_and_key() -> None:
    message = refusal(BASE + "bootstrap_server = 1\n")
    assert message.startswith("fleet.toml:4: cluster 'alpha': key 'bootstrap_server': unknown key")


def test_unknown_settings_key() -> None:
    message = refusal("[settings]\npoll_intervall_s = 5\n")
    assert "fleet.toml:2" in message and "key 'poll_intervall_s'" in message and "unknown key" in message


def test_unknown_nested_key_in_zookeeper_table() -> None:
    message = refusal(BASE + "[clusters.zookeeper]\nconnect = \"z:2181\"\nchrooot = \"/k\"\n")
    assert "fleet.toml:6" in message and "key 'zookeeper.chrooot'" in message


def test_duplicate_name_points_at_the_second_definition() -> None:
    message = refusal(BASE + BASE)
    assert "fleet.toml:5: cluster 'alpha': key 'name': duplicate cluster name" in message


def test_bad_security_protocol_is_named_with_the_allowed_values() -> None:
    message = refusal(BASE + 'security_protocol = "TLS"\n')
    assert "key 'security_protocol'" in message and "'SASL_SSL'" in message and "'TLS'" in message
    assert "fleet.toml:4" in message


def test_bad_sasl_mechanism() -> None:
    message = refusal(BASE + 'security_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\nsasl_username = "u"\n')
    assert "key 'sasl_mechanism'" in message and "GSSAPI" in message


@pytest.mark.parametrize("key", ["password", "sasl_password", '"sasl.password"', "ssl_key_password"])
def test_inline_password_is_refused_and_not_echoed(key: str) -> None:
    message = refusal(BASE + f'{key} = "hunter2-inline"\n')
    assert "fleet.toml:4: cluster 'alpha'" in message
    assert f"key '{key.strip(chr(34))}'" in message
    assert "never written in the fleet file" in message
    assert "hunter2-inline" not in message


def test_inline_password_inside_a_sub_table_is_refused() -> None:
    message = refusal(BASE + '[clusters.zookeeper]\nconnect = "z:1"\npassword = "zk-secret-9"\n')
    assert "key 'zookeeper.password'" in message and "zk-secret-9" not in message


def test_sasl_without_mechanism_or_user() -> None:
    assert "key 'sasl_mechanism'" in refusal(BASE + 'security_protocol = "SASL_SSL"\nsasl_username = "u"\n')
    assert "key 'sasl_username'" in refusal(BASE + 'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n')


def test_ssl_settings_without_ssl_protocol() -> None:
    message = refusal(BASE + 'ssl_cafile = "/ca.pem"\n')
    assert "fleet.toml:4" in message and "key 'ssl_cafile'" in message and "SSL" in message


def test_client_cert_without_key() -> None:
    message = refusal(BASE + 'security_protocol = "SSL"\nssl_certfile = "/c.pem"\n')
    assert "key 'ssl_keyfile'" in message


def test_bad_bootstrap_and_chroot() -> None:
    assert "fleet.toml:3: cluster 'a': key 'bootstrap_servers'" in refusal('[[clusters]]\nname = "a"\nbootstrap_servers = ["nohostport"]\n')
    assert "key 'zookeeper.chroot'" in refusal(BASE + 'zookeeper = { connect = "z:1", chroot = "kafka" }\n')


def test_toml_syntax_error_names_the_line() -> None:
    message = refusal(BASE + "name = \n")
    assert message.startswith("fleet.toml: not valid TOML") and "line 4" in message


def test_missing_password_names_the_env_var_not_a_value() -> None:
    text = BASE + 'security_protocol = "SASL_SSL"\nsasl_mechanism = "PLAIN"\nsasl_username = "u"\nsasl_password_env = "FV_TEST_UNSET_PW"\n'
    message = refusal(text)
    assert "fleet.toml:7: cluster 'alpha': key 'sasl_password_env'" in message and "FV_TEST_UNSET_PW" in message


SASL = BASE + 'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-256"\nsasl_username = "svc"\n'


def test_password_from_secrets_toml_never_in_repr_or_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[passwords]\nalpha = "from-secrets-file-77"\n')
    with caplog.at_level(logging.DEBUG):
        fleet = parse_fleet(SASL, source="fleet.toml", secrets_path=secrets)
        cluster = fleet.clusters[0]
        logging.getLogger("test").info("loaded %s %r %s", cluster, cluster, fleet)
    assert cluster.password() == "from-secrets-file-77"
    for text in (repr(cluster), str(cluster), repr(fleet), str(fleet), caplog.text, repr(cluster.security)):
        assert "from-secrets-file-77" not in text


def test_environment_wins_over_secrets_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[passwords]\nalpha = "file-value"\n')
    monkeypatch.setenv("FV_ALPHA_PW", "env-value")
    fleet = parse_fleet(SASL + 'sasl_password_env = "FV_ALPHA_PW"\n', source="f", secrets_path=secrets)
    assert fleet.clusters[0].password() == "env-value"


def test_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match="cannot read the fleet file"):
        load_fleet(tmp_path / "missing.toml")
