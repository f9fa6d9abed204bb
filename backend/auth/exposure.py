"""Whether the UI may listen on an address without login: one decision for the app and the commands that start it."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from backend.config import AuthSettings

# Set to 1 by the command that starts the UI with --insecure-no-login (demo, serve); the app reads it.
ENV_INSECURE = "FLEETVIEW_INSECURE_NO_LOGIN"
INSECURE_FLAG = "--insecure-no-login"


def is_loopback(address: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and "localhost"; an empty address (every interface) or any other name is not."""
    text = (address or "").strip().strip("[]")
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def insecure_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the starting command passed --insecure-no-login (through FLEETVIEW_INSECURE_NO_LOGIN=1)."""
    return (os.environ if environ is None else environ).get(ENV_INSECURE, "") == "1"


@dataclass(frozen=True)
class Exposure:
    """The decision: may the UI serve, is login on, must every page say that login is off."""

    allowed: bool
    login: bool
    banner: bool
    reason: str


def decide_exposure(address: str | None, auth: AuthSettings, insecure_no_login: bool) -> Exposure:
    """Login on: serve anywhere. Login off: loopback only, unless [auth] required = false AND --insecure-no-login."""
    if auth.login:
        return Exposure(True, True, False, "login is on ([auth] required = true)")
    where = address or "every interface (0.0.0.0)"
    if is_loopback(address):
        return Exposure(True, False, False, f"no login, listening on loopback only ({where})")
    if auth.required is False and insecure_no_login:
        return Exposure(True, False, True, f"no login, listening on {where}: [auth] required = false and "
                                           f"{INSECURE_FLAG}")
    missing = ("the fleet file does not say [auth] required = false" if auth.required is not False
               else f"the command line lacks {INSECURE_FLAG}")
    return Exposure(False, False, False,
                    f"refusing to serve the UI on {where} without login ({missing}). Turn login on with "
                    "[auth] required = true in the fleet file and a provider in .streamlit/secrets.toml (docs/auth.md), "
                    f"listen on 127.0.0.1, or, to let anyone who reaches {where} see every cluster, set "
                    f"[auth] required = false and pass {INSECURE_FLAG}")


def fleet_auth(fleet_file: str | os.PathLike[str] | None) -> AuthSettings:
    """The [auth] settings of a fleet file (passwords not resolved); defaults when there is no fleet file.

    Raises backend.config.FleetConfigError for a file that cannot be used.
    """
    if fleet_file is None:
        return AuthSettings()
    from backend.config import load_fleet

    return load_fleet(fleet_file, resolve_secrets=False).auth


def ui_environment(insecure_no_login: bool) -> dict[str, str]:
    """Environment for the UI process a command starts: whether --insecure-no-login was given (always set, so a
    value inherited from the caller's shell never stands in for the flag)."""
    return {ENV_INSECURE: "1" if insecure_no_login else "0"}
