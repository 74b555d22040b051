"""Events: the App Home tab, drawn afresh each time a user opens it, with what that user may see: the
incidents and pending requests of clusters with no channel list, and of clusters with a channel the
user is a member of (`conversations.members`, kept a minute for display; `bot.slack.directory`); on a
cluster with `diagnose_as: requester`, only those of namespaces the user's Kubernetes identity may `get`
(`bot.services.tenancy`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from bot.remediation.requests import open_requests
from bot.services.followup import open_incidents
from bot.services.tenancy import Tenancy
from bot.settings import AppConfig
from bot.slack import blocks
from bot.slack.directory import ChannelMembers
from bot.slack.notifier import SlackNotifier
from bot.slack.remediation_blocks import pending_lines
from bot.slack.shapes import USER_ID
from bot.store.database import Database

log = logging.getLogger(__name__)


class EventListener:
    def __init__(
        self,
        *,
        config: AppConfig,
        db: Database,
        slack: SlackNotifier,
        channels: ChannelMembers,
        tenancy: Tenancy | None = None,
    ) -> None:
        self.tenancy = tenancy
        self.config = config
        self.db = db
        self.slack = slack
        self.channels = channels

    def register(self, app: App) -> None:
        app.event("app_home_opened")(self.on_home_opened)

    def on_home_opened(self, event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") != "home" or not (isinstance(user, str) and USER_ID.fullmatch(user)):
            return
        now = datetime.now(UTC)
        incidents = open_incidents(self.db)
        requests = open_requests(self.db)
        # membership is asked only for the clusters that have something to show
        shown = self.config.clusters_seen_by(
            lambda channel: self.channels.is_member(user, channel),
            among={i.cluster for i in incidents} | {r.cluster for r in requests},
        )
        incidents = [i for i in incidents if i.cluster in shown]
        requests = [r for r in requests if r.cluster in shown]
        if self.tenancy is not None:
            visible = self.tenancy.visible(user)
            incidents = [i for i in incidents if visible(i.cluster, i.namespace)]
            requests = [r for r in requests if visible(r.cluster, r.namespace)]
        view = blocks.home(
            incidents,
            workspace_url=self.slack.workspace(),
            now_seconds=lambda since: int((now - since).total_seconds()),
            requests=pending_lines(requests),
        )
        try:
            self.slack.client.views_publish(user_id=user, view=view)
        except SlackApiError as e:  # a user Slack does not know (or no longer): nothing to show them
            log.warning("publishing the Home tab of %s failed: %s", user, e.response.get("error"))
