"""Bearer tokens (JWT) checked against the OpenID Connect provider's keys: signature, iss, aud, exp, nbf, algorithm.

The provider is the one the UI logs in with (secrets.toml [auth], its `server_metadata_url`); its discovery document
names the issuer and the JWKS. Keys are cached and fetched again when a token names a key id the cache does not hold
(key rotation), at most once per `refresh_min_s`. Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA):
`alg: none` and shared-secret HS* are refused before any key is looked at. Every network call has a timeout.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_S = 10
FETCH_TIMEOUT_S = 5.0
MAX_TOKEN_BYTES = 16 * 1024
log = logging.getLogger(__name__)


class TokenError(Exception):
    """A bearer token that is not accepted; `reason` is safe to show (it never quotes the token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProviderError(Exception):
    """The provider's discovery document or keys cannot be had (the API answers 503)."""


@dataclass(frozen=True)
class Provider:
    """Where the tokens come from: the discovery document, the audience they must carry."""

    metadata_url: str
    audience: str


def _b64json(part: str) -> Any:
    padded = part + "=" * (-len(part) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def token_header(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWT (not verified); raises TokenError when it is not one."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError("the token is too large")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("the token is not a signed JWT (three dot-separated parts)")
    try:
        header = _b64json(parts[0])
    except (ValueError, UnicodeError):
        raise TokenError("the token's header is not base64url JSON") from None
    if not isinstance(header, dict):
        raise TokenError("the token's header is not a JSON object")
    return header


class TokenVerifier:
    """Verifies bearer tokens of one provider; thread-safe, keys and discovery cached."""

    def __init__(self, provider: Provider, *, fetch: Callable[[str], Any] | None = None, leeway_s: int = LEEWAY_S,
                 refresh_min_s: float = 1.0, now: Callable[[], float] = time.time) -> None:
        """`fetch(url) -> JSON` (default: an HTTP GET with a timeout) reads the discovery document and the JWKS."""
        self.provider = provider
        self._fetch = fetch or _http_json
        self.leeway_s = leeway_s
        self.refresh_min_s = refresh_min_s
        self._now = now
        self._lock = threading.Lock()
        self._issuer: str | None = None
        self._jwks_uri: str | None = None
        self._keys: KeySet | None = None
        self._kids: frozenset[str] = frozenset()
        self._fetched_at = -1e18
        self._accepted: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self.key_fetches = 0

    def _discover(self) -> None:
        if self._issuer is not None:
            return
        try:
            meta = self._fetch(self.provider.metadata_url)
        except (OSError, ValueError, httpx.HTTPError) as exc:
            raise ProviderError(f"the OpenID provider's discovery document could not be read: {exc}") from None
        if not isinstance(meta, Mapping) or not isinstance(meta.get("issuer"), str) or not isinstance(
                meta.get("jwks_uri"), str):
            raise ProviderError("the OpenID provider's discovery document has no issuer or jwks_uri")
        self._issuer, self._jwks_uri = meta["issuer"], meta["jwks_uri"]

    def _load_keys(self) -> None:
        assert self._jwks_uri is not None
        try:
            data = self._fetch(self._jwks_uri)
            keys = KeySet.import_key_set(data)
        except (OSError, ValueError, httpx.HTTPError, JoseError) as exc:
            raise ProviderError(f"the OpenID provider's keys (JWKS) could not be read: {exc}") from None
        self._keys = keys
        self._kids = frozenset(str(k.kid) for k in keys.keys if k.kid)
        self._fetched_at = self._now()
        self.key_fetches += 1

    def _key_for(self, kid: str | None) -> KeySet:
        with self._lock:
            self._discover()
            if self._keys is None:
                self._load_keys()
            if kid is not None and kid not in self._kids and self._now() - self._fetched_at >= self.refresh_min_s:
                self._load_keys()  # a key the cache does not know: the provider may have rotated its keys
            if kid is not None and kid not in self._kids:
                raise TokenError("the token was signed with a key the provider does not publish (unknown kid)")
            assert self._keys is not None
            return self._keys

    @property
    def issuer(self) -> str | None:
        """The provider's issuer, once discovered."""
        return self._issuer

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims when it is accepted; raises TokenError (or ProviderError) otherwise."""
        now = self._now()
        cached = self._accepted.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        header = token_header(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenError(f"algorithm {str(alg)[:20]!r} is not accepted (only {', '.join(ALGORITHMS)})")
        kid = header.get("kid")
        keys = self._key_for(kid if isinstance(kid, str) else None)
        try:
            decoded = jwt.decode(token, keys, algorithms=[alg])
        except JoseError as exc:
            raise TokenError(f"the token's signature does not verify ({type(exc).__name__})") from None
        claims = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._now()), leeway=self.leeway_s,
            iss={"essential": True, "value": self._issuer or ""},
            aud={"essential": True, "value": self.provider.audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise TokenError(_claim_reason(exc)) from None
        if "nonce" in claims or claims.get("typ") == "ID":
            raise TokenError("an ID token is not an access token: ask the provider for an access token")
        exp = claims.get("exp")
        if isinstance(exp, int | float):
            with self._lock:
                self._accepted[token] = (min(float(exp) + self.leeway_s, now + 60.0), claims)
                while len(self._accepted) > 4096:
                    self._accepted.popitem(last=False)
        return claims


def _claim_reason(exc: JoseError) -> str:
    name = type(exc).__name__
    claim = str(getattr(exc, "claim", "") or "")
    text = str(getattr(exc, "description", "") or exc)
    if name == "ExpiredTokenError" or "expired" in text.lower():
        return "the token has expired"
    if claim == "aud" or "'aud'" in text:
        return "the token is not for this API (wrong audience)"
    if claim == "iss" or "'iss'" in text:
        return "the token comes from another issuer"
    if claim == "nbf" or "not yet valid" in text.lower():
        return "the token is not valid yet (nbf)"
    if claim == "exp" or "'exp'" in text:
        return "the token has no usable expiry (exp)"
    return f"the token's claims are not accepted ({name}: {claim or text[:80]})"


def _http_json(url: str) -> Any:
    response = httpx.get(url, timeout=FETCH_TIMEOUT_S, follow_redirects=False)
    response.raise_for_status()
    return response.json()
