"""What a diagnosis says: causes, findings, remedies, and the report of contract §2."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from typing import Any

from bot.domain.durations import human_seconds
from bot.domain.refs import ClusterName, ObjectRef
from bot.domain.seen import Recurrence, SeenBefore

REPORT_SCHEMA = "nsstuck.diagnosis/v1"


class Cause(StrEnum):
    """The fixed vocabulary of `cause` (contract §2)."""

    APISERVICE_UNAVAILABLE = "apiservice_unavailable"
    # a group version the aggregated discovery document marks Stale although its APIService is
    # Available and its own document answers (kubernetes/kubernetes#119662; an addition to §2)
    AGGREGATED_DISCOVERY_DEFECT = "aggregated_discovery_defect"
    ORPHANED_FINALIZER = "orphaned_finalizer"
    # a live controller cannot remove its finalizer: its cleanup must create objects in the
    # terminating namespace, which the API server forbids (an addition to §2)
    FINALIZER_DEADLOCK = "finalizer_deadlock"
    # a live controller's cleanup keeps failing for another reason (an external API refusing, a credential
    # gone): its failure shows in the object's status, the controller's log or its restarts (issue 37)
    CLEANUP_FAILING = "cleanup_failing"
    NAMESPACE_FINALIZER = "namespace_finalizer"
    WEBHOOK_BLOCKS_DELETE = "webhook_blocks_delete"
    POD_ON_LOST_NODE = "pod_on_lost_node"
    # pods past their grace period on Ready nodes that the kubelet has not finished, with no progress
    # for longer than the bound (a volume whose backend is gone, a hung runtime; issue 37 §5)
    POD_NOT_TERMINATING = "pod_not_terminating"
    PVC_IN_USE = "pvc_in_use"
    DISCOVERY_FAILURE = "discovery_failure"
    DELETION_ERROR = "deletion_error"
    CONTENT_DELETING = "content_deleting"
    # an Argo CD Application or a Flux Kustomization/HelmRelease manages the namespace or its content and
    # would re-create it on its next sync (issue 38 §5; an addition to §2): not a block, a warning
    GITOPS_OWNER = "gitops_owner"
    UNKNOWN = "unknown"


class NamespaceState(StrEnum):
    TERMINATING = "terminating"
    ACTIVE = "active"
    NOT_FOUND = "not_found"


class Risk(StrEnum):
    """How much a remedy can hurt if the evidence is wrong. Ordered from safest."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return list(Risk).index(self)


class Action(StrEnum):
    """What a remedy does. The first group changes nothing in the cluster by itself."""

    RESTORE_BACKEND = "restore_backend"  # bring back the service behind an APIService or webhook
    RESTORE_CONTROLLER = "restore_controller"  # reinstall/scale up the controller that owns a finalizer
    WAIT = "wait"  # deletion is progressing normally
    INVESTIGATE = "investigate"  # look at something nsstuck cannot see (controller logs, network)
    # a change a person makes by hand before deleting an Active namespace (a prediction's remedy):
    # nsstuck never carries it out, since nothing is being deleted yet
    PREPARE = "prepare"
    DELETE_APISERVICE = "delete_apiservice"
    DELETE_WEBHOOK_CONFIGURATION = "delete_webhook_configuration"
    REMOVE_FINALIZER = "remove_finalizer"
    REMOVE_NAMESPACE_FINALIZER = "remove_namespace_finalizer"
    FORCE_DELETE_POD = "force_delete_pod"
    FORCE_FINALIZE_NAMESPACE = "force_finalize_namespace"

    @property
    def changes_cluster(self) -> bool:
        # a set made once: asked of every remedy (thousands in a namespace of thousands of objects)
        return self not in _CHANGES_NOTHING


_CHANGES_NOTHING = frozenset(
    {Action.RESTORE_BACKEND, Action.RESTORE_CONTROLLER, Action.WAIT, Action.INVESTIGATE, Action.PREPARE}
)


