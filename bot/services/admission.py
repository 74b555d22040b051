"""The namespace-delete admission review (issue 38): an AdmissionReview v1 in, the answer out.

The API server calls a validating webhook before it persists a namespace DELETE; the answer may carry
warnings, which kubectl prints (`Warning: ...`). The review's namespace is checked with the engine
`nsstuck precheck` uses (`diagnose_namespace`, whose prediction says what deleting an Active namespace
would meet), within a time budget:

- only a DELETE of `namespaces` is checked; anything else is allowed without a word;
- warn (the default): `allowed: true`, with one warning per predicted reason and per GitOps owner that
  would re-create what the delete removes (at most three, each under 120 characters, in the order of
  `warnings_of`: a reason is the cause, the blocking object, "see `nsstuck precheck NS`"; an owner is the
  Application, Kustomization or HelmRelease to delete or suspend instead), none when nothing would hold it,
  and one "nsstuck could not finish checking" warning when the evidence is incomplete (naming the first
  part that could not be read), the cluster did not answer, or the budget ran out ("... within N s": the
  answer is given at the budget, the check left to end on its own deadline);
- deny (chosen, never the default): a prediction that is certain (complete evidence and a blocking
  reason, the precheck's exit 4) is refused, 403, the reason in the message, unless the namespace is
  annotated `nsstuck.io/delete-anyway: "true"`; each denial and each let-through of a certain prediction
  is one structured log line (who, which namespace, the prediction);
- a dry-run review gets the same answer as the real one.

Nothing here writes to the cluster: the check only reads, as `precheck` does.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.diagnosis.gitops import Recreating, recreating
from bot.domain.findings import Diagnosis, Finding, Gap, NamespaceState, Prediction
from bot.domain.refs import IMMORTAL_NAMESPACES, NAMESPACE_NAME, ObjectRef
from bot.errors import ClusterUnreachableError, NsstuckError
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget, ConnectionCache
from bot.services.diagnosing import diagnose_namespace

log = logging.getLogger(__name__)

API_VERSION = "admission.k8s.io/v1"
MODES = ("warn", "deny")
Mode = Literal["warn", "deny"]
DEFAULT_BUDGET = 3.0
MAX_BUDGET = 28.0  # the API server allows a webhook 30 s at most
MAX_WARNINGS = 3
MAX_WARNING = 119  # characters: "under 120" (the API server cuts at 256 past 4 KiB in total)
DELETE_ANYWAY = "nsstuck.io/delete-anyway"
# what the engine may take of the budget for the collection; the rest is for the rules and the answer
COLLECT_SHARE = 0.8
# what the answer keeps of the budget for itself: it is given this long before the budget (counted from the
# request's arrival) runs out, for writing it and for the threads of the checks, which share one interpreter
# lock with it, to let it run (on a loaded machine the answer came up to 0.8 s past a budget counted from
# the check's submission: docs/performance.md, "Admission webhook")
ANSWER_MARGIN = 0.25
# NamespaceLifecycle admission refuses to delete these before any webhook matters


class BadReview(ValueError):
    """A request that is not an AdmissionReview v1 this endpoint can answer (a 400, one line)."""


@dataclass(frozen=True)
class Review:
    """The parts of an AdmissionReview's request that the answer depends on."""

    uid: str
    operation: str
    resource: str
    group: str
    name: str
    dry_run: bool
    username: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    # the namespace's UID as the API server has it (`oldObject.metadata.uid`): which namespace was deleted
    namespace_uid: str = ""

    @property
    def namespace_delete(self) -> bool:
        return self.operation == "DELETE" and self.group == "" and self.resource == "namespaces"


