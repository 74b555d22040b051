"""What `nsstuck serve` does after answering a namespace-delete review (issue 38 §3 and §4).

The answer is made by `bot.services.admission.Reviewer` within the webhook's budget; what follows a
certain prediction (complete evidence and a reason that would hold the namespace) is handed to a pool of
its own and done after, never inside that budget:

- every denial, and every let-through of a certain prediction, is an entry of the audit trail
  (`admission_denied`, `admission_allowed`): who (the review's `userInfo.username`), which namespace and
  cluster, the namespace's UID, the mode and the prediction;
- a review sent again (the same review UID: a retry, or a replica behind the same Service) writes no second
  entry: one entry per review; another review of the same namespace (another UID: a second delete) writes
  its own;
- a let-through is not yet a delete: another webhook may refuse it, and a retry may call us twice. So the
  namespace is looked at for a few seconds until it is the same namespace (the review's UID) with a
  `deletionTimestamp`. Then its incident is opened at once with what the admission check predicted (the
  findings of the prediction: the cause, the objects that would hold it, the remedies ranked for them,
  with their Request buttons; said in each finding's evidence to be the prediction made at the delete),
  over one look at the namespace as it now is (its UID, deletionTimestamp and snapshot), and its run
  recorded with the mark "posted unasked" in one transaction (a conditional update: one poster per
  namespace UID, whatever the replicas, retries or repeated deletes); the outbox posts it to the
  cluster's channel (`admission.channel`, else its first channel): the verdict, one line that says who
  deleted it and what will hold it, and the report in the thread; a Slack outage or a restart loses
  nothing, the outbox posts it later. The incident is then followed, digested and watched as any other:
  the follow-up's diagnoses keep it up to date (the watch does not post it again: it is marked posted).

A dry run (`dryRun: true`) gets the same answer and none of this: no audit entry, no incident, no post.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from urllib.parse import quote

from bot.domain.findings import Action, Finding, NamespaceState, Prediction, Remedy
from bot.domain.refs import ClusterName, KubeObject, ObjectRef, meta
from bot.errors import NsstuckError
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import CallError, Transport
from bot.logs import carrying, log_context
from bot.services.admission import Review
from bot.services.diagnosing import Diagnoser, DiagnosisResult
from bot.services.outbox import Outbox
from bot.services.recording import RECURRENCE_AFTER, record_unasked
from bot.store.database import Database

log = logging.getLogger(__name__)

# the runs recorded for a delete seen by the webhook: requested_by is this and the deleting user (the
# verdict says "deleted by USER" instead of "asked by"); the column holds 64 characters
DELETED_BY = "k8s-delete:"
REQUESTED_BY_LIMIT = 64
DENIED = "admission_denied"
ALLOWED = "admission_allowed"
# the audit trail's actor column holds 64 characters; the whole username goes in the details
ACTOR_LIMIT = 64
# how far back a review sent again is looked for among the entries (a retry comes within seconds)
REPEATS_WITHIN = timedelta(hours=1)
# what a prediction's remedy says before the delete (bot.diagnosis.predicting._before_the_delete)
BEFORE = "Before the delete: "


class _Repeated(Exception):
    """The review's entry was written already (a review sent again): this one is rolled back."""


# (cluster, namespace name) -> the namespace as the cluster has it now, None when there is none
Probe = Callable[[ClusterName, str], KubeObject | None]


def deleted_by(requested_by: str) -> str | None:
    """The deleting user of a run recorded for a delete the webhook saw, None for any other run."""
    return requested_by.removeprefix(DELETED_BY) if requested_by.startswith(DELETED_BY) else None


def namespace_probe(clusters: ClusterRegistry, *, timeout: float = 5.0) -> Probe:
    """One GET of a namespace, on the client the registry keeps for the cluster."""

    def probe(cluster: ClusterName, name: str) -> KubeObject | None:
        with clusters.lease(cluster) as connection:
            try:
                found = Transport(connection, call_timeout=timeout).get(
                    f"/api/v1/namespaces/{quote(name)}", timeout=timeout, kind="Namespace"
                )
            except CallError as e:
                if e.status == 404:
                    return None
                raise
        return found if isinstance(found, dict) else None

    return probe


