"""Bearer tokens: signature, iss, aud, exp, nbf, algorithm allow-list, key rotation (unknown kid), alg none."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from backend.api.tokens import Provider, TokenError, TokenVerifier

ISSUER = "https://idp.example"
AUDIENCE = "urn:fleetview:api"


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}, private=True)


class Idp:
    """A provider's discovery document and JWKS, served to the verifier as plain data (fetches counted)."""

    def __init__(self) -> None:
        self.keys = [_key("k1")]
        self.fetches: list[str] = []

    def fetch(self, url: str) -> Any:
        self.fetches.append(url)
        if url.endswith("openid-configuration"):
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"}
        return {"keys": [k.as_dict(private=False) for k in self.keys]}

    def token(self, key: RSAKey | None = None, **claims: Any) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "svc", "iat": now, "exp": now + 300, **claims}
        return jwt.encode({"alg": "RS256", "kid": key.kid}, body, key)


@pytest.fixture
def idp() -> Idp:
    return Idp()


def verifier(idp: Idp) -> TokenVerifier:
    return TokenVerifier(Provider(f"{ISSUER}/.well-known/openid-configuration", AUDIENCE), fetch=idp.fetch,
                         refresh_min_s=0.0)


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_a_good_token_gives_its_claims_and_is_checked_once(idp: Idp) -> None:
    check = verifier(idp)
    token = idp.token(groups=["team-eu"])
    assert check.verify(token)["groups"] == ["team-eu"]
    assert check.verify(token)["sub"] == "svc"
    assert check.key_fetches == 1


@pytest.mark.parametrize(("claims", "reason"), [
    (lambda now: {"exp": now - 3600}, "expired"),
    (lambda now: {"aud": "someone-else"}, "audience"),
    (lambda now: {"iss": "https://other.example"}, "issuer"),
    (lambda now: {"nbf": now + 3600}, "not valid yet"),
    (lambda now: {"nonce": "n"}, "ID token"),
])
def test_claims_that_are_refused(idp: Idp, claims: Any, reason: str) -> None:
    with pytest.raises(TokenError, match=reason):
        verifier(idp).verify(idp.token(**claims(int(time.time()))))


def test_a_token_without_exp_is_refused(idp: Idp) -> None:
    now = int(time.time())
    token = jwt.encode({"alg": "RS256", "kid": "k1"}, {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "iat": now},
                       idp.keys[0])
    with pytest.raises(TokenError):
        verifier(idp).verify(token)


def test_alg_none_and_shared_secret_algorithms_are_refused_before_any_key(idp: Idp) -> None:
    good = idp.token()
    _, payload, _ = good.split(".")
    check = verifier(idp)
    with pytest.raises(TokenError, match="algorithm 'none'"):
        check.verify(_b64({"alg": "none", "typ": "JWT"}) + "." + payload + ".")
    # HS256 signed with the provider's public key as the secret (the classic key-confusion attack).
    public = json.dumps(idp.keys[0].as_dict(private=False)).encode()
    hs = jwt.encode({"alg": "HS256", "kid": "k1"}, {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60},
                    OctKey.import_key(public))
    with pytest.raises(TokenError, match="algorithm 'HS256'"):
        check.verify(hs)
    assert idp.fetches == []


def test_a_forged_signature_is_refused(idp: Idp) -> None:
    header, payload, signature = idp.token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = ["kafka-admins"]
    with pytest.raises(TokenError, match="signature"):
        verifier(idp).verify(f"{header}.{_b64(claims)}.{signature}")
    stranger = _key("k1")  # same kid, another key
    with pytest.raises(TokenError, match="signature"):
        verifier(idp).verify(idp.token(key=stranger))


def test_key_rotation_fetches_the_keys_again_for_an_unknown_kid(idp: Idp) -> None:
    check = verifier(idp)
    check.verify(idp.token())
    idp.keys = [_key("k2")]  # the provider rotated its keys
    assert check.verify(idp.token())["sub"] == "svc"
    assert check.key_fetches == 2
    with pytest.raises(TokenError, match="unknown kid"):
        check.verify(idp.token(key=_key("k-nobody")))


def test_unknown_kids_cannot_make_it_fetch_more_than_once_a_second(idp: Idp) -> None:
    check = TokenVerifier(Provider(f"{ISSUER}/.well-known/openid-configuration", AUDIENCE), fetch=idp.fetch,
                          refresh_min_s=60.0)
    check.verify(idp.token())
    for n in range(5):
        with pytest.raises(TokenError, match="unknown kid"):
            check.verify(idp.token(key=_key(f"x{n}")))
    assert check.key_fetches == 1


@pytest.mark.parametrize("token", ["", "abc", "a.b", "a.b.c.d", "!!!.e30.x", "e30.e30.x", "W10.e30.x", "x" * 20000])
def test_garbage_is_a_token_error(idp: Idp, token: str) -> None:
    with pytest.raises(TokenError):
        verifier(idp).verify(token)