def parse_review(body: bytes) -> Review:
    """The review of a request body; raises BadReview saying in one line what is wrong."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadReview("the body is not JSON") from None
    if not isinstance(document, dict) or document.get("kind") != "AdmissionReview":
        raise BadReview("the body is not an AdmissionReview")
    if document.get("apiVersion") != API_VERSION:
        raise BadReview(f"only {API_VERSION} AdmissionReviews are answered (admissionReviewVersions: [v1])")
    request = document.get("request")
    if not isinstance(request, dict):
        raise BadReview("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > 128:
        raise BadReview("the AdmissionReview's request has no uid")
    resource = _mapping(request.get("resource"))
    user = _mapping(request.get("userInfo"))
    metadata = _mapping(_mapping(request.get("oldObject")).get("metadata"))
    annotations = _mapping(metadata.get("annotations"))
    name = request.get("name") or metadata.get("name") or ""
    return Review(
        uid=uid,
        operation=_text(request.get("operation")),
        resource=_text(resource.get("resource")),
        group=_text(resource.get("group")),
        name=_text(name),
        dry_run=request.get("dryRun") is True,
        username=_text(user.get("username"))[:256],
        annotations={str(k): v for k, v in annotations.items() if isinstance(v, str)},
        namespace_uid=_text(metadata.get("uid"))[:128],
    )


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Answer:
    """The review's response: allowed or refused (403 with `message`), and the warnings."""

    uid: str
    allowed: bool = True
    warnings: tuple[str, ...] = ()
    message: str = ""

    def to_review(self) -> dict[str, Any]:
        response: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if self.warnings:
            response["warnings"] = list(self.warnings)
        if not self.allowed:
            response["status"] = {"code": 403, "reason": "Forbidden", "message": self.message}
        return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


# (the review, the certain prediction, "denied" or "let-through"): told of each decision that is logged,
# after the answer is made (`nsstuck serve`: the audit entry, and the channel told of a delete)
Heard = Callable[[Review, Prediction, str], None]

# the one warning of an answer whose check failed before it could finish (each under 120 characters)
CHECK_UNREACHABLE = "nsstuck could not check: the cluster did not answer, or refused its credentials"
CHECK_FAILED = "nsstuck could not check: the check failed (its log says why)"

# (namespace, budget in seconds) -> the diagnosis of the Active namespace, within about that budget
Check = Callable[[str, float], Diagnosis]


def cluster_check(target: ClusterTarget, connections: ConnectionCache | None = None) -> Check:
    """The check `precheck` makes, on one cluster, with the collection bounded by most of the budget."""

    def check(namespace: str, budget: float) -> Diagnosis:
        deadline = max(0.2, budget * COLLECT_SHARE)
        options = CollectOptions(deadline=deadline, call_timeout=deadline)
        return diagnose_namespace(target, namespace, options=options, connections=connections).diagnosis

    return check


