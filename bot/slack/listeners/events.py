"""Events: the App Home tab, drawn afresh each time a user opens it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from bot.remediation.requests import open_requests
from bot.services.followup import open_incidents
from bot.slack import blocks
from bot.slack.notifier import SlackNotifier
from bot.slack.remediation_blocks import pending_lines
from bot.slack.shapes import USER_ID
from bot.store.database import Database

log = logging.getLogger(__name__)


class EventListener:
    def __init__(self, *, db: Database, slack: SlackNotifier) -> None:
        self.db = db
        self.slack = slack

    def register(self, app: App) -> None:
        app.event("app_home_opened")(self.on_home_opened)

    def on_home_opened(self, event: dict[str, Any]) -> None:
        user = event.get("user")
        if event.get("tab", "home") != "home" or not (isinstance(user, str) and USER_ID.fullmatch(user)):
            return
        now = datetime.now(UTC)
        view = blocks.home(
            open_incidents(self.db),
            workspace_url=self.slack.workspace(),
            now_seconds=lambda since: int((now - since).total_seconds()),
            requests=pending_lines(open_requests(self.db)),
        )
        try:
            self.slack.client.views_publish(user_id=user, view=view)
        except SlackApiError as e:  # a user Slack does not know (or no longer): nothing to show them
            log.warning("publishing the Home tab of %s failed: %s", user, e.response.get("error"))