@dataclass(frozen=True)
class BlockedBy:
    """An admission webhook that would reject a remedy's write: it fails closed and its backend cannot answer."""

    kind: str  # ValidatingWebhookConfiguration | MutatingWebhookConfiguration
    configuration: str
    webhook: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "configuration": self.configuration, "webhook": self.webhook}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BlockedBy:
        return cls(kind=data["kind"], configuration=data["configuration"], webhook=data["webhook"])

    def __str__(self) -> str:
        return f"webhook {self.webhook} ({self.kind} {self.configuration})"


# `json.dumps(value, sort_keys=True)`, without making an encoder for each remedy's id
_ID_KEYS = json.JSONEncoder(sort_keys=True)


@dataclass(frozen=True)
class Remedy:
    """One thing to do, with the exact objects it touches and the kubectl command it amounts to."""

    action: Action
    risk: Risk
    description: str
    targets: tuple[ObjectRef, ...] = ()
    commands: tuple[str, ...] = ()
    leaves_behind: tuple[str, ...] = ()
    # remove_finalizer / remove_namespace_finalizer: which finalizer
    finalizer: str | None = None
    # the fail-closed webhooks whose backend cannot answer and which would reject this remedy's write
    blocked_by: tuple[BlockedBy, ...] = ()
    # a `prepare` step (a prediction's fix before the delete): the change it stands for
    prepares: Action | None = None

    @property
    def blocked_reason(self) -> str | None:
        """Why this remedy cannot be carried out now, in words (None when nothing blocks it)."""
        if not self.blocked_by:
            return None
        hooks = ", ".join(str(b) for b in self.blocked_by)
        return (
            f"blocked: the API server would reject this write (failed calling webhook): {hooks} fails closed and "
            "its backend cannot answer; repair the webhook's backend or delete that webhook configuration first"
        )

    @property
    def requires_approval(self) -> bool:
        return self.action.changes_cluster

    @cached_property
    def id(self) -> str:
        """Stable across runs for the same action on the same objects (UIDs and versions included)."""
        key = _ID_KEYS.encode([self.action.value, self.finalizer, [t.to_json() for t in self.targets]])
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "action": self.action.value,
            "risk": self.risk.value,
            "requires_approval": self.requires_approval,
            "description": self.description,
            "targets": [t.to_json() for t in self.targets],
            "commands": list(self.commands),
        }
        if self.finalizer is not None:
            out["finalizer"] = self.finalizer
        if self.leaves_behind:
            out["leaves_behind"] = list(self.leaves_behind)
        if self.blocked_by:
            out["blocked_by"] = [b.to_json() for b in self.blocked_by]
        if self.prepares is not None:
            out["prepares"] = self.prepares.value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Remedy:
        return cls(
            action=Action(data["action"]),
            risk=Risk(data["risk"]),
            description=data["description"],
            targets=tuple(ObjectRef.from_json(t) for t in data.get("targets", ())),
            commands=tuple(data.get("commands", ())),
            leaves_behind=tuple(data.get("leaves_behind", ())),
            finalizer=data.get("finalizer"),
            blocked_by=tuple(BlockedBy.from_json(b) for b in data.get("blocked_by", ())),
            prepares=Action(data["prepares"]) if data.get("prepares") is not None else None,
        )


class ControllerState(StrEnum):
    """Whether the controller that removes a finalizer works, as far as the evidence shows (contract §2)."""

    ALIVE = "alive"  # something it did recently shows: a status change, an Event, a renewed Lease, a Ready workload
    DEAD = "dead"  # not running (scaled to zero, not ready for long, its Service gone, uninstalled), or none exists
    UNKNOWN = "unknown"  # the evidence shows neither (no Lease at all proves nothing)


class FoundBy(StrEnum):
    """How the controller of a finalizer was found (contract §2, `controller.found_by`), in the order looked."""

    CATALOGUE = "catalogue"  # the finalizer catalogue names it (and its workloads, images, Leases)
    HELM = "helm"  # the Helm release (annotations, app.kubernetes.io labels) of the CRD the object is of
    OLM = "olm"  # the ClusterServiceVersion that owns that CRD, and its deployments
    CONVERSION_WEBHOOK = "conversion_webhook"  # the CRD's conversion webhook Service and the pods it selects
    RBAC = "rbac"  # the service accounts allowed to update the resource (or its finalizers), and who runs as them
    NAME = "name"  # only the finalizer's name: its domain's words matched to workloads

    @property
    def said(self) -> str:
        """How it was found, in a few words (reports and Slack)."""
        return _FOUND_BY_SAID[self]