class AdmissionEvents:
    """The decisions of one cluster's reviewer, followed up off the request path (`Reviewer(heard=...)`)."""

    def __init__(
        self,
        db: Database,
        *,
        cluster: ClusterName,
        mode: str,
        channel: str | None,
        probe: Probe,
        diagnoser: Diagnoser,
        outbox: Outbox,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        look_seconds: float = 5.0,
        interval: float = 0.2,
        threads: int = 2,
        recurrence_after: int = RECURRENCE_AFTER,
    ) -> None:
        self.db = db
        self.recurrence_after = recurrence_after
        self.cluster = cluster
        self.mode = mode
        self.channel = channel
        self.probe = probe
        self.diagnoser = diagnoser
        self.outbox = outbox
        self.wall = wall
        self.look_seconds = look_seconds
        self.interval = interval
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="admission-after")
        self._lock = threading.Lock()
        self._telling: set[str] = set()  # namespace UIDs being looked at in this process
        self._closed = threading.Event()

    def heard(self, review: Review, prediction: Prediction, decision: str) -> None:
        """Hand a decision on (the answer does not wait); a dry run's is not followed up at all."""
        if review.dry_run or self._closed.is_set():
            return
        try:
            self._pool.submit(carrying(partial(self._after, review, prediction, decision)))
        except RuntimeError:  # shut down meanwhile: the process is stopping
            log.info("admission: stopping; the decision on %s is not followed up", review.name)

    def close(self) -> None:
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _after(self, review: Review, prediction: Prediction, decision: str) -> None:
        with log_context(cluster=self.cluster, namespace=review.name):
            try:
                self.audit(review, prediction, decision)
            except Exception:  # the database is down: said, and the delete is still told below
                log.exception("admission: the audit entry of the %s delete of %s failed", decision, review.name)
            if decision == "let-through":
                self.tell(review, prediction)

    def audit(self, review: Review, prediction: Prediction, decision: str) -> bool:
        """The decision's entry, one per review: False (nothing written) when the review's UID has one already."""
        finding = next(f for f in prediction.findings if f.blocking)
        event = DENIED if decision == "denied" else ALLOWED
        try:
            with self.db.unit_of_work() as uow:
                appended = uow.audit.append(
                    event,
                    actor=(review.username or "unknown")[:ACTOR_LIMIT],
                    cluster=self.cluster,
                    namespace=review.name,
                    objects=[{"kind": o.kind, "name": o.name, "namespace": o.namespace} for o in finding.objects[:3]],
                    details={
                        "user": review.username,
                        "namespace_uid": review.namespace_uid,
                        "review_uid": review.uid,
                        "mode": self.mode,
                        "anyway": decision == "let-through" and self.mode == "deny",
                        "prediction": {
                            "would_block": prediction.would_block,
                            "complete": prediction.complete,
                            "cause": finding.cause.value,
                            "summary": finding.summary,
                        },
                    },
                )
                # looked for after the append, which holds the chain's head (a row lock, SQLite's write
                # lock) until the commit: of two replicas given the same review, the second sees the first's
                for entry in uow.audit.records(event=event, since=self.wall() - REPEATS_WITHIN):
                    if entry.seq < appended.seq and entry.details.get("review_uid") == review.uid:
                        raise _Repeated
        except _Repeated:
            log.info("admission: the review %s of %s was heard before: no second audit entry", review.uid, review.name)
            return False
        return True

    def tell(self, review: Review, prediction: Prediction) -> bool:
        """Once the namespace of the review's UID is being deleted: its incident opened with the prediction and
        posted to the channel, once per UID; False when nothing was posted (not deleted, posted already, no
        channel)."""
        uid = review.namespace_uid
        if self.channel is None or not uid:
            return False
        with self._lock:
            if uid in self._telling:
                return False
            self._telling.add(uid)
        try:
            with self.db.unit_of_work() as uow:
                if uid in uow.incidents.not_for_the_watch(self.cluster, [uid]):
                    log.info("admission: the delete of %s was told already: not again", review.name)
                    return False  # told already (this replica or another), or resolved
            if not self._deleting(review.name, uid):
                log.info("admission: %s was let through but is not being deleted: nothing to tell", review.name)
                return False
            result = self._at_the_delete(review.name, uid, prediction)
            if result is None:
                return False
            by = (DELETED_BY + (review.username or "unknown"))[:REQUESTED_BY_LIMIT]
            recorded = record_unasked(
                self.db,
                result,
                requested_by=by,
                post_channel=self.channel,
                at=self.wall(),
                recurrence_after=self.recurrence_after,
            )
            if recorded is None:
                return False  # another replica, a retried review, or the watch posted it first
            log.info(
                "admission: %s deleted by %s will get stuck: telling %s", review.name, review.username, self.channel
            )
            self.outbox.deliver(recorded.run_id)
            return True
        finally:
            with self._lock:
                self._telling.discard(uid)

    def _at_the_delete(self, name: str, uid: str, prediction: Prediction) -> DiagnosisResult | None:
        """The deleted namespace as it is now (one look: its UID, deletionTimestamp and snapshot), with the
        findings the admission check predicted in place of the engine's: right after a delete the engine
        sees content still being deleted, while the prediction says what will hold it. None: it is gone,
        made again, or the cluster stopped answering."""
        try:
            result = self.diagnoser(self.cluster, name)
        except NsstuckError as e:
            log.warning("admission: looking at %s after its delete failed: %s", name, e)
            return None
        summary = result.summary
        if summary.state is not NamespaceState.TERMINATING or summary.namespace_uid != uid:
            return None
        at = summary.deletion_timestamp or summary.observed_at
        diagnosis = replace(
            result.diagnosis,
            findings=tuple(after_the_delete(f, at) for f in prediction.findings),
            complete=prediction.complete,
            gaps=prediction.gaps,
        )
        return DiagnosisResult(diagnosis, result.snapshot, result.duration_ms)

    def _deleting(self, name: str, uid: str) -> bool:
        """Whether the namespace of that UID gets a deletionTimestamp within `look_seconds`."""
        ends = time.monotonic() + self.look_seconds
        while not self._closed.is_set():
            try:
                found = self.probe(self.cluster, name)
            except NsstuckError as e:
                log.info("admission: looking at %s failed: %s", name, e)
            except CallError as e:
                log.info("admission: looking at %s failed: %s", name, e.message)
            else:
                if found is None:
                    return False  # gone already: nothing holds it
                m = meta(found)
                if m.get("uid") != uid:
                    return False  # gone and made again: not the namespace whose delete was reviewed
                if m.get("deletionTimestamp"):
                    return True
            if time.monotonic() >= ends:
                return False
            self._closed.wait(self.interval)
        return False


def after_the_delete(finding: Finding, at: datetime) -> Finding:
    """A predicted finding as the incident of the deleted namespace carries it: said to be the prediction made at
    the delete, and its remedies as they apply now that the namespace is being deleted (a `prepare` step is
    again the change it stands for, which a Request button files; the live cluster is checked again before
    anything is done, as for every request)."""
    said = (
        f"predicted by nsstuck's admission webhook when the namespace was deleted ({at:%Y-%m-%d %H:%M:%S} UTC), "
        "from the namespace as it was just before the delete"
    )
    return replace(
        finding,
        evidence=(said, *finding.evidence),
        remedies=tuple(_now_deleting(r) for r in finding.remedies),
    )


def _now_deleting(remedy: Remedy) -> Remedy:
    if remedy.action is not Action.PREPARE or remedy.prepares is None:
        return remedy
    return replace(
        remedy,
        action=remedy.prepares,
        prepares=None,
        description=remedy.description.removeprefix(BEFORE),
        # the objects as the prediction saw them, by UID: the delete itself changes their version
        targets=tuple(_unversioned(t) for t in remedy.targets),
    )


def _unversioned(ref: ObjectRef) -> ObjectRef:
    return replace(ref, resource_version=None)
