"""The poller's standards: the policy file (reloaded when it changes, the last good one kept), evaluated each poll.

`StandardsEngine.evaluate(poll)` judges every policy on every cluster with data and sets `snapshot.standards`,
appends one alert per violated (policy, cluster) to the poll (the incident tracker turns them into incidents) and
names the (rule, cluster) pairs whose evidence is missing in `poll.hold`, so an open incident is neither refreshed
nor resolved by a poll that could not judge it. The cost follows what changed: a policy is judged again on a
cluster only when its inputs changed (the poller, the config, group and inventory collectors and the client
results hand over the same objects while nothing changed), and topic policies judge only the topics that changed.
Waivers and effective dates are applied every poll (an expiry takes effect at the next poll).
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.config import Fleet
from backend.standards import evaluate as ev
from backend.standards.client_facts import ClientFacts, ClientResults
from backend.standards.policy import EMPTY, Policy, PolicyFileError, PolicySet, load_policies, parse_policies
from backend.store.commit import CommitConflict
from backend.store.model import Alert, ClusterSnapshot, FleetPoll, TopicSnapshot
from backend.store.progress import load_state, save_state
from backend.store.standards_model import ClientInstance, PolicyItem, PolicyResult, StandardsSnapshot

log = logging.getLogger(__name__)
DEFAULT_FILE = "policies.toml"
STATE_AREA = "standards"
STATE_NAME = "policy_file"
DOC_URL = "docs/standards.md"
SUBJECTS = {"broker_config": "brokers", "topic_config": "topics", "topic_shape": "topics", "cluster": "cluster",
            "consumer_groups": "groups", "client_config": "clients", "client_software": "clients"}
EVIDENCE_SAMPLE = 20
EVIDENCE_INSTANCES = 5  # client instances named per finding in an incident's evidence


def _who(client: ClientInstance) -> str:
    """An instance in a line of evidence: its client.id, else its instance id."""
    return client.client_id or f"instance {client.instance_id}"


def policies_path(fleet: Fleet) -> Path | None:
    """The policy file of a fleet file: [settings] policies (relative to the fleet file), else policies.toml beside it
    when present; None when there is none."""
    base = Path(fleet.source).parent if fleet.source and not fleet.source.startswith("<") else Path.cwd()
    named = fleet.settings.policies
    if named:
        path = Path(named)
        return path if path.is_absolute() else base / path
    beside = base / DEFAULT_FILE
    return beside if beside.is_file() else None


@dataclass
class FileState:
    """Where the policies in use come from, and the last refusal (shown on the Standards page)."""

    path: str | None = None
    digest: str | None = None
    loaded_at: str | None = None
    error: str | None = None
    error_at: str | None = None
    using: str = "none"  # file / last_good / none
    policies: list[dict[str, Any]] = field(default_factory=list)
    waivers: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The state file's content."""
        return {"path": self.path, "digest": self.digest, "loaded_at": self.loaded_at, "error": self.error,
                "error_at": self.error_at, "using": self.using, "policies": self.policies, "waivers": self.waivers,
                "text": self.text}


@dataclass
class _TopicMemo:
    """One topic policy on one cluster: each selected topic's outcome and running counts."""

    outcomes: dict[str, object] = field(default_factory=dict)
    checked: int = 0
    passing: int = 0
    items: dict[str, PolicyItem] = field(default_factory=dict)
    raw: ev.Raw | None = None

    def put(self, name: str, outcome: object) -> None:
        """Record a topic's outcome; an outcome equal to the one recorded changes nothing (the raw result, and so
        the finished one and its alert, stay the same objects)."""
        old = self.outcomes.get(name, ev.SKIP)
        if old is outcome or (old is not ev.SKIP and old == outcome and outcome is not ev.SKIP):
            return
        self.drop(name)
        if outcome is ev.SKIP:
            return
        self.outcomes[name] = outcome
        self.checked += 1
        if outcome is None:
            self.passing += 1
        else:
            assert isinstance(outcome, PolicyItem)
            self.items[name] = outcome
        self.raw = None

    def drop(self, name: str) -> None:
        if name not in self.outcomes:
            return
        old = self.outcomes.pop(name)
        self.checked -= 1
        if old is None:
            self.passing -= 1
        else:
            self.items.pop(name, None)
        self.raw = None


