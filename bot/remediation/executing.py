"""Making an approved change: re-check, back up, dry run, apply, and afterwards follow the namespace.

The re-check is of the targets (gone, re-created, changed, what the kind changes already gone) and of
the cause: the namespace is collected and diagnosed again, and the fresh diagnosis must still propose
the remedy for every target (each kind says what it rests on, and in its own words what came back
when it no longer does: "metrics-server is serving again: the APIService was left alone"). When it does
not, the request ends `stale` with that reason and nothing is written.

Every step is recorded before the next one starts, and the executor is fenced: before each step that
may change the cluster (the backup, the dry run, `execution_started`, every write) it renews its hold
on the request with a conditional update (still `executing`, still its execution id, its deadline
not passed; the deadline moves on by the execution timeout) and stops when that fails. Every cluster
call's timeout is the smaller of the call limit and the time left to the deadline, computed for that
call, so a write sent before the deadline has its answer (or has timed out) by then.

An executor that dies or goes silent leaves its request in `executing` past its deadline. `reconcile`
takes it over only once the deadline is `SETTLE_AFTER` behind (the grace, and the longest call
timeout, so that a write sent in time has landed or failed on the server), reads the objects and
records what it found, with a move that is conditional on the deadline having passed too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.domain.changes import CallResult, Operation, Verdict
from bot.domain.refs import ClusterName, KubeObject, ObjectRef
from bot.domain.statuses import RequestStatus
from bot.domain.values import holds_values
from bot.errors import NsstuckError
from bot.kube.connecting import Impersonation
from bot.kube.patching import Patcher
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import Transport
from bot.remediation import planning
from bot.remediation.identity import NoIdentityError
from bot.remediation.rechecking import RECHECK_THREADS, CauseCheck, CauseChecked, check_cause
from bot.remediation.requests import RequestView, audit, load, view_of
from bot.store.audit import SYSTEM_ACTOR, Appended
from bot.store.database import Database, UnitOfWork

log = logging.getLogger(__name__)

# the longest one cluster call may take
MAX_CALL_TIMEOUT = 10.0
# the least a call is given, however little time is left (a call with none left would not be sent)
MIN_CALL_TIMEOUT = 0.5
# the longest the namespace is collected again for, right before acting
FRESH_EVIDENCE_DEADLINE = 20.0
# an executor past its deadline gets this much longer before its request is reconciled by others
RECONCILE_GRACE = timedelta(seconds=5)
# ... and the objects are read only once the longest call has had time to land or fail too
SETTLE_AFTER = max(RECONCILE_GRACE, timedelta(seconds=MAX_CALL_TIMEOUT))


@dataclass(frozen=True)
class Outcome:
    """What became of a request (its status, reason and verification), to be said in its thread, with
    the audit entry that recorded it (written in the same transaction as the request's move)."""

    view: RequestView
    entry: Appended


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Hold:
    """An executor's hold on its request: the deadline as this executor last renewed it."""

    def __init__(self, view: RequestView, execution_id: str, *, lease: timedelta, clock: Callable[[], datetime]):
        self.request_id = view.id
        self.execution_id = execution_id
        self.deadline = view.execution_deadline or clock()
        self.lease = lease
        self.clock = clock

    def renew(self, uow: UnitOfWork) -> bool:
        """In the caller's unit of work: still ours and in time? Then the deadline moves on."""
        now = self.clock()
        until = now + self.lease
        if not uow.requests.reclaim(self.request_id, self.execution_id, now=now, until=until):
            return False
        self.deadline = max(self.deadline, until)
        return True

    def time_left(self) -> float:
        return (self.deadline - self.clock()).total_seconds()

    def call_timeout(self) -> float:
        """For the call about to be sent: the call limit, or the time left if that is less."""
        return max(MIN_CALL_TIMEOUT, min(MAX_CALL_TIMEOUT, self.time_left()))


class _Fenced(Exception):
    """The hold could not be renewed: the request is no longer this executor's to change."""

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step


class Executor:
    def __init__(
        self,
        db: Database,
        *,
        clusters: ClusterRegistry,
        follow_for: timedelta,
        execution_timeout: timedelta = timedelta(seconds=120),
        clock: Callable[[], datetime] = utcnow,
        acting_as: Callable[[RequestView], Impersonation | None] = lambda view: None,
        not_granted: Callable[[RequestView], str | None] = lambda view: None,
        check_cause: Callable[[CauseCheck], CauseChecked] | None = None,
    ) -> None:
        self.db = db
        self.clusters = clusters
        self.follow_for = follow_for
        self.execution_timeout = execution_timeout
        self.clock = clock
        # who a request's reads and writes act as (act_as_approver: its last approver's identity);
        # raises NoIdentityError when that approver has none
        self.acting_as = acting_as
        # why nsstuck's own role on the cluster does not cover a request's targets (then nothing is sent)
        self.not_granted = not_granted
        # the re-check of the cause right before acting, elsewhere (a worker process); None: here
        self.check_cause = check_cause

    @contextmanager
    def _patcher(
        self, cluster: ClusterName, hold: _Hold | None, identity: Impersonation | None = None
    ) -> Iterator[Patcher]:
        """A client of its own, acting as `identity` when given; each call's timeout from the hold when
        there is one."""
        budget = hold.call_timeout if hold is not None else (lambda: MAX_CALL_TIMEOUT)
        connection = self.clusters.connect(
            cluster, pool_size=RECHECK_THREADS, credential_timeout=budget(), impersonate=identity
        )
        try:
            yield Patcher(Transport(connection, call_timeout=MAX_CALL_TIMEOUT), timeout=budget)
        finally:
            connection.close()

    # -- executing ---------------------------------------------------------------------------

    def execute(self, request_id: int, execution_id: str) -> Outcome | None:
        """Run an approved request this caller holds (`execution_id`). None when it does not hold it,
        or stops holding it before the end (the reconciler then settles it, and says so)."""
        view = load(self.db, request_id)
        if view is None or view.status != RequestStatus.EXECUTING or view.execution_id != execution_id:
            return None
        hold = _Hold(view, execution_id, lease=self.execution_timeout, clock=self.clock)
        try:
            self._renew(hold, "re-check")
            try:
                identity = self.acting_as(view)
            except NoIdentityError as e:  # refused before anything is read or written
                return self._finish(view, execution_id, RequestStatus.FAILED, str(e), phase="identity")
            acting = _acting(identity)
            missing = self.not_granted(view)
            if missing:  # said in words, instead of the API server's 403 after the re-check's reads
                return self._finish(view, execution_id, RequestStatus.FAILED, missing, phase="permission", **acting)
            try:
                with self._patcher(view.cluster, hold, identity) as patcher:
                    return self._execute(view, hold, patcher, identity)
            except NsstuckError as e:  # cannot connect, or the cluster refused to show us the objects
                as_whom = f" as {identity.user}" if identity is not None else ""
                return self._finish(
                    view,
                    execution_id,
                    RequestStatus.FAILED,
                    f"could not re-check the cluster{as_whom}: {e}",
                    phase="recheck",
                    **acting,
                )
        except _Fenced as fenced:
            log.warning(
                "request %s: execution %s no longer holds it (settled elsewhere, or past its deadline); "
                "stopped before the %s",
                request_id,
                execution_id,
                fenced.step,
            )
            return None

    def _renew(self, hold: _Hold, step: str, uow: UnitOfWork | None = None) -> None:
        if uow is not None:
            if not hold.renew(uow):
                raise _Fenced(step)
            return
        with self.db.unit_of_work() as own:
            if not hold.renew(own):
                raise _Fenced(step)

    def _execute(
        self, view: RequestView, hold: _Hold, patcher: Patcher, identity: Impersonation | None
    ) -> Outcome | None:
        execution_id = hold.execution_id
        acting = _acting(identity)
        remedy = view.remedy
        live = [patcher.read(target) for target in remedy.targets]
        reasons = planning.stale_reasons(remedy, live, versions=False)
        recheck: dict[str, object] = {}
        if not reasons:
            # the targets are there as approved: does the cause the remedy rests on still hold?
            self._renew(hold, "re-check of the cause")
            seen = self._check_cause(view, hold, patcher, identity, [obj for obj in live if obj is not None])
            reasons, recheck, blocked = list(seen.reasons), seen.recheck, seen.blocked
            if blocked:
                # the cause holds, but a fail-closed webhook with a dead backend would reject the write
                return self._finish(
                    view, execution_id, RequestStatus.FAILED, blocked, phase="recheck", **recheck, **acting
                )
        if not reasons:
            reasons = planning.stale_reasons(remedy, live)
        if reasons:
            return self._finish(
                view, execution_id, RequestStatus.STALE, "; ".join(reasons), reasons=reasons, **recheck, **acting
            )
        checked = [obj for obj in live if obj is not None]
        with self.db.unit_of_work() as uow:
            self._renew(hold, "backup", uow)
            kept = [uow.backups.add(view.id, view.cluster, obj) for obj in checked]
            audit(
                uow,
                view,
                "backed_up",
                actor=view.last_approver,
                execution_id=execution_id,
                backups=[_backed_up(b.id, b.sha256, b_obj) for b, b_obj in zip(kept, checked, strict=True)],
                **acting,
            )
        operations = planning.operations(remedy, checked)
        self._renew(hold, "dry run")
        dry = [patcher.run(op, dry_run=True) for op in operations]
        refused = [(op, r) for op, r in zip(operations, dry, strict=True) if not r.ok]
        with self.db.unit_of_work() as uow:
            audit(
                uow,
                view,
                "dry_run",
                actor=view.last_approver,
                execution_id=execution_id,
                ok=not refused,
                results=[_result(op, r) for op, r in zip(operations, dry, strict=True)],
                **acting,
            )
        if refused:
            op, result = refused[0]
            return self._finish(
                view,
                execution_id,
                RequestStatus.FAILED,
                f"the dry run was refused: {_explain(op, result, identity)}",
                phase="dry_run",
                **acting,
            )
        with self.db.unit_of_work() as uow:
            self._renew(hold, "change", uow)
            audit(
                uow,
                view,
                "execution_started",
                actor=view.last_approver,
                execution_id=execution_id,
                operations=[{"summary": op.summary, "kubectl": op.kubectl} for op in operations],
                **acting,
            )
        results: list[CallResult] = []
        for op in operations:
            self._renew(hold, f"write ({op.summary})")
            result = patcher.run(op, dry_run=False)
            results.append(result)
            if not result.ok:
                break
        done = [_result(op, r) for op, r in zip(operations, results, strict=False)]
        failed = [(op, r) for op, r in zip(operations, results, strict=False) if not r.ok]
        if failed:
            op, result = failed[0]
            if result.verdict is Verdict.UNREACHABLE:
                # no answer: the change may have landed. Not a guess in the record: the reconciler reads
                # the object once the deadline and the longest call are behind, and says what it finds
                log.warning(
                    "request %s: no answer to %s; left for reconciliation from the cluster", view.id, op.summary
                )
                return None
            return self._finish(
                view,
                execution_id,
                RequestStatus.FAILED,
                _explain(op, result, identity),
                phase="apply",
                results=done,
                **acting,
            )
        return self._finish(
            view,
            execution_id,
            RequestStatus.APPLIED,
            "; ".join(op.summary for op in operations),
            results=done,
            **acting,
        )

    def _requested_from(self, view: RequestView) -> bytes | None:
        """The snapshot of the diagnosis the remedy was requested from, as the database keeps it, while
        it keeps it (decoded by the re-check, in a worker process of `nsstuck serve`)."""
        with self.db.unit_of_work() as uow:
            run = uow.diagnoses.get(view.diagnosis_id)
        return run.snapshot if run is not None else None

    def _check_cause(
        self,
        view: RequestView,
        hold: _Hold,
        patcher: Patcher,
        identity: Impersonation | None,
        present: list[KubeObject],
    ) -> CauseChecked:
        """The namespace collected and diagnosed again, within the time the hold leaves: does the cause
        the remedy rests on still hold? In a worker process when one is given (`check_cause`), here
        with the executor's own connection otherwise."""
        check = CauseCheck(
            target=self.clusters.target(view.cluster),
            namespace=view.namespace,
            remedy=view.remedy,
            present=tuple(present),
            then=self._requested_from(view),
            deadline=max(MIN_CALL_TIMEOUT, min(FRESH_EVIDENCE_DEADLINE, hold.time_left())),
            call_timeout=hold.call_timeout(),
            impersonate=identity,
            request_id=view.id,
        )
        if self.check_cause is not None:
            return self.check_cause(check)
        return check_cause(check, patcher.transport)

    def _finish(
        self,
        view: RequestView,
        execution_id: str,
        status: RequestStatus,
        reason: str,
        **details: object,
    ) -> Outcome | None:
        """Record the executor's own outcome, once: None when the request was settled elsewhere (the
        reconciler told the thread then)."""
        now = self.clock()
        follow_until = now + self.follow_for if status == RequestStatus.APPLIED else None
        with self.db.unit_of_work() as uow:
            moved = uow.requests.move(
                view.id,
                from_status=RequestStatus.EXECUTING,
                to_status=status,
                held_by=execution_id,
                finished_at=now,
                status_reason=reason[:1000],
                follow_until=follow_until,
            )
            request = uow.requests.get(view.id)
            assert request is not None
            after = view_of(uow, request)
            entry = None
            if moved:
                entry = audit(
                    uow,
                    after,
                    status,
                    actor=view.last_approver,
                    execution_id=execution_id,
                    reason=reason,
                    **details,
                )
        if entry is None:
            log.warning("request %s was settled by someone else while it ran (now %s)", view.id, after.status)
            return None
        return Outcome(after, entry)

    # -- an executor gone silent ---------------------------------------------------------------

    def reconcile(self) -> list[Outcome]:
        """Settle executions whose executor went silent past its deadline, from the live cluster."""
        with self.db.unit_of_work() as uow:
            overdue = uow.requests.overdue_executions(self.clock() - SETTLE_AFTER)
        outcomes = []
        for request_id in overdue:
            view = load(self.db, request_id)
            if view is None or view.status != RequestStatus.EXECUTING or view.execution_id is None:
                continue
            try:
                outcome = self._reconcile(view, view.execution_id)
            except NsstuckError as e:
                log.warning("cannot reconcile request %s yet: %s", request_id, e)
                continue
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _reconcile(self, view: RequestView, execution_id: str) -> Outcome | None:
        with self.db.unit_of_work() as uow:
            entries = uow.audit.for_request(view.id)
            backups = uow.backups.for_request(view.id)
            before = [b.object for b in backups]
        mine = [e for e in entries if (e.details or {}).get("execution_id") == execution_id]
        started = any(e.event == "execution_started" for e in mine)
        if not before:
            # every object is backed up before any call that could change it, and a silent executor
            # cannot pass that step any more (its hold is past its deadline)
            reason = "nsstuck stopped before backing up the objects, so before making the change; nothing changed"
            return self._settle(view, execution_id, RequestStatus.FAILED, reason, took_effect=[])
        try:
            identity = self.acting_as(view)
        except NoIdentityError as e:  # the mapping changed since: nsstuck's own read role reads them
            log.warning("request %s: reconciled with nsstuck's own identity: %s", view.id, e)
            identity = None
        with self._patcher(view.cluster, None, identity) as patcher:
            now_objects = [patcher.read(ObjectRef.of(obj, resource=_resource(view, obj))) for obj in before]
        took = [planning.took_effect(view.remedy, b, n) for b, n in zip(before, now_objects, strict=True)]
        seen = _seen(before, took)
        if not started:
            if any(took):
                reason = f"nsstuck stopped before making the change, yet the cluster shows it made ({seen})"
            else:
                reason = f"nsstuck stopped before making the change; the cluster shows {seen}"
            return self._settle(view, execution_id, RequestStatus.FAILED, reason, took_effect=took)
        if all(took):
            return self._settle(
                view, execution_id, RequestStatus.APPLIED, f"the change is in the cluster ({seen})", took_effect=took
            )
        if not any(took):
            reason = (
                f"the change was sent but its outcome never recorded, and the cluster shows it did not happen ({seen})"
            )
        else:
            reason = f"the change was sent but its outcome never recorded: only part of it is in the cluster ({seen})"
        return self._settle(view, execution_id, RequestStatus.FAILED, reason, took_effect=took)

    def _settle(
        self, view: RequestView, execution_id: str, status: RequestStatus, reason: str, *, took_effect: Sequence[bool]
    ) -> Outcome | None:
        """Record what the live cluster shows, once: the move is conditional on the silent executor's
        id and on its deadline being past the grace (an executor that renewed its hold keeps it)."""
        now = self.clock()
        follow_until = now + self.follow_for if status == RequestStatus.APPLIED else None
        with self.db.unit_of_work() as uow:
            if not uow.requests.move(
                view.id,
                from_status=RequestStatus.EXECUTING,
                to_status=status,
                held_by=execution_id,
                overdue_at=now - RECONCILE_GRACE,
                finished_at=now,
                status_reason=f"{SETTLED_PREFIX}{reason}"[:1000],
                follow_until=follow_until,
            ):
                return None  # settled by its executor after all, or by another replica
            request = uow.requests.get(view.id)
            assert request is not None
            after = view_of(uow, request)
            audit(
                uow,
                after,
                "reconciled",
                actor=SYSTEM_ACTOR,
                execution_id=execution_id,
                outcome=status,
                took_effect=list(took_effect),
                reason=reason,
            )
            entry = audit(
                uow, after, status, actor=SYSTEM_ACTOR, execution_id=execution_id, reason=reason, reconciled=True
            )
        return Outcome(after, entry)

    # -- afterwards --------------------------------------------------------------------------

    def follow(self, namespace_uid_of: Callable[[RequestView], str | None]) -> list[Outcome]:
        """For applied requests: is the namespace gone? Said once per request, when it is gone or
        when `follow_until` passes."""
        now = self.clock()
        with self.db.unit_of_work() as uow:
            ids = uow.requests.to_verify()
        outcomes = []
        for request_id in ids:
            view = load(self.db, request_id)
            if view is None or view.follow_until is None:
                continue
            namespace = ObjectRef(api_version="v1", kind="Namespace", name=view.namespace, resource="namespaces")
            reachable = True
            live: KubeObject | None = None
            try:
                with self._patcher(view.cluster, None) as patcher:
                    live = patcher.read(namespace)
            except NsstuckError as e:
                log.info("cannot follow request %s now: %s", request_id, e)
                reachable = False
            uid = namespace_uid_of(view)
            live_uid = (live or {}).get("metadata", {}).get("uid")
            if reachable and (live is None or (uid is not None and live_uid not in (None, uid))):
                verdict = "gone"
            elif now >= view.follow_until:
                verdict = "still_terminating" if reachable else "unknown"
            else:
                continue
            with self.db.unit_of_work() as uow:
                if not uow.requests.mark_verified(request_id, at=now, verification=verdict):
                    continue
                request = uow.requests.get(request_id)
                assert request is not None
                after = view_of(uow, request)
                entry = audit(uow, after, "verified", actor=SYSTEM_ACTOR, outcome=verdict)
            outcomes.append(Outcome(after, entry))
        return outcomes


# what a request settled by the reconciler says first: the record was completed from the live cluster
# (its executor died, was fenced off, or sent a write that was never answered)
SETTLED_PREFIX = "reconciled with the cluster: "


def _seen(before: Sequence[KubeObject], took: Sequence[bool]) -> str:
    """What the cluster showed of each object, for the record: "ConfigMap a/b changed, ..."."""
    return ", ".join(
        f"{ObjectRef.of(obj).display} {'changed as planned' if done else 'unchanged'}"
        for obj, done in zip(before, took, strict=True)
    )


def _ref(obj: KubeObject) -> dict[str, object]:
    return ObjectRef.of(obj).to_json()


def _backed_up(backup_id: int, sha256: str, obj: KubeObject) -> dict[str, object]:
    """A backup as the trail lists it; a Secret's or ConfigMap's says that only its metadata was kept
    (it was read as metadata only: its data never reached nsstuck)."""
    entry: dict[str, object] = {"id": backup_id, "object": _ref(obj), "sha256": sha256}
    if holds_values(obj.get("apiVersion"), obj.get("kind")):
        entry["kept"] = "metadata only (the data was never read)"
    return entry


def _resource(view: RequestView, obj: KubeObject) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    for target in view.remedy.targets:
        if target.uid == uid or target.name == (obj.get("metadata") or {}).get("name"):
            return target.resource
    return None


def _result(op: Operation, result: CallResult) -> dict[str, object]:
    return {"summary": op.summary, **result.to_json()}


def _acting(identity: Impersonation | None) -> dict[str, object]:
    """Who the calls acted as, for the audit trail (act_as_approver)."""
    if identity is None:
        return {}
    return {"acting_as": {"user": identity.user, "groups": list(identity.groups)}}


def _explain(op: Operation, result: CallResult, identity: Impersonation | None = None) -> str:
    if identity is not None and result.verdict is Verdict.FORBIDDEN:
        # the cluster's own refusal, in its words: its RBAC decided for the approver
        return f"{op.summary}: the cluster refused it for {identity.user} ({result.message})"
    what = {
        Verdict.CONFLICT: "the object changed between the check and the change, so nothing was changed",
        Verdict.GONE: "the object disappeared before it could be changed",
        Verdict.DENIED: "the API server refused it",
        Verdict.FORBIDDEN: "nsstuck's credentials may not do this",
        Verdict.UNREACHABLE: "the cluster did not answer (the change may or may not have happened)",
        Verdict.ERROR: "the API server failed",
    }.get(result.verdict, result.verdict.value)
    detail = f" ({result.message})" if result.message else ""
    return f"{op.summary}: {what}{detail}"
