"""This workspace and this app: every request must be for our app (`api_app_id`) and come from our
installation (its `team_id`, or for an organisation-wide install its `enterprise_id`, any workspace of
it). A signed request can come from elsewhere when the app is installed in more than one workspace,
since they share the signing secret.

Who we are is asked of Slack once, at start-up: `auth.test` gives the installation (and the app's id
where it says it); `bots.info` gives the bot's app otherwise, unless `NSSTUCK_SLACK_APP_ID` says it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt import BoltRequest, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Installation:
    app_id: str
    team_id: str
    enterprise_id: str | None = None
    org_wide: bool = False

    def refusal(self, body: Mapping[str, Any]) -> str | None:
        """Why a request's body is not for this app and installation (None when it is)."""
        app = body.get("api_app_id")
        if app != self.app_id:
            return "another app" if app else "no app"
        team, enterprise = _team_of(body)
        if self.org_wide:
            return None if enterprise == self.enterprise_id else "another organisation"
        return None if team == self.team_id else "another workspace"


def _team_of(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(team_id, enterprise_id) as each kind of payload carries them."""
    team: Any = body.get("team_id")
    if team is None and isinstance(body.get("team"), dict):
        team = body["team"].get("id")
    enterprise: Any = body.get("enterprise_id")
    if enterprise is None and isinstance(body.get("enterprise"), dict):
        enterprise = body["enterprise"].get("id")
    if enterprise is None and isinstance(body.get("team"), dict):
        enterprise = body["team"].get("enterprise_id")
    return (team if isinstance(team, str) else None, enterprise if isinstance(enterprise, str) else None)


def discover(client: WebClient, app_id: str | None) -> Installation:
    """Ours, from auth.test (and bots.info when the app's id is not given nor in auth.test)."""
    try:
        auth = client.auth_test()
        app = app_id or auth.get("app_id")
        if not app and auth.get("bot_id"):
            bot = client.bots_info(bot=str(auth["bot_id"])).get("bot") or {}
            app = bot.get("app_id") if isinstance(bot, dict) else None
    except SlackApiError as e:
        raise ConfigError(
            "environment",
            "NSSTUCK_SLACK_APP_ID",
            f"unset, and Slack would not say which app this is ({e.response.get('error')}); set it to the app's id",
        ) from None
    if not app:
        raise ConfigError("environment", "NSSTUCK_SLACK_APP_ID", "unset, and Slack did not say which app this is")
    org_wide = bool(auth.get("is_enterprise_install"))
    enterprise = auth.get("enterprise_id")
    return Installation(
        app_id=str(app),
        team_id=str(auth.get("team_id") or ""),
        enterprise_id=str(enterprise) if enterprise else None,
        org_wide=org_wide,
    )


def middleware(ours: Installation) -> Callable[..., BoltResponse | None]:
    """A Bolt global middleware refusing (403, nothing run) what is not for this app and installation."""

    def check(req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]) -> BoltResponse:
        why = ours.refusal(req.body if isinstance(req.body, dict) else {})
        if why is not None:
            log.warning("refused a request for %s", why)
            return BoltResponse(status=403, body="")
        return next()

    return check
