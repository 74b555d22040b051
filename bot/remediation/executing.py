"""Making an approved change: re-check, back up, dry run, apply, and afterwards follow the namespace.

Every step is recorded before the next one starts. `execution_started` is committed before the
first real API call, and the outcome after it, so an executor that dies in between leaves a request
in `executing` with that entry as the last word; `reconcile` finds it once its deadline has passed,
looks at the live cluster, and records what actually happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.diagnosis.engine import diagnose
from bot.domain.changes import CallResult, Operation, Verdict
from bot.domain.refs import ClusterName, KubeObject, ObjectRef
from bot.domain.statuses import RequestStatus
from bot.errors import NsstuckError
from bot.kube.collecting import CollectOptions, Collector
from bot.kube.patching import Patcher
from bot.kube.registry import ClusterRegistry
from bot.kube.transport import Transport
from bot.remediation import planning
from bot.remediation.kinds.registry import kind_of
from bot.remediation.requests import RequestView, audit, load, view_of
from bot.store.audit import SYSTEM_ACTOR
from bot.store.database import Database

log = logging.getLogger(__name__)

# an executor past its deadline gets this much longer before its request is reconciled by others
RECONCILE_GRACE = timedelta(seconds=5)
MAX_CALL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Outcome:
    """What became of a request (its status, reason and verification), to be said in its thread."""

    view: RequestView


def utcnow() -> datetime:
    return datetime.now(UTC)


class Executor:
    def __init__(
        self,
        db: Database,
        *,
        clusters: ClusterRegistry,
        follow_for: timedelta,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db = db
        self.clusters = clusters
        self.follow_for = follow_for
        self.clock = clock

    @contextmanager
    def _patcher(self, cluster: ClusterName, deadline: datetime | None) -> Iterator[Patcher]:
        remaining = (deadline - self.clock()).total_seconds() if deadline else MAX_CALL_TIMEOUT
        connection = self.clusters.connect(cluster, pool_size=4)
        try:
            transport = Transport(connection, call_timeout=max(1.0, min(MAX_CALL_TIMEOUT, remaining)))
            yield Patcher(transport)
        finally:
            connection.close()

    # -- executing ---------------------------------------------------------------------------

    def execute(self, request_id: int, execution_id: str) -> Outcome | None:
        """Run an approved request this caller holds (`execution_id`); None when it does not hold it."""
        view = load(self.db, request_id)
        if view is None or view.status != RequestStatus.EXECUTING or view.execution_id != execution_id:
            return None
        try:
            with self._patcher(view.cluster, view.execution_deadline) as patcher:
                return self._execute(view, execution_id, patcher)
        except NsstuckError as e:  # cannot connect, or the cluster refused to show us the objects
            return self._finish(
                view, execution_id, RequestStatus.FAILED, f"could not re-check the cluster: {e}", phase="recheck"
            )

    def _execute(self, view: RequestView, execution_id: str, patcher: Patcher) -> Outcome:
        remedy = view.remedy
        live = [patcher.read(target) for target in remedy.targets]
        reasons = planning.stale_reasons(remedy, live)
        if not reasons and planning.needs_fresh_evidence(remedy):
            reasons = self._evidence_now(view, patcher)
        if reasons:
            return self._finish(view, execution_id, RequestStatus.STALE, "; ".join(reasons), reasons=reasons)
        checked = [obj for obj in live if obj is not None]
        with self.db.unit_of_work() as uow:
            kept = [uow.backups.add(view.id, view.cluster, obj) for obj in checked]
            audit(
                uow,
                view,
                "backed_up",
                actor=view.last_approver,
                execution_id=execution_id,
                backups=[
                    {"id": b.id, "object": _ref(b_obj), "sha256": b.sha256}
                    for b, b_obj in zip(kept, checked, strict=True)
                ],
            )
        operations = planning.operations(remedy, checked)
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
            )
        if refused:
            op, result = refused[0]
            return self._finish(
                view,
                execution_id,
                RequestStatus.FAILED,
                f"the dry run was refused: {_explain(op, result)}",
                phase="dry_run",
            )
        with self.db.unit_of_work() as uow:
            audit(
                uow,
                view,
                "execution_started",
                actor=view.last_approver,
                execution_id=execution_id,
                operations=[{"summary": op.summary, "kubectl": op.kubectl} for op in operations],
            )
        results: list[CallResult] = []
        for op in operations:
            result = patcher.run(op, dry_run=False)
            results.append(result)
            if not result.ok:
                break
        done = [_result(op, r) for op, r in zip(operations, results, strict=False)]
        failed = [(op, r) for op, r in zip(operations, results, strict=False) if not r.ok]
        if failed:
            op, result = failed[0]
            return self._finish(
                view, execution_id, RequestStatus.FAILED, _explain(op, result), phase="apply", results=done
            )
        return self._finish(
            view,
            execution_id,
            RequestStatus.APPLIED,
            "; ".join(op.summary for op in operations),
            results=done,
        )

    def _evidence_now(self, view: RequestView, patcher: Patcher) -> list[str]:
        """Force-finalizing needs complete evidence now, not only when it was diagnosed."""
        snapshot = Collector(patcher.transport, cluster=view.cluster, options=CollectOptions()).collect(view.namespace)
        diagnosis = diagnose(snapshot)
        if not diagnosis.complete:
            gaps = ", ".join(str(g) for g in diagnosis.gaps[:3])
            doing = kind_of(view.remedy.action).doing.lower()
            return [f"the evidence is incomplete now ({gaps}), and {doing} needs all of it"]
        return []

    def _finish(
        self,
        view: RequestView,
        execution_id: str,
        status: RequestStatus,
        reason: str,
        **details: object,
    ) -> Outcome:
        now = self.clock()
        values: dict[str, object] = {"finished_at": now, "status_reason": reason[:1000]}
        if status == RequestStatus.APPLIED:
            values["follow_until"] = now + self.follow_for
        with self.db.unit_of_work() as uow:
            moved = uow.requests.move(
                view.id, from_status=RequestStatus.EXECUTING, to_status=status, held_by=execution_id, **values
            )
            request = uow.requests.get(view.id)
            assert request is not None
            after = view_of(uow, request)
            if moved:
                audit(
                    uow,
                    after,
                    status,
                    actor=view.last_approver,
                    execution_id=execution_id,
                    reason=reason,
                    **details,
                )
        if not moved:
            log.warning("request %s was settled by someone else while it ran (now %s)", view.id, after.status)
        return Outcome(after)

    # -- crash recovery ----------------------------------------------------------------------

    def reconcile(self) -> list[Outcome]:
        """Settle executions whose executor went silent past its deadline, from the live cluster."""
        now = self.clock()
        with self.db.unit_of_work() as uow:
            overdue = uow.requests.overdue_executions(now - RECONCILE_GRACE)
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
        if not started:
            reason = (
                "nsstuck stopped before making the change (during the re-check, backup or dry run); nothing changed"
            )
            return self._settle(view, execution_id, RequestStatus.FAILED, reason, took_effect=[])
        with self._patcher(view.cluster, None) as patcher:
            now_objects = [patcher.read(ObjectRef.of(obj, resource=_resource(view, obj))) for obj in before]
        took = [planning.took_effect(view.remedy, b, n) for b, n in zip(before, now_objects, strict=True)]
        if took and all(took):
            return self._settle(
                view, execution_id, RequestStatus.APPLIED, "the change is in the cluster", took_effect=took
            )
        if not any(took):
            reason = "nsstuck stopped while making the change, and the cluster shows it did not happen"
        else:
            reason = "nsstuck stopped part-way: only part of the change is in the cluster"
        return self._settle(view, execution_id, RequestStatus.FAILED, reason, took_effect=took)

    def _settle(
        self, view: RequestView, execution_id: str, status: RequestStatus, reason: str, *, took_effect: Sequence[bool]
    ) -> Outcome | None:
        """Record what the live cluster shows, once: the move is conditional on the dead executor's id."""
        now = self.clock()
        values: dict[str, object] = {"finished_at": now, "status_reason": f"after a restart: {reason}"[:1000]}
        if status == RequestStatus.APPLIED:
            values["follow_until"] = now + self.follow_for
        with self.db.unit_of_work() as uow:
            if not uow.requests.move(
                view.id, from_status=RequestStatus.EXECUTING, to_status=status, held_by=execution_id, **values
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
            audit(uow, after, status, actor=SYSTEM_ACTOR, execution_id=execution_id, reason=reason, reconciled=True)
        return Outcome(after)

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
                audit(uow, after, "verified", actor=SYSTEM_ACTOR, outcome=verdict)
            outcomes.append(Outcome(after))
        return outcomes


def _ref(obj: KubeObject) -> dict[str, object]:
    return ObjectRef.of(obj).to_json()


def _resource(view: RequestView, obj: KubeObject) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    for target in view.remedy.targets:
        if target.uid == uid or target.name == (obj.get("metadata") or {}).get("name"):
            return target.resource
    return None


def _result(op: Operation, result: CallResult) -> dict[str, object]:
    return {"summary": op.summary, **result.to_json()}


def _explain(op: Operation, result: CallResult) -> str:
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
