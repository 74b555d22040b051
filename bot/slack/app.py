"""The Bolt app: a thin factory, the /nsstuck listener, and posting through the per-channel pacer.

The listener acknowledges at once (Slack allows 3 s, and a cluster may take longer) and hands the
diagnosis to an executor of its own. The report is committed to the database before anything is
posted, so that a Slack outage loses nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.error import URLError

from slack_bolt import Ack, App, BoltResponse, Respond
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from bot.domain.findings import Diagnosis
from bot.errors import ClusterUnreachableError, ConfigError, NsstuckError
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget, ConnectionCache
from bot.remediation import policy
from bot.remediation.requests import RequestView, open_requests
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.digesting import Digest, clock_for, run_due
from bot.services.followup import open_incidents
from bot.services.history import history
from bot.services.recording import (
    PendingPost,
    Recorded,
    attach_thread,
    claim_post,
    current_thread,
    incident_namespace_uid,
    mark_post_failed,
    mark_posted,
    pending_post,
    record,
    run_cluster,
    unposted_runs,
)
from bot.services.reporting import render_text
from bot.settings import AppConfig, Settings
from bot.slack import blocks, history_blocks, parsing
from bot.slack.digest_posting import post_digest
from bot.slack.metrics import Metrics
from bot.slack.pacing import ChannelPacer, RateLimited, Transient
from bot.slack.posting import Backlog, Post, Poster, message_key, pace_error, retry_after
from bot.slack.remediating import RemediationDesk
from bot.slack.remediation_blocks import pending_lines
from bot.slack.shapes import USER_ID
from bot.slack.text import code, escape
from bot.store.database import Database

log = logging.getLogger(__name__)

Diagnoser = Callable[[ClusterTarget, str], DiagnosisResult]

HELP = (
    "*nsstuck* finds out why a namespace is stuck in Terminating.\n"
    "• `/nsstuck <cluster> <namespace>`: diagnose it; the verdict goes to this channel, the evidence and "
    "the remedies (safest first) to its thread\n"
    "• `/nsstuck clusters`: the clusters you can name here\n"
    "• `/nsstuck history [<cluster> [<namespace>]]`: past incidents\n"
    "• `/nsstuck help`: this message"
)


@dataclass
class Deps:
    settings: Settings
    config: AppConfig
    config_path: Path
    db: Database
    diagnoser: Diagnoser | None = None  # by default the bot's own, with the clients it keeps per cluster


class Bot:
    """The Slack bot: Bolt app, Web API client, posting pacer, diagnosis executor, metrics."""

    def __init__(self, deps: Deps, *, client: WebClient | None = None, workers: int = 4) -> None:
        settings = deps.settings
        if settings.slack_bot_token is None:
            raise NsstuckError("SLACK_BOT_TOKEN is not set")
        self.deps = deps
        self.metrics = Metrics()
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
        self.poster = Poster(
            post_client, settle=settings.slack_settle_seconds, bot_id=self._bot_id, metrics=self.metrics
        )
        # Slack work that failed after its retries, tried again by the outbox job
        self.backlog = Backlog()
        # runs whose posting failed in this process: when a post of theirs that may still be under way
        # at Slack has surely landed (epoch seconds); others that failed before this process started
        # are given NSSTUCK_SLACK_SETTLE_SECONDS from its start
        self._started = time.time()
        self._settle_at: dict[int, float] = {}
        # diagnoses of one incident in this process post one after the other, so that the first
        # verdict's thread is known before the next one decides where to post
        self._incident_locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # few at once: each diagnosis already fans out on its own pool, and acknowledgements (which
        # Slack wants within 3 s) must not queue behind CPU-bound work for the interpreter lock
        self.work = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsstuck-diagnose")
        # a recorded run is posted from here, not from `work`: its posts wait for Slack's pace (its report
        # goes a second after its verdict, in the same channel), and a diagnosis worker that waited with
        # them would leave the next commands queued (at 200 commands a minute, for half a minute)
        self.posting = ThreadPoolExecutor(max_workers=32, thread_name_prefix="nsstuck-post")
        # a client per cluster kept between diagnoses, with room for every worker's requests at once
        self.connections = ConnectionCache(pool_size=workers * CollectOptions().workers)
        self.diagnose: Diagnoser = deps.diagnoser or self._diagnose
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        try:  # Bolt calls auth.test here: a bad token or an unreachable Slack fails now, clearly
            self.app = App(
                client=self.client,
                signing_secret=secret,
                listener_executor=ThreadPoolExecutor(max_workers=32, thread_name_prefix="nsstuck-listener"),
                request_verification_enabled=secret is not None,
            )
        except (SlackApiError, BoltError) as e:
            # Bolt answers a refused token (invalid_auth, token_revoked...) with a BoltError raised while
            # handling the SlackApiError of auth.test
            refused = e if isinstance(e, SlackApiError) else e.__context__
            if isinstance(refused, SlackApiError):
                raise ConfigError(
                    "environment", "SLACK_BOT_TOKEN", f"Slack refused it ({refused.response.get('error')})"
                ) from None
            raise NsstuckError(
                f"cannot reach the Slack API at {settings.slack_api_url}: {e.__class__.__name__}"
            ) from None
        except OSError as e:
            raise NsstuckError(
                f"cannot reach the Slack API at {settings.slack_api_url}: {e.__class__.__name__}"
            ) from None
        self.app.command("/nsstuck")(self._on_command)
        self.app.event("app_home_opened")(self._on_home_opened)
        self.app.error(self._on_error)
        self.remediation = RemediationDesk(self)
        self.clock = clock_for(deps.settings.clock_file)

    def close(self) -> None:
        self.work.shutdown(wait=True, cancel_futures=False)
        self.posting.shutdown(wait=True, cancel_futures=False)  # after `work`, which hands runs to it
        self.pacer.close()
        self.connections.close()

    def _diagnose(self, target: ClusterTarget, namespace: str) -> DiagnosisResult:
        return diagnose_namespace(target, namespace, connections=self.connections)

    # -- the slash command -----------------------------------------------------------------------

    def _on_command(self, ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        config = self.deps.config
        parsed = parsing.parse(str(command.get("text") or ""), config.cluster_names)
        kind = type(parsed).__name__.lower()
        self.metrics.commands.labels(kind=kind).inc()
        if isinstance(parsed, parsing.Invalid):
            ack(text=parsed.message)
            return
        if isinstance(parsed, parsing.Help):
            ack(text=HELP)
            return
        channel = str(command.get("channel_id") or "")
        if isinstance(parsed, parsing.ListClusters):
            ack(text=self._clusters_text(channel))
            return
        if isinstance(parsed, parsing.History):
            if parsed.cluster:
                allowed = config.require_cluster(parsed.cluster).channels
                if allowed and channel not in allowed:
                    ack(text=f"Cluster {code(parsed.cluster)} cannot be looked at from this channel.")
                    return
            found = history(self.deps.db, cluster=parsed.cluster, namespace=parsed.namespace)
            workspace = history_blocks.workspace_url(str(command.get("team_domain") or "") or None)
            message = history_blocks.history_message(found, workspace=workspace)
            ack(text=message.text, blocks=list(message.blocks))
            return
        cluster = config.require_cluster(parsed.cluster)
        if cluster.channels and channel not in cluster.channels:
            ack(text=f"Cluster {code(cluster.name)} cannot be diagnosed from this channel.")
            return
        ack(text=f"On it: diagnosing {code(parsed.namespace)} on {code(cluster.name)}…")
        user = str(command.get("user_id") or "")
        self.work.submit(self._diagnose_and_post, cluster.name, parsed.namespace, channel, user, respond)

    def _on_home_opened(self, event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") != "home" or not (isinstance(user, str) and USER_ID.fullmatch(user)):
            return
        now = datetime.now(UTC)
        view = blocks.home(
            open_incidents(self.deps.db),
            workspace_url=self._workspace(),
            now_seconds=lambda since: int((now - since).total_seconds()),
            requests=pending_lines(open_requests(self.deps.db)),
        )
        try:
            self.client.views_publish(user_id=user, view=view)
        except SlackApiError as e:  # a user Slack does not know (or no longer): nothing to show them
            log.warning("publishing the Home tab of %s failed: %s", user, e.response.get("error"))

    def _identity(self) -> dict[str, Any]:
        """auth.test's answer (the workspace URL, the bot's ids), asked once."""
        if self._auth is None:
            response = self.client.auth_test()
            self._auth = dict(response.data) if isinstance(response.data, dict) else {}
        return self._auth

    def _workspace(self) -> str:
        return str(self._identity().get("url") or "https://slack.com/")

    def _bot_id(self) -> str | None:
        found = self._identity().get("bot_id")
        return str(found) if found else None

    def _clusters_text(self, channel: str) -> str:
        clusters = self.deps.config.clusters
        if not clusters:
            return "No cluster is registered yet (see the config file's `clusters:`)."
        lines = []
        for cluster in clusters:
            allowed = not cluster.channels or channel in cluster.channels
            lines.append(f"• {code(cluster.name)}" + ("" if allowed else " (not from this channel)"))
        return "Registered clusters:\n" + "\n".join(lines)

    def cluster_target(self, name: str) -> ClusterTarget:
        return ClusterTarget.from_config(self.deps.config.require_cluster(name), self.deps.config_path)

    def run_cluster(self, run_id: int) -> str | None:
        return run_cluster(self.deps.db, run_id)

    def namespace_uid(self, view: RequestView) -> str | None:
        return incident_namespace_uid(self.deps.db, view.incident_id)

    def _remediation_on(self, cluster: str) -> bool:
        found = self.deps.config.cluster(cluster)
        return found is not None and policy.remediation_off(found) is None

    def _diagnose_and_post(self, cluster_name: str, namespace: str, channel: str, user: str, respond: Respond) -> None:
        config = self.deps.config
        target = ClusterTarget.from_config(config.require_cluster(cluster_name), self.deps.config_path)
        with self.metrics.diagnosis_seconds.time():
            try:
                result = self.diagnose(target, namespace)
            except (ClusterUnreachableError, NsstuckError) as e:
                self.metrics.diagnoses.labels(state="error", cause="").inc()
                respond(text=f"Could not diagnose {code(namespace)} on {code(cluster_name)}: {escape(str(e))}")
                return
        diagnosis = result.diagnosis
        self.metrics.diagnoses.labels(state=diagnosis.state.value, cause=diagnosis.cause or "").inc()
        # committed first: if Slack is down now, the outbox job posts it when Slack answers again
        recorded = self._record_durably(result, user=user, channel=channel, respond=respond)
        if recorded is not None:
            self.posting.submit(self.deliver, recorded.run_id)

    def _record_durably(self, result: DiagnosisResult, *, user: str, channel: str, respond: Respond) -> Recorded | None:
        """Record an acknowledged diagnosis, waiting out a database outage (a restart, a fail-over) for up
        to NSSTUCK_DB_OUTAGE_SECONDS; the user is told if it lasts longer. None when it could not be recorded."""
        patience = self.deps.settings.db_outage_seconds
        deadline = time.monotonic() + patience
        pause = 0.25
        told = False
        while True:
            try:
                return record(self.deps.db, result, trigger="slack", requested_by=user, post_channel=channel)
            except Exception as e:  # the database is down or restarting: the result waits in memory
                if time.monotonic() + pause > deadline:
                    log.error(
                        "recording the diagnosis of %s failed for %ss: %s",
                        result.diagnosis.namespace,
                        patience,
                        type(e).__name__,
                    )
                    respond(
                        text=f"The diagnosis of {code(result.diagnosis.namespace)} could not be saved: the database "
                        "has been unavailable for too long. Please run the command again later."
                    )
                    return None
                if not told:
                    log.warning("the database is unavailable (%s); retrying", type(e).__name__)
                    told = True
                time.sleep(pause)
                pause = min(pause * 2, 5.0, max(0.05, deadline - time.monotonic()))

    # -- the outbox ------------------------------------------------------------------------------

    def deliver(self, run_id: int) -> bool:
        """Post a recorded run (verdict, then its report in the incident's thread); True once posted."""
        pending = pending_post(self.deps.db, run_id)
        if pending is None or not claim_post(self.deps.db, run_id, pending.attempts):
            return False  # posted already, or another worker or replica is posting it
        posts: list[Post] = []
        try:
            self._post_run(pending, posts)
        except Exception as e:  # Slack refused or is down: the run stays in the outbox
            log.warning("posting run %s to %s failed (%s); it will be retried", run_id, pending.channel, e)
            self.metrics.posts.labels(result="deferred").inc()
            self._settle_at[run_id] = max((p.settle_at for p in posts if p.in_doubt), default=0.0)
            mark_post_failed(self.deps.db, run_id, f"{e.__class__.__name__}: {e}")
            return False
        self._settle_at.pop(run_id, None)
        mark_posted(self.deps.db, run_id, datetime.now(UTC))
        return True

    def repost_pending(self) -> int:
        """Post every run whose posting failed or never happened, and what else Slack failed to take
        (notes, request messages); the scheduler calls this."""
        delivered = 0
        for run_id in unposted_runs(self.deps.db, now=datetime.now(UTC)):
            delivered += self.deliver(run_id)
        return delivered + self.backlog.retry()

    def _post_run(self, pending: PendingPost, posts: list[Post]) -> None:
        """Each message of a run has a key of its own (run, creation time, part), the same in every
        attempt, in every process: after a failed attempt, the parts that went through are found in
        Slack and not posted again."""
        diagnosis, channel = pending.diagnosis, pending.channel
        created = pending.created_at.timestamp()
        settle_at = None
        if pending.attempts > 0:  # an earlier attempt failed or was cut short: some parts may be in Slack
            settle_at = self._settle_at.get(pending.run_id, self._started + self.poster.settle)

        def send(message: blocks.Message, thread_ts: str | None, part: int) -> Future[dict[str, Any]]:
            key = f"run:{pending.run_id}:{created:.6f}:{part}"
            post = self.poster.prepare(channel, message, thread_ts=thread_ts, key=key, oldest=created)
            if settle_at is not None:
                post.doubt(until=settle_at)
            posts.append(post)
            return self.send(post)

        verdict = blocks.verdict(diagnosis, requested_by=pending.requested_by)
        if pending.incident_id is None:  # active or gone: the verdict says it all
            send(verdict, None, 0).result()
            return
        with self._incident_lock(pending.incident_id):
            existing = current_thread(self.deps.db, pending.incident_id)
            thread = existing[1] if existing and existing[0] == channel else None
            posted = send(verdict, thread, 0).result()
            if thread is None:
                _, thread = attach_thread(self.deps.db, pending.incident_id, channel, str(posted["ts"]))
            run_id = pending.run_id if self._remediation_on(diagnosis.cluster) else None
            messages, cut = blocks.report_parts(diagnosis, run_id=run_id)
            futures = [send(message, thread, part) for part, message in enumerate(messages, 1)]
            if cut:
                futures.append(self.upload_report(channel, thread, diagnosis))
        for future in futures:
            future.result()

    # -- digests ---------------------------------------------------------------------------------

    def digest_tick(self) -> None:
        """Build and post every digest whose time has come (the scheduler calls this)."""
        run_due(self.deps.db, self.deps.config, self.deps.config_path, now=self.clock(), poster=self.post_digest)

    def post_digest(self, digest: Digest) -> str | None:
        def send(channel: str, message: blocks.Message, thread_ts: str | None) -> dict[str, Any]:
            return dict(self.post(channel, message, thread_ts=thread_ts).result())

        return post_digest(send, digest, workspace=self._workspace())

    def thread_note(self, channel: str, thread_ts: str, text: str) -> None:
        """A short follow-up in an incident's thread (the Notifier of the follow-up job); kept and posted
        later if Slack fails for longer than the retries."""
        self.post_kept(channel, blocks.ephemeral(escape(text)), thread_ts=thread_ts)

    def upload_report(self, channel: str, thread_ts: str, diagnosis: Diagnosis) -> Any:
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

    def _incident_lock(self, incident_id: int) -> threading.Lock:
        with self._locks_guard:
            return self._incident_locks.setdefault(incident_id, threading.Lock())

    # -- posting ---------------------------------------------------------------------------------

    def post(self, channel: str, message: blocks.Message, *, thread_ts: str | None = None) -> Any:
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

    def _on_error(self, error: Exception, body: dict[str, Any]) -> BoltResponse:
        log.exception("unhandled error in a listener (type %s)", body.get("type") or body.get("command"))
        return BoltResponse(status=500, body="")
