"""Session age from the ID token, and the one decision on serving without login."""

from __future__ import annotations

import pytest

from backend.auth.exposure import decide_exposure, insecure_requested, is_loopback
from backend.auth.session import session_expired, session_expires_at, session_key, session_started_at
from backend.config import AuthSettings

NOW = 1_800_000_000.0


def test_auth_time_wins_over_iat() -> None:
    assert session_started_at({"auth_time": NOW - 100, "iat": NOW - 10}) == NOW - 100
    assert session_started_at({"iat": NOW - 10}) == NOW - 10
    assert session_started_at({"iat": "yesterday"}) is None
    assert session_started_at({"iat": True}) is None


def test_a_session_expires_after_max_hours() -> None:
    claims = {"iat": NOW - 12 * 3600 + 1}
    assert not session_expired(claims, 12, NOW)
    assert session_expired(claims, 12, NOW + 1)
    assert session_expires_at(claims, 12) == NOW + 1
    # Streamlit's cookie lives 30 days; a 13-hour-old login with a 12-hour limit is out.
    assert session_expired({"auth_time": NOW - 13 * 3600, "iat": NOW - 60}, 12, NOW)


def test_unknown_or_future_start_is_expired() -> None:
    assert session_expired({}, 12, NOW)
    assert session_expired({"iat": float("nan")}, 12, NOW)
    assert session_expired({"iat": NOW + 3600}, 12, NOW)
    assert not session_expired({"iat": NOW + 60}, 12, NOW)  # small clock skew is tolerated


def test_session_key_differs_per_login() -> None:
    one = {"iss": "i", "sub": "s", "iat": 1, "nonce": "a"}
    assert session_key(one) == session_key(dict(one))
    assert session_key(one) != session_key({**one, "nonce": "b"})
    assert session_key(one) != session_key({**one, "iat": 2})


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST", True), ("", False), (None, False), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("fleet.example.com", False),
])
def test_is_loopback(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_login_on_serves_anywhere() -> None:
    decision = decide_exposure("0.0.0.0", AuthSettings(required=True), False)
    assert decision.allowed and decision.login and not decision.banner


def test_no_login_serves_loopback_only() -> None:
    assert decide_exposure("127.0.0.1", AuthSettings(), False).allowed
    for auth in (AuthSettings(), AuthSettings(required=False)):
        refused = decide_exposure("0.0.0.0", auth, False)
        assert not refused.allowed and "--insecure-no-login" in refused.reason
    refused = decide_exposure("", AuthSettings(), True)  # the flag alone is not enough
    assert not refused.allowed and "required = false" in refused.reason


def test_both_exceptions_together_serve_with_a_banner() -> None:
    decision = decide_exposure("0.0.0.0", AuthSettings(required=False), True)
    assert decision.allowed and not decision.login and decision.banner


def test_the_flag_reaches_the_app_through_the_environment() -> None:
    assert insecure_requested({"FLEETVIEW_INSECURE_NO_LOGIN": "1"})
    assert not insecure_requested({"FLEETVIEW_INSECURE_NO_LOGIN": "yes"})
    assert not insecure_requested({})
