"""The remediation use cases: file a request from a remedy, decide on it, execute it once approved,
and the chores that the clock runs (expiry, reconciliation of executions cut short, follow-through).

Every decision lives in the database (`bot.remediation.requests`); every change is made by the
`Executor`. What becomes of a request is told through a `RemediationNotifier`; refusals meant only for
the person who clicked are raised (UserError) or returned (`Vote.message`) for the door to show.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from bot.domain.people import Standing
from bot.domain.refs import ClusterName
from bot.errors import UserError
from bot.kube.connecting import Impersonation
from bot.kube.registry import ClusterRegistry
from bot.logs import bind, carrying, log_context
from bot.remediation import permissions, policy
from bot.remediation.executing import Executor
from bot.remediation.identity import PeopleDirectory, approver_identity
from bot.remediation.rechecking import CauseCheck, CauseChecked
from bot.remediation.requests import (
    Filed,
    RequestView,
    Vote,
    VoteKind,
    decide,
    expire_due,
    file_request,
    load,
    set_message,
)
from bot.services.health import pool_problems
from bot.services.metrics import Metrics
from bot.services.notifying import RemediationNotifier
from bot.services.recording import current_thread, incident_namespace_uid, run_cluster
from bot.settings import AppConfig, ClusterConfig, Settings
from bot.store.database import Database

log = logging.getLogger(__name__)

# approved changes run at once on a pool of their own: never queued behind diagnoses, never in the
# door's listener; few at a time (each is a handful of guarded calls to one cluster)
EXECUTION_WORKERS = 4
EARLIER_UNCHECKED = "Could not check with Slack just now whether the earlier approvals still count; try again shortly."


def remediation_open(config: AppConfig, cluster: str, channel: str | None = None) -> bool:
    """Whether remediation can be requested on this cluster (its reports carry Request buttons), from
    `channel` when one is given: a report the watch posts to a channel the cluster's `channels` do not
    allow gets none, since a click there would be refused."""
    found = config.cluster(cluster)
    if found is None or policy.remediation_off(found) is not None:
        return False
    return channel is None or found.allows(channel)


class Remediation:
    def __init__(
        self,
        db: Database,
        *,
        config: AppConfig,
        settings: Settings,
        clusters: ClusterRegistry,
        notifier: RemediationNotifier,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        people: PeopleDirectory | None = None,
        metrics: Metrics | None = None,
        check_cause: Callable[[CauseCheck], CauseChecked] | None = None,
    ) -> None:
        self.db = db
        self.metrics = metrics
        self.config = config
        self.settings = settings
        self.notifier = notifier
        self.clock = clock
        self.people = people
        self.executor = Executor(
            db,
            clusters=clusters,
            follow_for=timedelta(seconds=settings.remediation_follow_seconds),
            execution_timeout=timedelta(seconds=settings.execution_timeout_seconds),
            clock=clock,
            acting_as=self._acting_as,
            not_granted=self._not_granted,
            check_cause=check_cause,  # the re-check before acting: in a worker process of `serve`
        )
        self.executions = ThreadPoolExecutor(max_workers=EXECUTION_WORKERS, thread_name_prefix="nsstuck-execute")

    def _not_granted(self, view: RequestView) -> str | None:
        """Why nsstuck's own role on the request's cluster does not cover its targets (the config may
        have changed since it was filed), or None."""
        cluster = self.config.cluster(view.cluster)
        return permissions.not_granted(cluster, view.remedy) if cluster is not None else None

    def _acting_as(self, view: RequestView) -> Impersonation | None:
        """With act_as_approver: the identity of the approver whose vote completed the quorum."""
        cluster = self.config.cluster(view.cluster)
        if cluster is None:
            return None
        return approver_identity(cluster, view.last_approver, self.people)

    # -- a remedy's button -------------------------------------------------------------------

    def file(
        self,
        *,
        run_id: int,
        remedy_id: str,
        user: str,
        channel: str,
        thread_ts: str | None,
        standing: Callable[[], Standing],
    ) -> Filed:
        """File a request for a remedy of a recorded run, and show it in its thread (the incident's own
        thread when it lives in this channel). Raises UserError (or UnknownClusterError) to refuse.
        `standing` says who the person is, asked fresh (unless the cluster allows external users)."""
        cluster_name = run_cluster(self.db, run_id)
        if cluster_name is None:
            raise UserError("That diagnosis is not on record any more; run `/nsstuck` again.")
        cluster = self.config.require_cluster(cluster_name)
        if not cluster.allows(channel):
            raise UserError(f"Cluster `{cluster.name}` cannot be changed from this channel.")
        if not cluster.allow_external_users:
            refusal = policy.outsider_refusal(cluster, standing(), "request")
            if refusal:
                raise UserError(refusal)
        log.info("remediation requested: remedy %s of run %d", remedy_id, run_id)
        filed = file_request(
            self.db,
            run_id=run_id,
            remedy_id=remedy_id,
            user=user,
            cluster=cluster,
            now=self.clock(),
            expires_after=timedelta(seconds=self.settings.request_expiry_seconds),
            channel=channel,
            thread_ts=thread_ts,
        )
        if not filed.created:
            return filed
        view = filed.view
        with log_context(request_id=view.id, cluster=view.cluster, namespace=view.namespace, run_id=run_id):
            log.info("remediation request #%d filed (%s)", view.id, view.remedy.action)
            self._show_filed(view, channel=channel, thread_ts=thread_ts)
        return filed

    def _show_filed(self, view: RequestView, *, channel: str, thread_ts: str | None) -> None:
        thread = thread_ts
        if view.incident_id is not None:  # the incident's own thread, wherever the button was
            found = current_thread(self.db, view.incident_id)
            if found and found[0] == channel:
                thread = found[1]

        # the request is on record; if the door fails now, its message is shown when it answers again
        # (drawn as the request stood when filed: a vote needs the message, so it is still pending)
        def posted(message_ts: str) -> None:
            set_message(self.db, view.id, channel, message_ts)
            latest = load(self.db, view.id)
            if latest is not None and latest.status != view.status:  # it moved on while the door was down
                self.notifier.request_changed(latest)

        self.notifier.request_filed(view, thread_ts=thread, posted=posted)

    # -- Approve and Reject ------------------------------------------------------------------

    def load(self, request_id: int) -> RequestView | None:
        return load(self.db, request_id)

    def approvers(self, cluster: ClusterName, members: policy.GroupMembers) -> frozenset[str]:
        """Every user who may approve on this cluster (user groups expanded by `members`); raises
        UnknownClusterError for a cluster that is no longer registered."""
        return policy.eligible_approvers(self.config.require_cluster(cluster).approvers, members)

    def decide(
        self,
        request_id: int,
        *,
        user: str,
        approve: bool,
        approvers: frozenset[str],
        standing: Callable[[], Standing],
        standing_of: Callable[[str], Standing] | None = None,
    ) -> Vote:
        """One click on Approve or Reject. The request's message is redrawn, a rejection said in its
        thread, and a vote that completes the approvals starts the execution on the worker pool.
        `standing` says who the person is, asked fresh (unless the cluster allows external users); an
        outsider's approval or rejection is refused and recorded. `standing_of` says who an earlier
        approver is now: when this vote would complete the approvals, each earlier one is judged again
        (approver groups, guest or outsider, not the requester), and one that no longer qualifies is
        dropped from the count, said in the thread."""
        with log_context(request_id=request_id):
            return self._decide(
                request_id,
                user=user,
                approve=approve,
                approvers=approvers,
                standing=standing,
                standing_of=standing_of,
            )

    def _decide(
        self,
        request_id: int,
        *,
        user: str,
        approve: bool,
        approvers: frozenset[str],
        standing: Callable[[], Standing],
        standing_of: Callable[[str], Standing] | None,
    ) -> Vote:
        outsider = None
        lapsed: dict[str, str] = {}
        view = load(self.db, request_id)
        cluster = self.config.cluster(view.cluster) if view is not None else None
        if view is not None and cluster is not None and not cluster.allow_external_users:
            # a guest or an outsider may neither approve nor reject (nor withdraw: they could not ask)
            outsider = policy.outsider_refusal(cluster, standing(), "approve" if approve else "reject")
            if approve and outsider is None:
                outsider = self._earlier_approvers(view, cluster, user, lapsed, standing_of)
        vote = decide(
            self.db,
            request_id,
            user=user,
            approve=approve,
            approvers=approvers,
            now=self.clock(),
            execution_timeout=timedelta(seconds=self.settings.execution_timeout_seconds),
            outsider=outsider,
            lapsed=lapsed,
        )
        if vote.view is not None:
            bind(cluster=vote.view.cluster, namespace=vote.view.namespace)
        log.info("%s on request #%d: %s", "approval" if approve else "rejection", request_id, vote.kind.value)
        if vote.kind in (VoteKind.REFUSED, VoteKind.DUPLICATE, VoteKind.CLOSED, VoteKind.UNKNOWN):
            return vote
        assert vote.view is not None
        self.notifier.request_changed(vote.view)
        for dropped in vote.dropped:
            log.info("request #%d: the approval of %s no longer counts: %s", request_id, dropped.voter, dropped.reason)
            self.notifier.vote_dropped(vote.view, voter=dropped.voter, reason=dropped.reason, entry=dropped.entry)
        if vote.kind is VoteKind.REJECTED:
            assert vote.entry is not None
            self._count(vote.view.status.value)
            self.notifier.request_rejected(vote.view, by=user, entry=vote.entry)
        elif vote.kind is VoteKind.EXECUTE and vote.execution_id is not None:
            self.executions.submit(carrying(self.execute), request_id, vote.execution_id)
        return vote

    @staticmethod
    def _earlier_approvers(
        view: RequestView,
        cluster: ClusterConfig,
        user: str,
        lapsed: dict[str, str],
        standing_of: Callable[[str], Standing] | None,
    ) -> str | None:
        """When this approval would complete the quorum: who each earlier approver is now, asked of
        Slack (a guest or an outsider since their vote no longer counts: into `lapsed`, with why).
        Returns a refusal of this click when Slack cannot say (closed, not open: try again)."""
        earlier = [voter for voter in view.approvals if voter != user]
        if standing_of is None or not earlier or len(earlier) + 1 < view.required_approvals:
            return None
        for voter in earlier:
            standing = standing_of(voter)
            if standing is Standing.UNKNOWN:
                return EARLIER_UNCHECKED
            if standing is not Standing.MEMBER:
                lapsed[voter] = (
                    "they are a guest now" if standing is Standing.GUEST else "they are outside this workspace now"
                )
        return None

    def problems(self) -> list[str]:
        """What has died of the pool approved changes run on ([] when it is well)."""
        return pool_problems("execution", self.executions)

    def close(self) -> None:
        """Let the changes under way finish (each is bounded by its deadline)."""
        self.executions.shutdown(wait=True)

    def execute(self, request_id: int, execution_id: str) -> None:
        with log_context(request_id=request_id):
            log.info("execution of request #%d started", request_id)
            outcome = self.executor.execute(request_id, execution_id)
            if outcome is None:
                log.info("execution of request #%d: nothing to do (another executor holds it)", request_id)
                return
            log.info(
                "execution of request #%d: %s%s",
                request_id,
                outcome.view.status.value,
                f" ({outcome.view.status_reason})" if outcome.view.status_reason else "",
            )
            self._count(outcome.view.status.value)
            self.notifier.outcome(outcome)

    # -- chores (the scheduler calls this) ---------------------------------------------------

    def chores(self) -> None:
        """Expire overdue requests, reconcile executions whose executor died, follow applied ones."""
        for view, entry in expire_due(self.db, self.clock()):
            self._count(view.status.value)
            self.notifier.request_expired(view, entry=entry)
        for outcome in self.executor.reconcile():
            self._count(outcome.view.status.value)
            self.notifier.outcome(outcome)
        for outcome in self.executor.follow(lambda view: incident_namespace_uid(self.db, view.incident_id)):
            if self.metrics is not None:
                self.metrics.verifications.labels(result=outcome.view.verification or "unknown").inc()
            self.notifier.verified(outcome)

    def _count(self, result: str) -> None:
        """A request ended (applied, failed, stale, rejected, expired): nsstuck_remediations_total."""
        if self.metrics is not None:
            self.metrics.remediations.labels(result=result).inc()
