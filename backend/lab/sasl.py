"""Server side of SASL PLAIN and SCRAM-SHA-256/512 for the lab broker."""

from __future__ import annotations

import hmac

from scramp import ScramException, ScramMechanism

from backend.lab.model import SaslSpec


class SaslFailure(Exception):
    """Authentication failed; the message is safe to send to the client (no secrets)."""


class SaslSession:
    """One authentication exchange on one connection."""

    def __init__(self, spec: SaslSpec, mechanism: str) -> None:
        if mechanism not in spec.mechanisms:
            raise SaslFailure(f"unsupported SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self._passwords = {u.name: u.secret() for u in spec.users}
        self.username: str | None = None
        self.done = False
        self._scram = None
        if mechanism.startswith("SCRAM-"):
            scram = ScramMechanism(mechanism)
            self._auth_info = {name: scram.make_auth_info(pw, iteration_count=4096) for name, pw in self._passwords.items()}
            self._scram = scram.make_server(self._lookup)

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        if username not in self._auth_info:
            raise ScramException("unknown user")
        return self._auth_info[username]

    def step(self, token: bytes) -> bytes:
        """Consume one client token and return the server's reply; raises SaslFailure."""
        if self.done:
            raise SaslFailure("authentication already complete")
        if self._scram is None:
            return self._plain(token)
        try:
            if self._scram.stage is None:
                self._scram.set_client_first(token.decode("utf-8"))
                self.username = _scram_username(token.decode("utf-8"))
                return self._scram.get_server_first().encode("utf-8")
            self._scram.set_client_final(token.decode("utf-8"))
            self.done = True
            return self._scram.get_server_final().encode("utf-8")
        except (ScramException, UnicodeDecodeError) as exc:
            raise SaslFailure(f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}") from exc

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN request: expected 3 tokens")
        _authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        expected = self._passwords.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.username = user
        self.done = True
        return b""


def _scram_username(client_first: str) -> str | None:
    for part in client_first.split(","):
        if part.startswith("n="):
            return part[2:].replace("=2C", ",").replace("=3D", "=")
    return None