_FOUND_BY_SAID = {
    FoundBy.CATALOGUE: "named by the finalizer catalogue",
    FoundBy.HELM: "found through the CRD's Helm release",
    FoundBy.OLM: "found through OLM, the ClusterServiceVersion that owns the CRD",
    FoundBy.CONVERSION_WEBHOOK: "found through the CRD's conversion webhook",
    FoundBy.RBAC: "found through RBAC, who may update the resource",
    FoundBy.NAME: "guessed from the finalizer's name",
}


@dataclass(frozen=True)
class Controller:
    """The judgement on a finalizer's controller, with the evidence it rests on (what was looked for and
    what it showed), and how it was found."""

    state: ControllerState
    evidence: tuple[str, ...] = ()
    found_by: FoundBy | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state.value, "evidence": list(self.evidence)}
        if self.found_by is not None:
            out["found_by"] = self.found_by.value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Controller:
        found_by = data.get("found_by")
        return cls(
            state=ControllerState(data["state"]),
            evidence=tuple(data.get("evidence", ())),
            found_by=FoundBy(found_by) if found_by else None,
        )


@dataclass(frozen=True)
class Remaining:
    """The namespace controller's count of remaining objects at one time (NamespaceContentRemaining)."""

    at: datetime
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"at": _iso(self.at), "count": self.count}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Remaining:
        return cls(at=datetime.fromisoformat(data["at"]), count=int(data["count"]))


@dataclass(frozen=True)
class Progress:
    """Whether the objects a finding names have moved since their deletion began (issue 37 §1).

    `since`: when their deletion began (the oldest deletionTimestamp); `last_change`: the last change by
    another manager than nsstuck since then (managedFields times, a condition's transition, a
    resourceVersion that differs from an earlier snapshot's), None when none is seen; `remaining`: the
    namespace controller's counts across the incident's snapshots, oldest first (empty: not known);
    `bound_seconds`: how long a live controller may stand still before it is no longer "at work"."""

    since: datetime
    last_change: datetime | None
    observed_at: datetime
    bound_seconds: int
    remaining: tuple[Remaining, ...] = ()

    @property
    def still_since(self) -> datetime:
        return max(self.since, self.last_change) if self.last_change is not None else self.since

    @property
    def still_seconds(self) -> int:
        return max(0, int((self.observed_at - self.still_since).total_seconds()))

    @property
    def shrinking(self) -> bool:
        """The remaining count went down between the first and the last snapshot that counted it."""
        return len(self.remaining) >= 2 and self.remaining[-1].count < self.remaining[0].count

    @property
    def progressing(self) -> bool:
        return self.shrinking or self.still_seconds <= self.bound_seconds

    @property
    def stuck(self) -> bool:
        """No progress for longer than the bound."""
        return not self.progressing

    @property
    def text(self) -> str:
        """`no progress for 3d 4h`, `progressing: 1,240 → 310 objects in 10 min`, `last change 5m ago`."""
        if self.shrinking:
            first, last = self.remaining[0], self.remaining[-1]
            minutes = max(1, round((last.at - first.at).total_seconds() / 60))
            return f"progressing: {first.count:,} → {last.count:,} objects in {minutes} min"
        still = human_seconds(self.still_seconds, keep_zero=False)
        if self.stuck:
            return f"no progress for {still}"
        return f"no change for {still} (within the {human_seconds(self.bound_seconds, keep_zero=False)} bound)"

    def to_json(self) -> dict[str, Any]:
        return {
            "since": _iso(self.since),
            "last_change": _iso(self.last_change) if self.last_change is not None else None,
            "still_seconds": self.still_seconds,
            "bound_seconds": self.bound_seconds,
            "progressing": self.progressing,
            "remaining": [r.to_json() for r in self.remaining],
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], observed_at: datetime) -> Progress:
        last = data.get("last_change")
        return cls(
            since=datetime.fromisoformat(data["since"]),
            last_change=datetime.fromisoformat(last) if last else None,
            observed_at=observed_at,
            bound_seconds=int(data.get("bound_seconds", 0)),
            remaining=tuple(Remaining.from_json(r) for r in data.get("remaining", ())),
        )


