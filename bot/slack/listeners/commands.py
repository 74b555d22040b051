"""The /nsstuck slash command: help, the clusters, history, and a diagnosis.

It acknowledges at once (Slack allows 3 s, and a cluster may take longer) and hands the diagnosis to
the answering use case, which records it before anything is posted, so that a Slack outage loses
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, Respond

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError
from bot.logs import bind, log_context
from bot.services.answering import Answering, DiagnosisQueueFull
from bot.services.clusterchecking import ClusterChecks, ClustersCheck, summary_lines
from bot.services.history import MAX_LIMIT, history, narrowed
from bot.services.limiting import CommandLimits
from bot.services.metrics import Metrics
from bot.services.tenancy import Tenancy
from bot.settings import AppConfig, ClusterConfig
from bot.slack import history_blocks, parsing
from bot.slack.text import code, escape
from bot.store.database import Database

log = logging.getLogger(__name__)


class _Asker:
    """Tells the person who typed the command (only them), through the command's response_url."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond

    def could_not_diagnose(self, cluster: ClusterName, namespace: str, error: NsstuckError) -> None:
        self.respond(text=f"Could not diagnose {code(namespace)} on {code(cluster)}: {escape(str(error))}")

    def could_not_save(self, namespace: str, why: str) -> None:
        said = f"The diagnosis of {code(namespace)} could not be saved: {why}. Please run the command again later."
        self.respond(text=said)


class CommandListener:
    def __init__(
        self,
        *,
        config: AppConfig,
        db: Database,
        metrics: Metrics,
        answering: Answering,
        limits: CommandLimits,
        cluster_checks: ClusterChecks | None = None,
        tenancy: Tenancy | None = None,
    ) -> None:
        self.tenancy = tenancy
        self.cluster_checks = cluster_checks
        self.config = config
        self.db = db
        self.metrics = metrics
        self.answering = answering
        self.limits = limits

    def register(self, app: App) -> None:
        app.command("/nsstuck")(self.on_command)

    def on_command(self, ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        with log_context(slack_user=str(command.get("user_id") or "")):
            self._on_command(ack, command, respond)

    def _on_command(self, ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        config = self.config
        channel = str(command.get("channel_id") or "")
        # an unknown name is answered with the clusters this channel may use, never those of other channels
        parsed = parsing.parse(str(command.get("text") or ""), config.cluster_names, config.clusters_in(channel))
        kind = type(parsed).__name__.lower()
        self.metrics.commands.labels(kind=kind).inc()
        user = str(command.get("user_id") or "")
        bind(cluster=getattr(parsed, "cluster", None), namespace=getattr(parsed, "namespace", None))
        log.info("command /nsstuck (%s) in channel %s", kind, str(command.get("channel_id") or "?"))
        over = self.limits.refusal(user, str(command.get("channel_id") or ""))
        if over is not None:
            self.metrics.commands_refused.labels(reason=f"{over}_rate").inc()
            who = "you have" if over == "user" else "this channel has"
            ack(text=f"Slow down: {who} sent more `/nsstuck` commands this minute than allowed. Try again shortly.")
            return
        if isinstance(parsed, parsing.Invalid):
            ack(text=parsed.message)
            return
        if isinstance(parsed, parsing.Help):
            ack(text=parsing.HELP)
            return
        if isinstance(parsed, parsing.ListClusters):
            self._clusters(channel, ack, respond)
            return
        # a cluster named here is one this channel may use: parsing answers any other as unknown (issue 36)
        if isinstance(parsed, parsing.History):
            # without a cluster: only those this channel may use (not those of other channels, nor
            # clusters no longer registered)
            within = None if parsed.cluster else config.clusters_in(channel)
            found = history(self.db, cluster=parsed.cluster, namespace=parsed.namespace, within=within)
            if self.tenancy is not None and any(self.tenancy.applies(i.cluster) for i in found.incidents):
                # a cluster that answers people as themselves: only the incidents of namespaces they may get
                visible = self.tenancy.visible(user)
                wider = history(
                    self.db, cluster=parsed.cluster, namespace=parsed.namespace, within=within, limit=MAX_LIMIT
                )
                found = narrowed(wider, visible, limit=found.filters.limit)
            workspace = history_blocks.workspace_url(str(command.get("team_domain") or "") or None)
            message = history_blocks.history_message(found, workspace=workspace)
            # links to the incidents' threads: no preview of each
            ack(text=message.text, blocks=list(message.blocks), unfurl_links=False, unfurl_media=False)
            return
        cluster = config.require_cluster(parsed.cluster)
        if self.tenancy is not None and cluster.as_requester:
            # asked of the cluster before anything is diagnosed: the acknowledgement cannot wait for it
            ack(text=f"Checking that you may see {code(parsed.namespace)} on {code(cluster.name)}…")
            refusal = self.tenancy.refusal(cluster.name, parsed.namespace, user)
            if refusal is not None:
                self.metrics.commands_refused.labels(reason="requester").inc()
                log.info("refused: the requester may not get the namespace, or has no identity")
                respond(text=refusal)  # only to them (response_url, ephemeral)
                return
            # acknowledged already: what follows is said through response_url
            self._diagnose(cluster, parsed.namespace, channel=channel, user=user, say=respond, respond=respond)
            return
        self._diagnose(cluster, parsed.namespace, channel=channel, user=user, say=ack, respond=respond)

    def _diagnose(
        self,
        cluster: ClusterConfig,
        namespace: str,
        *,
        channel: str,
        user: str,
        say: Callable[..., Any],
        respond: Respond,
    ) -> None:
        """Queue the diagnosis, and `say` (the acknowledgement, or response_url once acknowledged) that it is
        under way or that too many are waiting; its answer reaches the asker through `respond`."""
        try:
            self.answering.submit(cluster.cluster_name, namespace, channel=channel, user=user, asker=_Asker(respond))
        except DiagnosisQueueFull:
            self.metrics.commands_refused.labels(reason="queue_full").inc()
            say(text="Too many diagnoses are waiting right now; try again in a minute.")
            return
        say(text=f"On it: diagnosing {code(namespace)} on {code(cluster.name)}…")

    def _clusters(self, channel: str, ack: Ack, respond: Respond) -> None:
        """The clusters this channel may use; each one checked (as `nsstuck clusters check`) in the
        background, the summary sent to the caller only."""
        if not self.config.clusters:
            ack(text="No cluster is registered yet (see the config file's `clusters:`).")
            return
        names = self.config.clusters_in(channel)
        if not names:
            ack(text="No registered cluster may be used from this channel.")
            return
        listing = ", ".join(code(name) for name in names)
        if self.cluster_checks is None:
            ack(text=f"Clusters you can name here: {listing}")
            return
        ack(text=f"Clusters you can name here: {listing}. Checking each (reachability, identity, permissions)…")

        def done(report: ClustersCheck) -> None:
            respond(text=clusters_text(report))

        self.cluster_checks.submit(names, done)


def clusters_text(report: ClustersCheck) -> str:
    """The summary of `nsstuck clusters check`, for Slack (mrkdwn, escaped)."""
    state = {0: "all good", 1: "a permission is missing", 3: "a cluster is unreachable"}[report.exit_code]
    blocks = ["\n".join(escape(line) for line in summary_lines(check)) for check in report.clusters]
    return f"*Clusters check: {state}*\n```" + "\n".join(blocks) + "```"
