"""The remediation listeners: a remedy's button files a request in the thread, approvers decide with
buttons, and the outcome is said in the same thread. Every listener acknowledges first (Slack wants
an answer within 3 s); refusals are ephemeral, and every decision lives in the database."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, Respond
from slack_sdk.errors import SlackApiError

from bot.errors import UnknownClusterError, UserError
from bot.remediation import policy
from bot.remediation.executing import Executor, Outcome, verification_text
from bot.remediation.requests import RequestView, VoteKind, decide, expire_due, file_request, load, set_message
from bot.services.recording import current_thread
from bot.slack import ids
from bot.slack.blocks import ephemeral
from bot.slack.pacing import RateLimited, Transient
from bot.slack.remediation_blocks import request_message
from bot.slack.shapes import click_channel
from bot.slack.text import escape

if TYPE_CHECKING:
    from bot.slack.app import Bot

log = logging.getLogger(__name__)

GROUP_CACHE_SECONDS = 60.0
# the values the bot puts on its buttons, exactly: "<run id>:<remedy id>" and "<request id>" (ASCII
# digits only: int() would also take " 1", "1_0" or "١", and an id past 2**63 breaks the query)
_REMEDY_VALUE = re.compile(r"([1-9][0-9]{0,17}):([A-Za-z0-9_-]{1,64})")
_REQUEST_VALUE = re.compile(r"[1-9][0-9]{0,17}")
NOT_OURS = "That button is not one of nsstuck's."


class RemediationDesk:
    """Registers the remediation listeners on the bot's app and runs the remediation chores."""

    def __init__(self, bot: Bot, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.bot = bot
        self.clock = clock
        deps = bot.deps
        self.settings = deps.settings
        self.executor = Executor(
            deps.db,
            target_of=bot.cluster_target,
            follow_for=timedelta(seconds=deps.settings.remediation_follow_seconds),
            clock=clock,
        )
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._groups_lock = threading.Lock()
        bot.app.action(ids.REQUEST_REMEDY_PATTERN)(self._on_request)
        bot.app.action(ids.APPROVE)(self._on_approve)
        bot.app.action(ids.REJECT)(self._on_reject)

    # -- helpers -----------------------------------------------------------------------------

    def _members(self, group: str) -> frozenset[str]:
        """The members of a Slack user group (usergroups.users.list), cached for a minute."""
        now = time.monotonic()
        with self._groups_lock:
            cached = self._groups.get(group)
            if cached and now - cached[0] < GROUP_CACHE_SECONDS:
                return cached[1]
        try:
            response = self.bot.client.usergroups_users_list(usergroup=group)
            users = response.get("users")
            # only a list of user ids counts: any other shape approves nobody (and says so)
            members = frozenset(u for u in users if isinstance(u, str)) if isinstance(users, list) else frozenset()
            if not isinstance(users, list):
                log.warning("cannot resolve user group %s: users is not a list", group)
        except SlackApiError as e:
            log.warning("cannot resolve user group %s: %s", group, e.response.get("error"))
            members = frozenset()
        with self._groups_lock:
            self._groups[group] = (now, members)
        return members

    def _approvers(self, cluster: str) -> frozenset[str]:
        """Every user who may approve on this cluster (user groups expanded)."""
        config = self.bot.deps.config.require_cluster(cluster)
        return policy.eligible_approvers(config.approvers, self._members)

    def _tell(self, body: dict[str, Any], text: str) -> None:
        """An ephemeral answer to whoever clicked, in the thread they clicked in: through the click's
        response_url (which reaches people who are not members of the channel), else the Web API."""
        if body.get("response_url"):
            try:
                self.respond(body)(text=text, response_type="ephemeral", replace_original=False)
                return
            except (SlackApiError, OSError, ValueError) as e:
                log.warning("ephemeral answer through response_url failed: %s", e.__class__.__name__)
        channel = click_channel(body)
        user = str((body.get("user") or {}).get("id") or "")
        message = body.get("message") or {}
        thread = message.get("thread_ts") or message.get("ts")
        try:
            self.bot.client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread)
        except SlackApiError as e:
            log.warning("ephemeral to %s failed: %s", user, e.response.get("error"))

    @staticmethod
    def respond(body: dict[str, Any]) -> Respond:
        return Respond(response_url=str(body["response_url"]))

    def _refresh(self, view: RequestView) -> None:
        """Redraw the request message to show where the request stands (queued behind the posts to its
        channel, retried like them). If Slack fails for longer, the outbox job redraws it later, from
        where the request stands then."""
        if not view.channel or not view.message_ts:
            return
        self._redraw(view, view.channel, view.message_ts).add_done_callback(lambda done: self._redrawn(view, done))

    def _redraw(self, view: RequestView, channel: str, ts: str) -> Future[dict[str, Any]]:
        approvers = self.bot.deps.config.require_cluster(view.cluster).approvers
        return self.bot.update(channel, ts, request_message(view, approvers=approvers, now=self.clock()))

    def _redrawn(self, view: RequestView, done: Future[dict[str, Any]]) -> None:
        error = done.exception()
        if isinstance(error, (Transient, RateLimited)):
            log.warning("updating request #%s failed (%s); it will be redrawn when Slack answers", view.id, error)
            self.bot.backlog.keep(f"redraw:{view.id}", lambda: self._redraw_latest(view.id))
        elif isinstance(error, SlackApiError):
            log.warning("updating request #%s failed: %s", view.id, error.response.get("error"))
        elif error is not None:
            log.warning("updating request #%s failed: %s", view.id, error.__class__.__name__)

    def _redraw_latest(self, request_id: int) -> None:
        """For the outbox job: the request message as the request stands now."""
        view = load(self.bot.deps.db, request_id)
        if view is not None and view.channel and view.message_ts:
            self._redraw(view, view.channel, view.message_ts).result()

    def _say(self, view: RequestView, text: str) -> None:
        """A line in the request's thread; kept and posted later (once) if Slack fails for longer than
        the retries."""
        if view.channel and view.thread_ts:
            self.bot.post_kept(view.channel, ephemeral(text), thread_ts=view.thread_ts)

    # -- a remedy's button -------------------------------------------------------------------

    def _on_request(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        user = str((body.get("user") or {}).get("id") or "")
        channel = click_channel(body)
        value = action.get("value")
        matched = _REMEDY_VALUE.fullmatch(value) if isinstance(value, str) else None
        if matched is None or not user:
            self._tell(body, NOT_OURS)
            return
        run_id, remedy_id = int(matched.group(1)), matched.group(2)
        try:
            self._file(body, run_id=run_id, remedy_id=remedy_id, user=user, channel=channel)
        except (UserError, UnknownClusterError) as e:
            self._tell(body, str(e))

    def _file(self, body: dict[str, Any], *, run_id: int, remedy_id: str, user: str, channel: str) -> None:
        db = self.bot.deps.db
        cluster_name = self.bot.run_cluster(run_id)
        if cluster_name is None:
            raise UserError("That diagnosis is not on record any more; run `/nsstuck` again.")
        cluster = self.bot.deps.config.require_cluster(cluster_name)
        if cluster.channels and channel not in cluster.channels:
            raise UserError(f"Cluster `{cluster.name}` cannot be changed from this channel.")
        message = body.get("message") or {}
        thread = str(message.get("thread_ts") or message.get("ts") or "") or None
        filed = file_request(
            db,
            run_id=run_id,
            remedy_id=remedy_id,
            user=user,
            cluster=cluster,
            now=self.clock(),
            expires_after=timedelta(seconds=self.settings.request_expiry_seconds),
            channel=channel,
            thread_ts=thread,
        )
        view = filed.view
        if not filed.created:
            self._tell(body, f"Remediation request #{view.id} for this is waiting for approval already.")
            return
        if view.incident_id is not None:  # the incident's own thread, wherever the button was
            found = current_thread(db, view.incident_id)
            if found and found[0] == channel:
                thread = found[1]
        rendered = request_message(view, approvers=cluster.approvers, now=self.clock())

        # the request is on record; if Slack fails now, its message is posted when Slack answers again
        # (drawn as the request stood when filed: a vote needs the message, so it is still pending)
        def remember(posted: dict[str, Any]) -> None:
            set_message(db, view.id, channel, str(posted["ts"]))
            latest = load(db, view.id)
            if latest is not None and latest.status != view.status:  # it moved on while Slack was down
                self._refresh(latest)

        self.bot.post_kept(channel, rendered, thread_ts=thread, then=remember)

    # -- Approve and Reject ------------------------------------------------------------------

    def _on_approve(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        self._decide(body, action, approve=True)

    def _on_reject(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        self._decide(body, action, approve=False)

    def _decide(self, body: dict[str, Any], action: dict[str, Any], *, approve: bool) -> None:
        user = str((body.get("user") or {}).get("id") or "")
        value = action.get("value")
        if not (isinstance(value, str) and _REQUEST_VALUE.fullmatch(value)) or not user:
            self._tell(body, NOT_OURS)
            return
        request_id = int(value)
        view = load(self.bot.deps.db, request_id)
        if view is None:
            self._tell(body, "That request is not on record.")
            return
        if view.channel and click_channel(body) != view.channel:  # its buttons are on its message, in its channel
            self._tell(body, NOT_OURS)
            return
        try:
            eligible = self._approvers(view.cluster)
        except UnknownClusterError:
            self._tell(body, f"Cluster `{view.cluster}` is no longer registered; nothing can be changed there.")
            return
        vote = decide(
            self.bot.deps.db,
            request_id,
            user=user,
            approve=approve,
            approvers=eligible,
            now=self.clock(),
            execution_timeout=timedelta(seconds=self.settings.execution_timeout_seconds),
        )
        if vote.kind in (VoteKind.REFUSED, VoteKind.DUPLICATE, VoteKind.CLOSED, VoteKind.UNKNOWN):
            self._tell(body, vote.message)
            return
        assert vote.view is not None
        self._refresh(vote.view)
        if vote.kind is VoteKind.EXPIRED:
            self._tell(body, vote.message)
        elif vote.kind is VoteKind.REJECTED:
            self._say(vote.view, f"Request #{request_id} rejected by <@{escape(user)}>; nothing was changed.")
        elif vote.kind is VoteKind.EXECUTE and vote.execution_id is not None:
            self.bot.work.submit(self._execute, request_id, vote.execution_id)

    def _execute(self, request_id: int, execution_id: str) -> None:
        outcome = self.executor.execute(request_id, execution_id)
        if outcome is not None:
            self._announce(outcome)

    def _announce(self, outcome: Outcome) -> None:
        self._refresh(outcome.view)
        # the outcome quotes the API server (a webhook's message, say): escaped like all cluster text
        self._say(outcome.view, f"Remediation #{outcome.view.id}: {escape(outcome.text)}")

    # -- chores (the scheduler calls this) ---------------------------------------------------

    def tick(self) -> None:
        """Expire overdue requests, reconcile executions whose executor died, follow applied ones."""
        for view in expire_due(self.bot.deps.db, self.clock()):
            self._refresh(view)
            self._say(view, f"Remediation request #{view.id} expired without enough approvals; nothing was changed.")
        for outcome in self.executor.reconcile():
            self._announce(outcome)
        for outcome in self.executor.follow(self.bot.namespace_uid):
            self._say(outcome.view, escape(verification_text(outcome.view, self.clock())))