@dataclass
class _TopicView:
    """A cluster's topic list and overrides as last judged (compared with the next poll's to find what changed)."""

    topics_ref: object = None
    overrides_ref: object = None
    brokers_ref: object = None
    context: ev.TopicContext | None = None


@dataclass
class _Memo:
    inputs: tuple[object, ...] | None = None
    raw: ev.Raw | None = None
    finished_key: tuple[object, ...] | None = None
    result: PolicyResult | None = None
    topics: _TopicMemo | None = None
    item_signature: tuple[object, ...] | None = None
    finished_items: dict[int, tuple[PolicyItem, PolicyItem]] = field(default_factory=dict)


class StandardsEngine:
    """Policies of one fleet file judged each poll (see the module docstring)."""

    def __init__(self, path: Path | str | None, lake: str | None = None, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        """Load the policy file (or the last good copy the lake keeps when the file is refused)."""
        self.path = Path(path) if path is not None else None
        self.lake = lake
        self.clock = clock or (lambda: datetime.now(UTC))
        self.policies: PolicySet = EMPTY
        self.state = FileState(path=str(self.path) if self.path else None)
        self.clients = ClientResults(lake) if lake else None
        self._stamp: tuple[int, int] | None = None
        self._memo: dict[tuple[str, str], _Memo] = {}
        self._views: dict[str, _TopicView] = {}
        self._since: dict[tuple[str, str], dict[ev.SinceKey, datetime]] = {}
        self._status: dict[tuple[str, str], tuple[str, datetime]] = {}
        self._last: dict[str, StandardsSnapshot] = {}
        self._clusters: dict[str, _ClusterMemo] = {}
        self._alerts: dict[tuple[str, str], tuple[PolicyResult, Alert]] = {}
        self._boundaries: tuple[str, list[datetime]] | None = None
        self.evaluations = 0  # (policy, cluster) pairs judged again (tests and benchmarks count work with it)
        self.topics_judged = 0
        self._load(first=True)

    @classmethod
    def for_fleet(cls, fleet: Fleet, lake: str | None = None) -> StandardsEngine:
        """The engine of a fleet file's policy file."""
        return cls(policies_path(fleet), lake)

    # ------------------------------------------------------------------------------------------ the policy file

    def _file_stamp(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return (-1, -1)
        return (st.st_mtime_ns, st.st_size)

    def _load(self, *, first: bool = False) -> None:
        stamp = self._file_stamp()
        if not first and stamp == self._stamp:
            return
        self._stamp = stamp
        now = self.clock().isoformat()
        if self.path is None:
            self.policies, self.state = EMPTY, FileState(using="none")
            return
        try:
            loaded = load_policies(self.path)
        except PolicyFileError as exc:
            self.state.error, self.state.error_at = str(exc), now
            log.error("policy file refused, keeping the %s: %s",
                      "last good one" if self.policies.policies or not first else "last good copy in the lake", exc)
            if first:
                self._from_lake()
            self._save()
            return
        self._use(loaded)
        self.state = FileState(path=str(self.path), digest=loaded.digest, loaded_at=now, using="file",
                               policies=loaded.catalog(), waivers=waiver_rows(loaded), text=loaded.text)
        log.info("policy file %s: %d policies, %d waivers", self.path, len(loaded.policies), len(loaded.waivers))
        self._save()

    def _from_lake(self) -> None:
        if self.lake is None:
            return
        saved = load_state(self.lake, STATE_AREA, STATE_NAME)
        text = saved.get("text")
        if not isinstance(text, str):
            return
        try:
            loaded = parse_policies(text, source=f"{saved.get('path')} (last good copy, {saved.get('loaded_at')})")
        except PolicyFileError:
            return
        self._use(loaded)
        self.state.digest, self.state.loaded_at = loaded.digest, saved.get("loaded_at")
        self.state.using, self.state.policies, self.state.text = "last_good", loaded.catalog(), text
        self.state.waivers = waiver_rows(loaded)

    def use_policies(self, policies: PolicySet) -> None:
        """Judge with these policies (a caller that read the file itself, e.g. `check`)."""
        self._use(policies)
        self.state = FileState(path=policies.source, digest=policies.digest, using="file",
                               policies=policies.catalog(), waivers=waiver_rows(policies))

    def _use(self, loaded: PolicySet) -> None:
        old = {p.id: p.digest for p in self.policies.policies}
        new = {p.id: p.digest for p in loaded.policies}
        for key in [k for k in self._memo if old.get(k[0]) != new.get(k[0])]:
            del self._memo[key]
        self.policies = loaded

    def _save(self) -> None:
        if self.lake is None:
            return
        try:
            save_state(self.lake, STATE_AREA, STATE_NAME, self.state.as_json())
        except (OSError, CommitConflict) as exc:  # CommitConflict: another poller saved it first (its copy stands)
            log.warning("policy file state not saved to %s: %s", self.lake, exc)

    # ------------------------------------------------------------------------------------------- evaluating

    def seed(self, stored: Mapping[str, StandardsSnapshot]) -> None:
        """Take the stored results (after a restart) as the baseline of each finding's and status's `since`."""
        digests = {p.id: p.digest for p in self.policies.policies}
        for cluster, snapshot in stored.items():
            for result in snapshot.results.values():
                if digests.get(result.policy_id) != result.policy_digest:
                    continue  # judged with another definition of the policy: its dates do not carry over
                key = (result.policy_id, cluster)
                self._since[key] = {(i.kind, i.name, i.outcome): i.since for i in result.items if i.since}
                if result.since is not None:
                    self._status[key] = (result.status, result.since)
            self._last.setdefault(cluster, snapshot)

    def evaluate(self, poll: FleetPoll, *, now: datetime | None = None) -> None:
        """Judge every policy on every cluster of a poll with data; alerts and holds go into the poll."""
        self._load()
        now = now or self.clock()
        facts = self.clients.refresh() if self.clients is not None else None
        names = {s.cluster_name for s in poll.clusters}
        for key in [k for k in self._memo if k[1] not in names]:
            del self._memo[key]
        for name in [n for n in self._clusters if n not in names]:
            del self._clusters[name]
            self._views.pop(name, None)
        epoch = self._epoch(now)
        for snapshot in poll.clusters:
            if not snapshot.has_data:
                poll.hold.update((p.rule, snapshot.cluster_name) for p in self.policies.policies)
                continue
            cluster_facts = facts.get(snapshot.cluster_id or "") if facts is not None else None
            signature = _signature(snapshot, cluster_facts, facts is not None, epoch, self.policies.digest)
            cached = self._clusters.get(snapshot.cluster_name)
            if cached is not None and cached.signature == signature:
                snapshot.standards = cached.standards  # nothing it reads changed, no waiver or date boundary passed
                poll.alerts.extend(cached.alerts)
                poll.hold.update(cached.hold)
                continue
            results = self.evaluate_cluster(snapshot, cluster_facts, facts is not None, now)
            alerts, hold = [], set()
            for policy in self.policies.policies:
                result = results.get(policy.id)
                if result is None:
                    continue
                if result.status == "violation":
                    alerts.append(self._alert(policy, result))
                elif result.status == "unknown":
                    hold.add((policy.rule, snapshot.cluster_name))
            previous = self._last.get(snapshot.cluster_name)
            if previous is not None and previous.policy_set == self.policies.digest and _same(previous.results, results):
                snapshot.standards = previous
            else:
                snapshot.standards = StandardsSnapshot(now, self.policies.digest, results)
                self._last[snapshot.cluster_name] = snapshot.standards
            self._clusters[snapshot.cluster_name] = _ClusterMemo(signature, snapshot.standards, alerts, hold)
            poll.alerts.extend(alerts)
            poll.hold.update(hold)

    def _epoch(self, now: datetime) -> int:
        """How many waiver expiries and effective dates lie before now: a change of it re-applies them everywhere."""
        if self._boundaries is None or self._boundaries[0] != self.policies.digest:
            times = sorted({w.expires for w in self.policies.waivers} | {p.effective for p in self.policies.policies
                                                                          if p.effective is not None})
            self._boundaries = (self.policies.digest, times)
        return bisect.bisect_right(self._boundaries[1], now)

    def _alert(self, policy: Policy, result: PolicyResult) -> Alert:
        cached = self._alerts.get((policy.id, result.cluster_name))
        if cached is not None and cached[0] is result:
            return cached[1]
        alert = alert_of(policy, result)
        self._alerts[(policy.id, result.cluster_name)] = (result, alert)
        return alert

    def evaluate_cluster(self, snapshot: ClusterSnapshot, facts: ClientFacts | None, results: bool,
                         now: datetime) -> dict[str, PolicyResult]:
        """Every selected policy's result on one cluster with data."""
        out: dict[str, PolicyResult] = {}
        view = self._topic_view(snapshot) if any(
            p.check in ("topic_config", "topic_shape") for p in self.policies.policies) else None
        for policy in self.policies.policies:
            if not policy.select.matches(snapshot.tags):
                self._memo.pop((policy.id, snapshot.cluster_name), None)
                continue
            memo = self._memo.setdefault((policy.id, snapshot.cluster_name), _Memo())
            raw = self._raw(policy, snapshot, facts, results, memo, view)
            out[policy.id] = self._finish(policy, snapshot.cluster_name, raw, memo, now)
        return out

    def _raw(self, policy: Policy, s: ClusterSnapshot, facts: ClientFacts | None, results: bool, memo: _Memo,
             view: tuple[_TopicView, dict[str, TopicSnapshot | None], bool, dict[str, TopicSnapshot | None]] | None
             ) -> ev.Raw:
        if policy.check in ("topic_config", "topic_shape") and view is not None:
            return self._topic_raw(policy, s, memo, view)
        inputs = _inputs(policy, s, facts, results)
        if memo.raw is not None and memo.inputs is not None and len(memo.inputs) == len(inputs) and all(
                a is b or (type(a) in (int, str, bool, tuple, type(None)) and a == b)
                for a, b in zip(memo.inputs, inputs, strict=True)):
            return memo.raw
        self.evaluations += 1
        memo.inputs, memo.raw = inputs, ev.judge(policy, s, facts, results=results)
        return memo.raw

    def _topic_view(self, s: ClusterSnapshot) -> tuple[_TopicView, dict[str, TopicSnapshot | None], bool,
                                                       dict[str, TopicSnapshot | None]]:
        """The cluster's topics now, the topics that changed since the last poll (None: gone), and whether the broker
        configs (what topics inherit) changed. Topic lists usually keep their order: they are compared pairwise."""
        view = self._views.setdefault(s.cluster_name, _TopicView())
        configs = s.configs
        overrides = configs.topics if configs is not None else None
        brokers = configs.brokers if configs is not None else None
        changed: dict[str, TopicSnapshot | None] = {}
        old: list[TopicSnapshot] = view.topics_ref if isinstance(view.topics_ref, list) else []
        if view.topics_ref is not s.topics:
            paired = len(old) == len(s.topics)
            if paired:
                for a, b in zip(old, s.topics, strict=True):
                    if a is b:
                        continue
                    if a.topic != b.topic:
                        paired = False
                        break
                    if a != b:
                        changed[b.topic] = b
            if not paired:
                changed.clear()
                before = {t.topic: t for t in old}
                now_ = {t.topic: t for t in s.topics}
                changed.update({n: t for n, t in now_.items() if before.get(n) is not t and before.get(n) != t})
                changed.update(dict.fromkeys(before.keys() - now_.keys()))
        # topics whose overrides changed: only the topic_config policies read them
        with_overrides = dict(changed)
        if view.overrides_ref is not overrides:
            old_o: Mapping[str, object] = view.overrides_ref if isinstance(view.overrides_ref, dict) else {}
            new_o: Mapping[str, object] = overrides or {}
            moved = [n for n in old_o.keys() | new_o.keys() if old_o.get(n) is not new_o.get(n)
                     and old_o.get(n) != new_o.get(n) and n not in changed]
            if moved:
                index = {t.topic: t for t in s.topics}
                with_overrides.update({n: index.get(n) for n in moved})
        view.topics_ref, view.overrides_ref = s.topics, overrides
        # A new read of the configs is a new object; topics inherit from the brokers only when their values changed.
        brokers_changed = view.context is None or (view.brokers_ref is not brokers and view.brokers_ref != brokers)
        if brokers_changed:
            view.context = ev.TopicContext(configs)
        view.brokers_ref = brokers
        return view, changed, brokers_changed, with_overrides

    def _topic_raw(self, policy: Policy, s: ClusterSnapshot, memo: _Memo,
                   seen: tuple[_TopicView, dict[str, TopicSnapshot | None], bool, dict[str, TopicSnapshot | None]]
                   ) -> ev.Raw:
        view, changed, brokers_changed, with_overrides = seen
        configs_needed = policy.check == "topic_config"
        if configs_needed and s.configs is None:
            memo.topics = None
            memo.raw = ev.Raw(unknown_reason="broker and topic configs not read yet (they are read every "
                                             "config_interval_s)")
            return memo.raw
        assert view.context is not None
        overrides = s.configs.topics if s.configs is not None else {}
        topics = memo.topics
        judged: Iterable[tuple[str, TopicSnapshot | None]]
        if topics is None or (configs_needed and brokers_changed):
            topics = memo.topics = _TopicMemo()
            judged = ((t.topic, t) for t in s.topics)
            self.evaluations += 1
        else:
            moved = with_overrides if configs_needed else changed
            judged = moved.items()
            if moved:
                self.evaluations += 1
        for name, topic in judged:
            if topic is None:
                topics.drop(name)
                continue
            self.topics_judged += 1
            topics.put(name, ev.judge_topic(policy, topic, overrides.get(name), view.context))
        if topics.raw is None:
            evidence = s.configs.collected_at if s.configs is not None else s.polled_at
            topics.raw = ev.Raw(checked=topics.checked, passing=topics.passing, items=list(topics.items.values()),
                                evidence_at=evidence)
        memo.raw = topics.raw
        return topics.raw

    def _finish(self, policy: Policy, cluster: str, raw: ev.Raw, memo: _Memo, now: datetime) -> PolicyResult:
        waivers = self.policies.waivers_for(policy.id, cluster)
        signature = (tuple(w.active(now) for w in waivers), policy.effective is not None and now < policy.effective,
                     self.policies.digest)
        if memo.finished_key is not None and memo.result is not None and memo.finished_key[0] is raw and \
                memo.finished_key[1:] == signature:
            return memo.result
        pair = (policy.id, cluster)
        known = self._since.get(pair, {})
        if memo.item_signature != signature:
            memo.finished_items = {}
            memo.item_signature = signature
        cache = memo.finished_items
        fresh: dict[int, tuple[PolicyItem, PolicyItem]] = {}

        def one(item: PolicyItem) -> PolicyItem:
            hit = cache.get(id(item))
            if hit is not None and hit[0] is item:
                done = hit[1]
            else:
                done = ev.finish_item(policy, cluster, item, waivers, now)
                first = known.get((done.kind, done.name, done.outcome))
                if first is not None:
                    done = replace(done, since=first)
            fresh[id(item)] = (item, done)
            return done

        result = ev.finish(policy, cluster, raw, waivers, now, one=one)
        memo.finished_items = fresh
        previous = self._status.get(pair)
        if previous is None or previous[0] != result.status:
            self._status[pair] = (result.status, now)
        else:
            result = replace(result, since=previous[1])
        if len(known) != len(fresh) or any((d.kind, d.name, d.outcome) not in known for _i, d in fresh.values()):
            self._since[pair] = {(d.kind, d.name, d.outcome): d.since or now for _i, d in fresh.values()}
        memo.finished_key, memo.result = (raw, *signature), result
        return result


def _signature(s: ClusterSnapshot, facts: ClientFacts | None, results: bool, epoch: int, digest: str
               ) -> tuple[object, ...]:
    """What a cluster's policies read, compared whole: objects by identity (the collectors hand over the same
    ones while nothing changed), small values by value."""
    brokers = tuple((b.broker_id, b.reachable, b.software_name, b.software_version, b.version_provenance,
                     b.version_min, b.version_max, b.api_versions_json, b.error) for b in s.live_brokers)
    return (digest, epoch, tuple(sorted(s.tags.items())), id(s.topics), id(s.configs), id(s.groups),
            id(s.inventory), id(facts), results, brokers, s.zk_cluster_id, bool(s.zk_nodes), s.status,
            _Ref(s.topics, s.configs, s.groups, s.inventory, facts))


class _Ref:
    """Keeps the objects a signature names by id alive (an id is only unique while its object lives)."""

    __slots__ = ("objects",)

    def __init__(self, *objects: object) -> None:
        self.objects = objects

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ref) and all(a is b for a, b in zip(self.objects, other.objects, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(map(id, self.objects)))


@dataclass
class _ClusterMemo:
    signature: tuple[object, ...]
    standards: StandardsSnapshot | None
    alerts: list[Alert]
    hold: set[tuple[str, str]]


def waiver_rows(policies: PolicySet) -> list[dict[str, Any]]:
    """The waivers of a policy file as plain rows."""
    return [{"policy": w.policy, "cluster": w.cluster, "topic": w.topic, "group": w.group, "owner": w.owner,
             "reason": w.reason, "expires": w.expires.isoformat(), "line": w.line} for w in policies.waivers]


def _same(a: Mapping[str, PolicyResult], b: Mapping[str, PolicyResult]) -> bool:
    """Whether two evaluations of a cluster hold the same results (the evaluation time aside)."""
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if x is y:
            continue
        if (x.status, x.checked, x.passing, x.violating, x.unknown, x.waived, x.upcoming, x.reason, x.items,
                x.items_omitted, x.since, x.policy_digest, x.evidence_at) != (
                y.status, y.checked, y.passing, y.violating, y.unknown, y.waived, y.upcoming, y.reason, y.items,
                y.items_omitted, y.since, y.policy_digest, y.evidence_at):
            return False
    return True


def _inputs(policy: Policy, s: ClusterSnapshot, facts: ClientFacts | None, results: bool) -> tuple[object, ...]:
    """What one policy reads of a cluster: objects compared by identity, small values by equality."""
    configs = s.configs
    if policy.check == "broker_config":
        return (configs.brokers if configs else None, configs.errors if configs else None,
                tuple(b.broker_id for b in s.live_brokers))
    if policy.check == "cluster":
        brokers = tuple((b.broker_id, b.reachable, b.software_name, b.software_version, b.version_provenance,
                         b.version_min, b.version_max, b.api_versions_json, b.error) for b in s.live_brokers)
        return (brokers, configs.brokers if configs else None, s.zk_cluster_id, bool(s.zk_nodes))
    if policy.check == "consumer_groups":
        return (s.groups,)
    if policy.check == "client_software" and policy.params["source"] == "inventory":
        return (s.inventory,)
    return (facts, results)


def alert_of(policy: Policy, result: PolicyResult) -> Alert:
    """The fleet alert of a violated policy on one cluster (one incident per policy and cluster)."""
    violating = [i for i in result.items if i.outcome == "violation"]
    since = min((i.since for i in violating if i.since is not None), default=result.since)
    sample = [{"subject": i.subject, "seen": i.seen, "wanted": i.wanted, "since": i.since.isoformat() if i.since else None,
               **({"waiver": i.waiver} if i.waiver else {}),
               **({"instances": [_who(c) for c in i.instances[:EVIDENCE_INSTANCES]], "instances_more":
                   i.count - min(len(i.instances), EVIDENCE_INSTANCES)} if i.instances else {})}
              for i in violating[:EVIDENCE_SAMPLE]]
    evidence: dict[str, Any] = {"policy": policy.id, "title": policy.title, "wanted": policy.wanted(),
                                "violating": result.violating, "checked": result.checked,
                                "since": since.isoformat() if since else None, "seen": sample}
    expired = sorted({i.waiver for i in violating if i.waiver})
    if expired:
        evidence["expired_waivers"] = expired
    shown = "; ".join(f"{i.subject}: {i.seen}" + (f" ({', '.join(_who(c) for c in i.instances[:3])}"
                                                  + (f" and {i.count - min(len(i.instances), 3)} more"
                                                     if i.count > min(len(i.instances), 3) else "") + ")"
                                                  if i.instances else "") for i in violating[:3])
    more = f" and {len(violating) - 3} more" if len(violating) > 3 else ""
    explanation = (f"{policy.title}: {result.violating} of {result.checked} {SUBJECTS[policy.check]} violate it "
                   f"({shown}{more}); wanted {policy.wanted()}.")
    if expired:
        explanation += " A waiver expired: " + "; ".join(expired) + "."
    return Alert(rule=policy.rule, severity=policy.severity, cluster_name=result.cluster_name,
                 subject=SUBJECTS[policy.check], evidence=evidence, explanation=explanation,
                 doc_url=policy.doc_url or DOC_URL)