@dataclass(frozen=True)
class Finding:
    """One cause at work in the namespace, proven by evidence, naming the objects that hold it."""

    cause: Cause
    blocking: bool
    summary: str
    objects: tuple[ObjectRef, ...] = ()
    evidence: tuple[str, ...] = ()
    remedies: tuple[Remedy, ...] = ()
    # a finding about a finalizer: whether the controller that removes it works
    controller: Controller | None = None
    # a finding about objects a live or unknown controller keeps: how long they have stood still
    progress: Progress | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cause": self.cause.value,
            "blocking": self.blocking,
            "summary": self.summary,
            "objects": [o.to_json() for o in self.objects],
            "evidence": list(self.evidence),
            "remedies": [r.to_json() for r in self.remedies],
        }
        if self.controller is not None:
            out["controller"] = self.controller.to_json()
        if self.progress is not None:
            out["progress"] = self.progress.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        controller = data.get("controller")
        progress = data.get("progress")
        return cls(
            cause=Cause(data["cause"]),
            blocking=bool(data["blocking"]),
            summary=data["summary"],
            objects=tuple(ObjectRef.from_json(o) for o in data.get("objects", ())),
            evidence=tuple(data.get("evidence", ())),
            remedies=tuple(Remedy.from_json(r) for r in data.get("remedies", ())),
            controller=Controller.from_json(controller) if isinstance(controller, dict) else None,
            progress=_progress(progress),
        )


def _progress(data: Any) -> Progress | None:
    """A report's progress read back: the time it was observed is when it had stood still for its
    `still_seconds` (the report's observed_at, to the second)."""
    if not isinstance(data, dict):
        return None
    since = datetime.fromisoformat(data["since"])
    last = datetime.fromisoformat(data["last_change"]) if data.get("last_change") else None
    still_since = max(since, last) if last is not None else since
    return Progress.from_json(data, still_since + timedelta(seconds=int(data.get("still_seconds", 0))))


