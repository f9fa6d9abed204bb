"""A real OpenID Connect provider for the login tests: npm oidc-provider (tests/oidc, `make oidc-provider`)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rig.procs import LOG_FILES, REPO, RigError, free_port, log_tail

OIDC_DIR = REPO / "tests" / "oidc"
CLIENT_ID = "fleetview"
CLIENT_SECRET = "fleetview-test-client-secret"  # a test provider's client, on 127.0.0.1 only


def provider_installed() -> bool:
    """Whether `npm ci` has installed oidc-provider under tests/oidc and node is on PATH."""
    return (OIDC_DIR / "node_modules" / "oidc-provider" / "package.json").is_file() and shutil.which("node") is not None


@dataclass
class OidcProvider:
    """panva/oidc-provider on a free 127.0.0.1 port: users and their claims from `users`, one confidential client."""

    workdir: Path
    users: dict[str, dict[str, Any]]
    redirect_uris: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    # The API tests: more clients (client_credentials ones with "groups"), signing keys, the API's audience.
    extra_clients: list[dict[str, Any]] = field(default_factory=list)
    jwks: dict[str, Any] | None = None
    resource: str | None = None

    @property
    def issuer(self) -> str:
        """The issuer URL (also the base of every endpoint)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metadata_url(self) -> str:
        """The OpenID discovery document, what Streamlit's server_metadata_url names."""
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def log(self) -> Path:
        """The provider's stderr."""
        return self.workdir / "idp.log"

    def start(self, timeout_s: float = 30.0) -> None:
        """Write the config and start node; returns when it listens."""
        if not provider_installed():
            raise RigError("oidc-provider is not installed: run `make oidc-provider` (npm ci in tests/oidc)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "idp.json"
        settings: dict[str, Any] = {
            "port": self.port, "issuer": self.issuer, "users": self.users,
            "clients": [{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": self.redirect_uris,
                         "post_logout_redirect_uris": self.redirect_uris, "grant_types": ["authorization_code"],
                         "response_types": ["code"]}, *self.extra_clients],
        }
        if self.jwks is not None:
            settings["jwks"] = self.jwks
        if self.resource is not None:
            settings["resource"] = self.resource
        config.write_text(json.dumps(settings), encoding="utf-8")
        LOG_FILES.append(self.log)
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(["node", str(OIDC_DIR / "idp.mjs"), str(config)], cwd=OIDC_DIR,
                                         stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RigError(f"oidc-provider exited early:\n{log_tail(self.log)}")
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready and self.proc.stdout.readline().startswith(b"ready "):
                return
        self.stop()
        raise RigError(f"oidc-provider did not start in {timeout_s:.0f}s:\n{log_tail(self.log)}")

    def stop(self) -> None:
        """Stop node (its whole process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)

    def secrets_toml(self, cookie_secret: str, *, redirect_host: str = "localhost") -> str:
        """A Streamlit secrets.toml [auth] for this provider (redirect_uri with Streamlit's {port} placeholder)."""
        return (f'[auth]\nredirect_uri = "http://{redirect_host}:{{port}}/oauth2callback"\n'
                f'cookie_secret = "{cookie_secret}"\nclient_id = "{CLIENT_ID}"\nclient_secret = "{CLIENT_SECRET}"\n'
                f'server_metadata_url = "{self.metadata_url}"\n'
                # oidc-provider rejects Streamlit's default prompt=select_account; "groups" puts groups in the ID token.
                'client_kwargs = { prompt = "login", scope = "openid email profile groups" }\n')


def client_credentials_token(idp: OidcProvider, client_id: str, secret: str, resource: str | None = None) -> str:
    """An access token of the client-credentials grant (a JWT for the provider's resource, or `resource`)."""
    import httpx

    form = {"grant_type": "client_credentials", **({"resource": resource} if resource else {})}
    answer = httpx.post(f"{idp.issuer}/token", data=form, auth=(client_id, secret), timeout=30)
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def user_token(idp: OidcProvider, user: str, client_id: str, secret: str, redirect_uri: str,
               resource: str | None = None) -> str:
    """A user's access token through the authorization-code flow, driven over HTTP through the provider's own
    sign-in and consent forms (its development forms take any password)."""
    import base64
    import hashlib
    import re
    import secrets
    from urllib.parse import parse_qs, urljoin, urlsplit

    import httpx

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    params = {"client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri, "state": "s",
              "scope": "openid email profile groups api:read", "code_challenge": challenge,
              "code_challenge_method": "S256", "prompt": "login", **({"resource": resource} if resource else {})}
    with httpx.Client(base_url=idp.issuer, follow_redirects=False, timeout=30) as http:
        answer = http.get("/auth", params=params)
        for _ in range(12):
            location = answer.headers.get("location")
            if location and location.startswith(redirect_uri):
                code = parse_qs(urlsplit(location).query)["code"][0]
                break
            if location:
                answer = http.get(urljoin(str(answer.url), location))
                continue
            action = re.search(r'action="([^"]+)"', answer.text)
            if action is None:
                raise RigError(f"oidc-provider answered {answer.status_code} without a form: {answer.text[:300]}")
            fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', answer.text))
            if 'name="login"' in answer.text:
                fields.update({"login": user, "password": "any password: the development form takes any"})
            answer = http.post(urljoin(str(answer.url), action.group(1)), data=fields)
        else:
            raise RigError("the authorization-code flow did not come back to the redirect URI")
        token = http.post("/token", data={"grant_type": "authorization_code", "code": code,
                                          "redirect_uri": redirect_uri, "code_verifier": verifier,
                                          **({"resource": resource} if resource else {})},
                          auth=(client_id, secret))
        token.raise_for_status()
        return str(token.json()["access_token"])