class Reviewer:
    """Answers namespace-delete reviews for one cluster; the checks run in a pool of their own, so that an
    answer is given at the budget whether or not its check has ended (that check ends on its deadline)."""

    def __init__(
        self,
        check: Check,
        *,
        budget: float = DEFAULT_BUDGET,
        mode: Mode = "warn",
        checks: int = 8,
        heard: Heard | None = None,
    ) -> None:
        """`heard`, when given, is told of each decision `_record` logs; it must not block (it hands the
        work to a thread of its own): the answer waits for it."""
        if not 0 < budget <= MAX_BUDGET:
            raise ValueError(f"the budget must be more than 0 and at most {MAX_BUDGET:g} seconds")
        if mode not in MODES:
            raise ValueError(f"the mode is one of {', '.join(MODES)}")
        self.check = check
        self.budget = budget
        self.mode = mode
        self.heard = heard
        self._pool = ThreadPoolExecutor(max_workers=checks, thread_name_prefix="admission-check")

    def close(self, *, wait: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    def answer(self, review: Review, *, arrived: float | None = None) -> Answer:
        """The answer, made by the budget counted from `arrived` (the request's arrival, `time.monotonic()`;
        now when not given), less the margin the answer keeps for itself (`ANSWER_MARGIN`)."""
        started = time.monotonic()
        if not review.namespace_delete or review.name in IMMORTAL_NAMESPACES:
            return Answer(review.uid)
        if not NAMESPACE_NAME.match(review.name):
            return Answer(review.uid)  # the API server never sends one; nothing of it can be checked
        deadline = (started if arrived is None else min(arrived, started)) + self.budget - self.margin
        diagnosis = self._checked(review.name, deadline)
        if isinstance(diagnosis, str):  # not finished in time, or failed: said in one warning
            return Answer(review.uid, warnings=(diagnosis,))
        prediction = _prediction(diagnosis)
        if prediction is None:  # not Active (gone, or terminating already): nothing to say
            return Answer(review.uid)
        warnings = warnings_of(review.name, prediction, self.budget)
        certain = prediction.would_block and prediction.complete
        if certain and self.mode == "deny":
            anyway = review.annotations.get(DELETE_ANYWAY) == "true"
            self._record(review, prediction, "let-through" if anyway else "denied", time.monotonic() - started)
            if not anyway:
                return Answer(review.uid, allowed=False, warnings=warnings, message=_denial(review.name, prediction))
        elif certain:
            self._record(review, prediction, "let-through", time.monotonic() - started)
        return Answer(review.uid, warnings=warnings)

    @property
    def margin(self) -> float:
        return min(ANSWER_MARGIN, self.budget / 4)

    def _checked(self, namespace: str, deadline: float) -> Diagnosis | str:
        """The diagnosis made by `deadline` (`time.monotonic()`), or the warning that says why there is none:
        not finished in time (`within N s`), the cluster not answering, or the check failing otherwise (never
        the error's own words, which may name a file or a server). The check is given what is left of the
        budget then."""
        left = max(0.0, deadline - time.monotonic())
        future: Future[Diagnosis] = self._pool.submit(self.check, namespace, left)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.cancel()
            log.warning("admission: the check of %s did not finish within %g s", namespace, self.budget)
            return unfinished_warning(self.budget)
        except ClusterUnreachableError as e:  # no answer, or 401/403 to our credentials
            log.warning("admission: the check of %s failed: %s", namespace, e)
            return CHECK_UNREACHABLE
        except NsstuckError as e:  # a kubeconfig that no longer loads, an exec plugin that fails
            log.warning("admission: the check of %s failed: %s", namespace, e)
            return CHECK_FAILED
        except Exception:  # the answer is given all the same: a check must never refuse a delete by failing
            log.exception("admission: the check of %s failed", namespace)
            return CHECK_FAILED

    def _record(self, review: Review, prediction: Prediction, decision: str, seconds: float) -> None:
        """One structured line (JSON) per denial and per let-through of a certain prediction."""
        finding = next(f for f in prediction.findings if f.blocking)
        line = {
            "event": "nsstuck.admission",
            "decision": decision,
            "mode": self.mode,
            "user": review.username,
            "namespace": review.name,
            "dry_run": review.dry_run,
            "prediction": {
                "would_block": prediction.would_block,
                "complete": prediction.complete,
                "cause": finding.cause.value,
                "objects": [o.display for o in finding.objects[:MAX_WARNINGS]],
            },
            "seconds": round(seconds, 3),
        }
        log.info("%s", json.dumps(line, sort_keys=True, ensure_ascii=True))
        if self.heard is not None:
            try:
                self.heard(review, prediction, decision)
            except Exception:  # what follows a decision must never change the answer
                log.exception("admission: handing on the decision on %s failed", review.name)


def _prediction(diagnosis: Diagnosis | None) -> Prediction | None:
    if diagnosis is None or diagnosis.state is not NamespaceState.ACTIVE:
        return None
    return diagnosis.prediction


def warnings_of(namespace: str, prediction: Prediction, budget: float) -> tuple[str, ...]:
    """At most three warnings, in this order: the first GitOps owner that would re-create what the delete
    removes (deleting is then undone: the owner is what to delete or suspend), the first reason that would
    hold the namespace, the other owners, the other reasons; and, when the evidence is incomplete, the
    "could not finish checking" warning, which always keeps its place (the last)."""
    owners = [w for w in (recreating(f) for f in prediction.findings) if w is not None]
    reasons = [warning(namespace, f) for f in prediction.findings if f.blocking]
    said = [owner_warning(namespace, w) for w in owners]
    ranked = [*said[:1], *reasons[:1], *said[1:], *reasons[1:]]
    room = MAX_WARNINGS if prediction.complete else MAX_WARNINGS - 1
    warnings = list(dict.fromkeys(ranked))[:room]
    if not prediction.complete:
        warnings.append(unfinished_warning(budget, prediction.gaps))
    return tuple(warnings)


def owner_warning(namespace: str, owner: Recreating) -> str:
    """`nsstuck: Argo CD Application argocd/shop syncs ns shop (self-heal): delete or suspend it instead`,
    under 120 characters: with long names, the namespace's name goes first (`syncs it`), then how it syncs,
    then the tool's name, and last the owner's name is shortened."""
    kind, tool, how = owner.owner.kind, owner.tool, owner.how
    who = f"{owner.owner.namespace}/{owner.owner.name}" if owner.owner.namespace else owner.owner.name
    instead = ": delete or suspend it instead"
    shapes = (
        (f"nsstuck: {tool} {kind} ", f" syncs ns {namespace} ({how}){instead}"),
        (f"nsstuck: {tool} {kind} ", f" syncs it ({how}){instead}"),
        (f"nsstuck: {tool} {kind} ", f" syncs it{instead}"),
    )
    for head, tail in shapes:
        if len(head) + len(who) + len(tail) <= MAX_WARNING:
            return head + who + tail
    head, tail = f"nsstuck: {kind} ", f" syncs it{instead}"
    return head + who[: MAX_WARNING - len(head) - len(tail) - 3] + "..." + tail


def unfinished_warning(budget: float, gaps: tuple[Gap, ...] = ()) -> str:
    """`nsstuck could not finish checking within N s` when the budget ran out (no answer from the check, or a
    read not answered in time); otherwise the first part that could not be read, under 120 characters:
    `nsstuck could not finish checking: discovery of metrics.example.io/v1beta1 failed (unavailable)`."""
    timed_out = f"nsstuck could not finish checking within {budget:g} s"
    # a read not answered in time (our deadline, a call's timeout or the API server's 504) is the budget's case
    named = [g for g in gaps if g.reason != "timeout"]
    if not named:
        return timed_out
    more = f" (+{len(named) - 1} more)" if len(named) > 1 else ""
    head = "nsstuck could not finish checking: "
    said = _gap(named[0])
    room = MAX_WARNING - len(head) - len(more)
    if len(said) > room:
        said = said[: room - 3] + "..."
    return head + said + more


def _gap(gap: Gap) -> str:
    """A gap in a few words: `discovery of G/V failed (unavailable)`, `list pods in NS failed (forbidden)`,
    `could not tell whether webhook W (URL) answers`. Never the server's message (the detail)."""
    if gap.what.startswith("resources of ") and gap.detail.startswith("discovery failed"):
        return f"discovery of {gap.what.removeprefix('resources of ')} failed ({gap.reason})"
    if gap.reason == "unknown":
        return f"could not tell {gap.what}" if gap.what.startswith("whether ") else f"{gap.what}: unknown"
    return f"{gap.what} failed ({gap.reason})"


def warning(namespace: str, finding: Finding) -> str:
    """`nsstuck: orphaned_finalizer: configmap/leftover would hold it; see `nsstuck precheck NS``, under
    120 characters: the object's name is shortened first, then the words around it; with the longest names
    (a namespace of 63 characters and a long cause) the hint is `see `nsstuck precheck``."""
    see = f"see `nsstuck precheck {namespace}`"
    what = _short(finding.objects[0]) if finding.objects else "the namespace"
    more = f" (+{len(finding.objects) - 1})" if len(finding.objects) > 1 else ""
    cause = finding.cause.value
    shapes = (
        (f"nsstuck: {cause}: ", f"{more} would hold it; {see}", 12),
        (f"{cause}: ", f"{more}; {see}", 4),
        (f"{cause}: ", "; see `nsstuck precheck`", 4),
    )
    for head, tail, least in shapes:
        room = MAX_WARNING - len(head) - len(tail)
        if room >= min(least, len(what)):
            shown = what if len(what) <= room else what[: room - 3] + "..."
            return head + shown + tail
    return f"{cause}: see `nsstuck precheck`"[:MAX_WARNING]


def _short(ref: ObjectRef) -> str:
    """`kiali/kiali`, `apiservice/v1beta1.metrics.k8s.io`: kubectl's TYPE/NAME, the kind for the type."""
    return f"{ref.kind.lower()}/{ref.name}"


def _denial(namespace: str, prediction: Prediction) -> str:
    finding = next(f for f in prediction.findings if f.blocking)
    objects = ", ".join(_short(o) for o in finding.objects[:MAX_WARNINGS]) or "the namespace"
    return (
        f"nsstuck: deleting {namespace} now would get stuck: {finding.cause.value}: {objects}; "
        f"see `nsstuck precheck {namespace}`, or annotate the namespace {DELETE_ANYWAY}=true to delete it anyway"
    )
