"""The client-config keys the analysis keeps per instance: the keys the policy file's client_config checks name.

Two sources, joined: the policy file the poller has in force (its copy in the lake, `_state/standards/
policy_file.json`, so the service, the demo and a Spark cluster without the fleet file agree with the poller), and
the policy files a run is given (`analyze --config clusters.toml` names one through the fleet file, or
`--policies`). The job keeps, for every instance, its normalised value of each of these keys (results/
client_instances); a key named for the first time is filled for every instance by the next run, a key no policy
names any more is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from backend.standards.policy import PolicyFileError, PolicySet, load_policies, parse_policies
from backend.store.atomic import read_json
from backend.store.location import LakeLocation
from backend.store.progress import state_path

log = logging.getLogger(__name__)
POLICY_STATE = ("standards", "policy_file")


def client_config_keys(policies: PolicySet) -> set[str]:
    """The keys of a policy set's client_config checks."""
    return {str(p.params["key"]) for p in policies.policies if p.check == "client_config"}


def in_force_keys(where: LakeLocation) -> set[str]:
    """The client_config keys of the policy file the poller judges with (empty when it has none)."""
    try:
        state = read_json(where, state_path(where, *POLICY_STATE), {})
    except (OSError, ValueError) as exc:
        log.warning("the poller's policy file state is not readable: %s", exc)
        return set()
    text = state.get("text") if isinstance(state, dict) else None
    if not isinstance(text, str) or not text.strip():
        return set()
    try:
        return client_config_keys(parse_policies(text, source=str(state.get("path") or "policy file")))
    except PolicyFileError as exc:  # the poller saves only a file that parsed; a newer parser may disagree
        log.warning("the poller's policy file no longer parses: %s", exc)
        return set()


def watched_keys(where: LakeLocation, policy_files: Iterable[str | Path] = (),
                 say: Callable[[str], None] | None = None) -> list[str]:
    """The keys to keep per instance: the poller's policy file's and the given files' (a refused file adds none,
    and says why through ``say``)."""
    keys = in_force_keys(where)
    for path in policy_files:
        try:
            keys |= client_config_keys(load_policies(path))
        except PolicyFileError as exc:
            log.warning("policy file refused, its keys are not kept per instance: %s", exc)
            if say is not None:
                say(f"policy file refused, its client-config keys are not kept per instance: {exc}")
    return sorted(keys)