@dataclass(frozen=True)
class Gap:
    """Evidence that could not be collected, and why. Any gap makes a report incomplete."""

    what: str  # e.g. "list kialis.kiali.io/v1alpha1 in istio-system"
    # forbidden | timeout | unavailable | error; in a prediction also unknown (the evidence does not tell)
    reason: str
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"what": self.what, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Gap:
        return cls(what=data["what"], reason=data["reason"], detail=data.get("detail", ""))

    def __str__(self) -> str:
        return f"{self.what}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Prediction:
    """For an Active namespace: whether deleting it now would get stuck, and why (contract §2).

    Its findings are the predicted reasons, each with its evidence and the remedies a person applies
    before the delete (none files a request: nothing is being deleted yet); a blocking one would hold
    the namespace. Its gaps are what could not be collected and what the evidence cannot tell (a
    finalizer's controller whose state is unknown): with any gap, "nothing would hold it" cannot be said.
    """

    findings: tuple[Finding, ...] = ()
    gaps: tuple[Gap, ...] = ()

    @property
    def would_block(self) -> bool:
        return any(f.blocking for f in self.findings)

    @property
    def complete(self) -> bool:
        return not self.gaps

    @property
    def cause(self) -> Cause | None:
        """The cause of the first predicted reason that would block (they are most-blocking first)."""
        return next((f.cause for f in self.findings if f.blocking), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "would_block": self.would_block,
            "complete": self.complete,
            "gaps": [g.to_json() for g in self.gaps],
            "findings": [f.to_json() for f in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prediction:
        return cls(
            findings=tuple(Finding.from_json(f) for f in data.get("findings", ())),
            gaps=tuple(Gap.from_json(g) for g in data.get("gaps", ())),
        )


@dataclass(frozen=True)
class Diagnosis:
    """The report of contract §2."""

    cluster: ClusterName
    namespace: str
    observed_at: datetime
    state: NamespaceState
    terminating_for_seconds: int | None
    complete: bool
    gaps: tuple[Gap, ...] = ()
    findings: tuple[Finding, ...] = field(default=())
    namespace_uid: str | None = None
    deletion_timestamp: datetime | None = None
    # an Active namespace whose snapshot was collected for it: would deleting it now get stuck?
    prediction: Prediction | None = None
    # with a database, for a terminating namespace: the earlier incidents of the same cluster, cause and
    # blocking object family (issue 39 §3; None: no database, the key is absent), and the recurrence line
    seen_before: tuple[SeenBefore, ...] | None = None
    recurrence: Recurrence | None = None

    @property
    def cause(self) -> Cause | None:
        """The root cause: the cause of the first blocking finding (findings are most-blocking first)."""
        blocking = [f for f in self.findings if f.blocking]
        if blocking:
            return blocking[0].cause
        return self.findings[0].cause if self.findings else None

    @property
    def first_remedy(self) -> Remedy | None:
        for finding in self.findings:
            if finding.remedies:
                return finding.remedies[0]
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": REPORT_SCHEMA,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "namespace_uid": self.namespace_uid,
            "observed_at": _iso(self.observed_at),
            "deletion_timestamp": _iso(self.deletion_timestamp) if self.deletion_timestamp else None,
            "state": self.state.value,
            "terminating_for_seconds": self.terminating_for_seconds,
            "cause": self.cause.value if self.cause else None,
            "complete": self.complete,
            "gaps": [g.to_json() for g in self.gaps],
            "findings": [f.to_json() for f in self.findings],
        }
        if self.prediction is not None:  # an addition to the schema: only Active namespaces have it
            out["prediction"] = self.prediction.to_json()
        if self.seen_before is not None:
            out["seen_before"] = [s.to_json() for s in self.seen_before]
        if self.recurrence is not None:
            out["recurrence"] = self.recurrence.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnosis:
        if data.get("schema") != REPORT_SCHEMA:
            raise ValueError(f"not a {REPORT_SCHEMA} report: schema is {data.get('schema')!r}")
        deletion = data.get("deletion_timestamp")
        prediction = data.get("prediction")
        return cls(
            cluster=data["cluster"],
            namespace=data["namespace"],
            namespace_uid=data.get("namespace_uid"),
            observed_at=datetime.fromisoformat(data["observed_at"]),
            deletion_timestamp=datetime.fromisoformat(deletion) if deletion else None,
            state=NamespaceState(data["state"]),
            terminating_for_seconds=data.get("terminating_for_seconds"),
            complete=bool(data["complete"]),
            gaps=tuple(Gap.from_json(g) for g in data.get("gaps", ())),
            findings=tuple(Finding.from_json(f) for f in data.get("findings", ())),
            prediction=Prediction.from_json(prediction) if isinstance(prediction, dict) else None,
            seen_before=_seen(data.get("seen_before")),
            recurrence=Recurrence.from_json(data["recurrence"]) if isinstance(data.get("recurrence"), dict) else None,
        )


def _seen(data: Any) -> tuple[SeenBefore, ...] | None:
    if not isinstance(data, list):
        return None
    return tuple(SeenBefore.from_json(s) for s in data if isinstance(s, dict))


@dataclass(frozen=True)
class Summary:
    """What the use cases read of a diagnosis to record it and to follow its incident (its state, cause,
    UID, times and headline), small enough to cross between processes without the report."""

    cluster: ClusterName
    namespace: str
    observed_at: datetime
    state: NamespaceState
    complete: bool
    cause: Cause | None = None
    namespace_uid: str | None = None
    deletion_timestamp: datetime | None = None
    # the first blocking finding's summary ("" when nothing blocks)
    headline: str = ""
    # the blocking object family of the leading blocking finding (`bot.diagnosis.family`), None: none
    family: str | None = None

    @classmethod
    def of(cls, diagnosis: Diagnosis, *, family: str | None = None) -> Summary:
        return cls(
            cluster=diagnosis.cluster,
            namespace=diagnosis.namespace,
            observed_at=diagnosis.observed_at,
            state=diagnosis.state,
            complete=diagnosis.complete,
            cause=diagnosis.cause,
            namespace_uid=diagnosis.namespace_uid,
            deletion_timestamp=diagnosis.deletion_timestamp,
            headline=next((f.summary for f in diagnosis.findings if f.blocking), ""),
            family=family,
        )


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
