"""Slack as the use cases' notifier: every message nsstuck posts goes out from here.

Posts go through the per-channel pacer (Slack allows about one message a second per channel) and the
poster (each post carries a key, so an answer lost on the way never makes a double post). Work that
still fails after the pacer's retries is kept in a backlog that the outbox job tries again
(`retry_kept`). Implements the protocols of `bot.services.notifying`, and posts digests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from bot.domain.findings import Diagnosis
from bot.domain.statuses import RequestStatus
from bot.errors import NsstuckError
from bot.remediation.executing import Outcome
from bot.remediation.requests import RequestView, load
from bot.services.admission_events import deleted_by
from bot.services.digesting import Digest
from bot.services.metrics import Metrics
from bot.services.notifying import Thread
from bot.services.recording import PendingPost
from bot.services.reporting import human_seconds, render_text
from bot.services.watching import WATCHER
from bot.settings import AppConfig, Settings
from bot.slack import blocks
from bot.slack.digest_posting import post_digest
from bot.slack.pacing import ChannelPacer, RateLimited, Transient
from bot.slack.posting import Backlog, Post, Poster, message_key, pace_error, retry_after
from bot.slack.remediation_blocks import audit_mark, outcome_text, request_message, verification_text
from bot.slack.text import clip, escape
from bot.store.audit import Appended
from bot.store.database import Database

log = logging.getLogger(__name__)


class SlackNotifier:
    """The Web API clients, the pacer, the poster and the backlog, behind the notifier protocols."""

    def __init__(
        self,
        *,
        settings: Settings,
        config: AppConfig,
        db: Database,
        metrics: Metrics,
        client: WebClient | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if settings.slack_bot_token is None:
            raise NsstuckError("SLACK_BOT_TOKEN is not set")
        self.config = config
        self.db = db
        self.metrics = metrics
        self.clock = clock
        token = settings.slack_bot_token.get_secret_value()
        self.client = client or WebClient(
            token=token,
            base_url=settings.slack_api_url,
            timeout=settings.slack_timeout_seconds,
            retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2)],
        )
        # chat.postMessage is not retried blindly: a connection dropped after the request was sent may
        # have posted it (posting.py looks first); only a connection that could not be made is retried
        post_client = client or WebClient(
            token=token,
            base_url=settings.slack_api_url,
            timeout=settings.slack_timeout_seconds,
            retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2, error_types=[URLError])],
        )
        self.pacer = ChannelPacer(interval=settings.slack_post_interval)
        self._auth: dict[str, Any] | None = None
        self.poster = Poster(post_client, settle=settings.slack_settle_seconds, bot_id=self._bot_id, metrics=metrics)
        # Slack work that failed after its retries, tried again by the outbox job
        self.backlog = Backlog()
        # runs whose posting failed in this process: when a post of theirs that may still be under way
        # at Slack has surely landed (epoch seconds); others that failed before this process started
        # are given NSSTUCK_SLACK_SETTLE_SECONDS from its start
        self.started = time.time()
        self.settle_at: dict[int, float] = {}

    def close(self) -> None:
        self.pacer.close()

    # -- who we are ------------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        """auth.test's answer (the workspace URL, the bot's ids), asked once."""
        if self._auth is None:
            response = self.client.auth_test()
            self._auth = dict(response.data) if isinstance(response.data, dict) else {}
        return self._auth

    def workspace(self) -> str:
        return str(self._identity().get("url") or "https://slack.com/")

    def _bot_id(self) -> str | None:
        found = self._identity().get("bot_id")
        return str(found) if found else None

    # -- posting ---------------------------------------------------------------------------------

    def post(self, channel: str, message: blocks.Message, *, thread_ts: str | None = None) -> Future[dict[str, Any]]:
        """Queue a message for `channel` behind the ones already queued; returns a future of the response.
        Posted once, however its attempts end (posting.py)."""
        return self.send(self.poster.prepare(channel, message, thread_ts=thread_ts))

    def send(self, post: Post) -> Future[dict[str, Any]]:
        return self.pacer.submit(post.channel, lambda: self.poster.send(post))

    def post_kept(
        self,
        channel: str,
        message: blocks.Message,
        *,
        thread_ts: str | None = None,
        then: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any] | None:
        """Post, waiting for the answer; if Slack fails for longer than the retries, the post is kept
        (with its key) and tried again by the outbox job, and `then` runs once it is posted. The
        response, or None when it was kept."""
        post = self.poster.prepare(channel, message, thread_ts=thread_ts, key=message_key())

        def attempt() -> dict[str, Any]:
            response = self.send(post).result()
            if then is not None:
                then(response)
            return response

        try:
            return attempt()
        except (Transient, RateLimited) as e:
            log.warning("posting to %s failed (%s); kept to be posted when Slack answers", channel, e)
            self.metrics.posts.labels(result="deferred").inc()

            def again() -> None:
                attempt()

            self.backlog.keep(post.key, again)
            return None

    def update(self, channel: str, ts: str, message: blocks.Message) -> Future[dict[str, Any]]:
        """Queue an update of a message (after the posts queued for its channel); retried like a post,
        which is safe: an update made twice is made once."""

        def send() -> dict[str, Any]:
            try:
                response = self.client.chat_update(
                    channel=channel, ts=ts, text=message.text, blocks=list(message.blocks)
                )
            except SlackApiError as e:
                paced = pace_error(e)
                if paced is not None:
                    raise paced from None
                raise
            except OSError as e:
                raise Transient(e.__class__.__name__) from None
            return dict(response.data) if isinstance(response.data, dict) else {}

        return self.pacer.submit(channel, send)

    def upload_report(self, channel: str, thread_ts: str, diagnosis: Diagnosis) -> Future[dict[str, Any]]:
        """The whole report, as the CLI prints it, as a file in the thread (queued like a post)."""

        def send() -> dict[str, Any]:
            try:
                response = self.client.files_upload_v2(
                    channel=channel,
                    thread_ts=thread_ts,
                    content=render_text(diagnosis),
                    filename=f"nsstuck-{diagnosis.cluster}-{diagnosis.namespace}.txt",
                    title=f"Full report: {diagnosis.cluster}/{diagnosis.namespace}",
                    initial_comment="The full report, with every object and remedy:",
                )
            except SlackApiError as e:
                if e.response.status_code == 429:
                    raise RateLimited(retry_after(e)) from None
                log.error("files upload to %s failed: %s", channel, e.response.get("error"))
                raise
            return dict(response.data) if isinstance(response.data, dict) else {}

        return self.pacer.submit(channel, send)

    # -- the outbox (RunPublisher) ---------------------------------------------------------------

    def attempt(self, run: PendingPost) -> _RunAttempt:
        return _RunAttempt(self, run)

    def retry_kept(self) -> int:
        return self.backlog.retry()

    # -- digests ---------------------------------------------------------------------------------

    def post_digest(self, digest: Digest) -> str | None:
        def send(channel: str, message: blocks.Message, thread_ts: str | None) -> dict[str, Any]:
            return dict(self.post(channel, message, thread_ts=thread_ts).result())

        return post_digest(send, digest, workspace=self.workspace())

    # -- incidents (IncidentNotifier) ------------------------------------------------------------

    def thread_note(self, channel: str, thread_ts: str, text: str) -> None:
        """A short follow-up in a thread; kept and posted later if Slack fails for longer than the retries."""
        self.post_kept(channel, blocks.ephemeral(escape(text)), thread_ts=thread_ts)

    def incident_resolved(self, thread: Thread, *, namespace: str, after_seconds: int) -> None:
        took = human_seconds(after_seconds)
        self.thread_note(thread.channel, thread.ts, f":white_check_mark: `{namespace}` is gone: resolved after {took}.")

    def cause_changed(self, thread: Thread, *, before: str | None, after: str | None, summary: str) -> None:
        text = f":arrows_counterclockwise: The cause changed: `{before}` → `{after}`"
        self.thread_note(thread.channel, thread.ts, text + (f": {summary}" if summary else ""))

    # -- the watch's clusters (ClusterNotifier) --------------------------------------------------

    def cluster_unreachable(self, channel: str, *, cluster: str, reason: str) -> None:
        # the reason is the cluster's (or its kubeconfig's) own words, scrubbed of credentials by bot.kube
        text = (
            f":warning: nsstuck cannot reach cluster `{escape(cluster)}`: {escape(clip(reason, 300))}\n"
            "Its namespaces are not watched until it answers again; that will be said here."
        )
        self.post_kept(channel, blocks.ephemeral(text))

    def cluster_back(self, channel: str, *, cluster: str, after_seconds: int) -> None:
        text = (
            f":white_check_mark: nsstuck reaches cluster `{escape(cluster)}` again, after "
            f"{human_seconds(after_seconds)} without an answer; its namespaces are watched again."
        )
        self.post_kept(channel, blocks.ephemeral(text))

    # -- remediation (RemediationNotifier) -------------------------------------------------------

    def request_filed(self, view: RequestView, *, thread_ts: str | None, posted: Callable[[str], None]) -> None:
        assert view.channel is not None  # a request filed from a button has the button's channel
        approvers = self.config.require_cluster(view.cluster).approvers
        rendered = request_message(view, approvers=approvers, now=self.clock())
        self.post_kept(view.channel, rendered, thread_ts=thread_ts, then=lambda response: posted(str(response["ts"])))

    def request_changed(self, view: RequestView) -> None:
        """Redraw the request message to show where the request stands (queued behind the posts to its
        channel, retried like them). If Slack fails for longer, the outbox job redraws it later, from
        where the request stands then."""
        if not view.channel or not view.message_ts:
            return
        self._redraw(view, view.channel, view.message_ts).add_done_callback(lambda done: self._redrawn(view, done))

    # how a request ended is said with the audit entry that recorded it: "audit #123 · `3f2a9c1b0d4e`"

    def request_rejected(self, view: RequestView, *, by: str, entry: Appended) -> None:
        self._say(view, f"Request #{view.id} rejected by <@{escape(by)}>; nothing was changed.", entry)

    def vote_dropped(self, view: RequestView, *, voter: str, reason: str, entry: Appended) -> None:
        count = f"{len(view.approvals)} of {view.required_approvals} approvals"
        after = "it waits for more" if view.status is RequestStatus.PENDING else "enough without it"
        who = f"<@{escape(voter)}>"
        text = f"Request #{view.id}: the approval of {who} no longer counts: {escape(reason)} ({count}; {after})."
        self._say(view, text, entry)

    def request_expired(self, view: RequestView, *, entry: Appended) -> None:
        self.request_changed(view)
        text = f"Remediation request #{view.id} expired without enough approvals; nothing was changed."
        self._say(view, text, entry)

    def outcome(self, outcome: Outcome) -> None:
        self.request_changed(outcome.view)
        # the outcome quotes the API server (a webhook's message, say): escaped like all cluster text
        text = f"Remediation #{outcome.view.id}: {escape(outcome_text(outcome.view))}"
        self._say(outcome.view, text, outcome.entry)

    def verified(self, outcome: Outcome) -> None:
        self._say(outcome.view, escape(verification_text(outcome.view)), outcome.entry)

    def _redraw(self, view: RequestView, channel: str, ts: str) -> Future[dict[str, Any]]:
        approvers = self.config.require_cluster(view.cluster).approvers
        return self.update(channel, ts, request_message(view, approvers=approvers, now=self.clock()))

    def _redrawn(self, view: RequestView, done: Future[dict[str, Any]]) -> None:
        error = done.exception()
        if isinstance(error, (Transient, RateLimited)):
            log.warning("updating request #%s failed (%s); it will be redrawn when Slack answers", view.id, error)
            self.backlog.keep(f"redraw:{view.id}", lambda: self._redraw_latest(view.id))
        elif isinstance(error, SlackApiError):
            log.warning("updating request #%s failed: %s", view.id, error.response.get("error"))
        elif error is not None:
            log.warning("updating request #%s failed: %s", view.id, error.__class__.__name__)

    def _redraw_latest(self, request_id: int) -> None:
        """For the outbox job: the request message as the request stands now."""
        view = load(self.db, request_id)
        if view is not None and view.channel and view.message_ts:
            self._redraw(view, view.channel, view.message_ts).result()

    def _say(self, view: RequestView, text: str, entry: Appended) -> None:
        """A line in the request's thread, and under it the audit entry it reports; kept and posted
        later (once) if Slack fails for longer than the retries."""
        if view.channel and view.thread_ts:
            said = f"{text}\n{audit_mark(entry)}"
            self.post_kept(view.channel, blocks.ephemeral(said), thread_ts=view.thread_ts)


class _RunAttempt:
    """One attempt at posting a recorded run. Each message of a run has a key of its own (run,
    creation time, part), the same in every attempt, in every process: after a failed attempt, the
    parts that went through are found in Slack and not posted again."""

    def __init__(self, slack: SlackNotifier, run: PendingPost) -> None:
        self.slack = slack
        self.run = run
        self.posts: list[Post] = []
        self.created = run.created_at.timestamp()
        self.settle_at: float | None = None
        if run.attempts > 0:  # an earlier attempt failed or was cut short: some parts may be in Slack
            self.settle_at = slack.settle_at.get(run.run_id, slack.started + slack.poster.settle)

    def _send(self, message: blocks.Message, thread_ts: str | None, part: int) -> Future[dict[str, Any]]:
        key = f"run:{self.run.run_id}:{self.created:.6f}:{part}"
        post = self.slack.poster.prepare(self.run.channel, message, thread_ts=thread_ts, key=key, oldest=self.created)
        if self.settle_at is not None:
            post.doubt(until=self.settle_at)
        self.posts.append(post)
        return self.slack.send(post)

    def verdict(self, thread_ts: str | None) -> str | None:
        unasked = self.run.requested_by == WATCHER
        by = deleted_by(self.run.requested_by)
        message = blocks.verdict(
            self.run.diagnosis,
            requested_by=None if unasked or by is not None else self.run.requested_by,
            unasked=unasked,
            deleted_by=by,
        )
        ts = self._send(message, thread_ts, 0).result().get("ts")
        return str(ts) if ts else None

    def report(self, thread_ts: str, *, remediable: bool) -> Callable[[], None]:
        diagnosis = self.run.diagnosis
        messages, cut = blocks.report_parts(diagnosis, run_id=self.run.run_id if remediable else None)
        futures = [self._send(message, thread_ts, part) for part, message in enumerate(messages, 1)]
        if cut:
            futures.append(self.slack.upload_report(self.run.channel, thread_ts, diagnosis))

        def wait() -> None:
            for future in futures:
                future.result()

        return wait

    def failed(self) -> None:
        self.slack.metrics.posts.labels(result="deferred").inc()
        self.slack.settle_at[self.run.run_id] = max((p.settle_at for p in self.posts if p.in_doubt), default=0.0)

    def posted(self) -> None:
        self.slack.settle_at.pop(self.run.run_id, None)
