"""Map a user's ID-token claims and the fleet file to the clusters they may view or operate (pure, no Streamlit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from backend.config import AccessGrant, AuthSettings, Fleet

Role = Literal["view", "operate"]
ANYONE = "*"
_MISSING = object()


def claim_value(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at a dotted path ("realm_access.roles"); a key that itself holds dots (Auth0's
    "https://example.com/groups") is found too. A missing claim gives None."""
    found = _lookup(claims, path)
    return None if found is _MISSING else found


def _lookup(node: Any, path: str) -> Any:
    if not isinstance(node, Mapping):
        return _MISSING
    if path in node:
        return node[path]
    for at, char in enumerate(path):
        if char == "." and path[:at] in node:
            found = _lookup(node[path[:at]], path[at + 1:])
            if found is not _MISSING:
                return found
    return _MISSING


def claim_strings(value: Any) -> set[str]:
    """A claim as a set of strings: a string is one value, a list gives its string (or number) items."""
    if isinstance(value, str):
        return {value} if value else set()
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {str(value)}
    if isinstance(value, list | tuple):
        return {str(item) for item in value if isinstance(item, str | int) and not isinstance(item, bool) and item != ""}
    return set()


def user_groups(claims: Mapping[str, Any], auth: AuthSettings) -> set[str]:
    """Every group the claims hold, over all configured group claim paths."""
    groups: set[str] = set()
    for path in auth.groups_claims:
        groups |= claim_strings(claim_value(claims, path))
    return groups


def user_name(claims: Mapping[str, Any], auth: AuthSettings) -> str | None:
    """The value `user:` principals are compared with (lower-cased), or None.

    An email the provider marks unverified (email_verified = false) names nobody.
    """
    value = claim_value(claims, auth.user_claim)
    if not isinstance(value, str) or not value:
        return None
    if auth.user_claim == "email" and claims.get("email_verified") is False:
        return None
    return value.casefold()


def principals(claims: Mapping[str, Any], auth: AuthSettings) -> set[str]:
    """The principals a user is: "*", "group:<g>" for each group, "user:<name>" (lower-cased)."""
    found = {ANYONE} | {f"group:{group}" for group in user_groups(claims, auth)}
    name = user_name(claims, auth)
    if name:
        found.add(f"user:{name}")
    return found


def may_log_in(claims: Mapping[str, Any], auth: AuthSettings) -> bool:
    """False when [auth] allowed_groups is set and the user is in none of them."""
    return not auth.allowed_groups or bool(user_groups(claims, auth) & set(auth.allowed_groups))


def _normal(principal: str) -> str:
    return f"user:{principal[5:].casefold()}" if principal.startswith("user:") else principal


def _matches(grant: Iterable[str], mine: set[str]) -> bool:
    return any(_normal(p) in mine for p in grant)


def role_in(grant: AccessGrant | None, mine: set[str]) -> Role | None:
    """The role one grant gives these principals: operate (which includes view), view, or None."""
    if grant is None:
        return None
    if _matches(grant.operate, mine):
        return "operate"
    if _matches(grant.view, mine):
        return "view"
    return None


def grants_for(claims: Mapping[str, Any], fleet: Fleet) -> dict[str, Role]:
    """{cluster name: role} for a logged-in user; clusters not listed are denied.

    A cluster's own `access` applies, else [auth] default_access, else nobody's. Grants combine by union:
    any principal of the user (a group, the user, "*") that a list names gives that role, and operate wins over
    view. A user outside [auth] allowed_groups gets nothing.
    """
    if not claims or not may_log_in(claims, fleet.auth):
        return {}
    mine = principals(claims, fleet.auth)
    roles: dict[str, Role] = {}
    for cluster in fleet.clusters:
        role = role_in(cluster.access if cluster.access is not None else fleet.auth.default_access, mine)
        if role is not None:
            roles[cluster.name] = role
    return roles


def operates_all(roles: Mapping[str, Role], fleet: Fleet) -> bool:
    """Whether the roles include operate on every cluster of the fleet file (what Poll now and Recompute touch)."""
    return bool(fleet.clusters) and all(roles.get(c.name) == "operate" for c in fleet.clusters)


def may_audit(claims: Mapping[str, Any], fleet: Fleet) -> bool:
    """Whether the claims hold the fleet-wide `audit` grant ([auth] audit): the Audit page and GET /api/v1/audit."""
    if not claims or not may_log_in(claims, fleet.auth) or not fleet.auth.audit:
        return False
    return _matches(fleet.auth.audit, principals(claims, fleet.auth))
