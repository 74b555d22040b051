"""The Slack door: a thin Bolt app factory. The listeners (one module per kind of request) call the use
cases; everything nsstuck posts goes through the notifier (`bot.slack.notifier`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from slack_bolt import App, BoltResponse
from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError

from bot.errors import ConfigError, NsstuckError
from bot.logs import carrying
from bot.services.answering import Answering
from bot.services.clusterchecking import ClusterChecks
from bot.services.limiting import CommandLimits
from bot.services.metrics import Metrics
from bot.services.pools import StartedPool
from bot.services.remediating import Remediation
from bot.services.tenancy import Tenancy
from bot.settings import AppConfig, Settings
from bot.slack import installation
from bot.slack.directory import ChannelMembers, GroupDirectory
from bot.slack.listeners.actions import ActionListener
from bot.slack.listeners.commands import CommandListener
from bot.slack.listeners.events import EventListener
from bot.slack.notifier import SlackNotifier
from bot.slack.people import People
from bot.store.database import Database

log = logging.getLogger(__name__)


@dataclass
class SlackDoor:
    """What the HTTP server and Socket Mode serve: the Bolt app, and what its requests need."""

    app: App
    settings: Settings
    db: Database
    metrics: Metrics
    closing: Sequence[Callable[[], None]] = field(default=())

    def close(self) -> None:
        """Stop what the door's work runs on, in order (diagnoses before the posts they hand on)."""
        for close in self.closing:
            close()


def create_app(
    *,
    settings: Settings,
    config: AppConfig,
    db: Database,
    metrics: Metrics,
    slack: SlackNotifier,
    answering: Answering,
    remediation: Remediation,
    cluster_checks: ClusterChecks | None = None,
    closing: Sequence[Callable[[], None]] = (),
    tenancy: Tenancy | None = None,
) -> SlackDoor:
    """The Bolt app with every listener registered. Bolt calls auth.test here: a bad token or an
    unreachable Slack fails now, clearly (ConfigError or NsstuckError)."""
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
    try:
        app = App(
            client=slack.client,
            signing_secret=secret,
            listener_executor=_ContextExecutor(max_workers=32, thread_name_prefix="nsstuck-listener"),
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
        raise NsstuckError(f"cannot reach the Slack API at {settings.slack_api_url}: {e.__class__.__name__}") from None
    except OSError as e:
        raise NsstuckError(f"cannot reach the Slack API at {settings.slack_api_url}: {e.__class__.__name__}") from None
    try:
        ours = installation.discover(slack.client, settings.slack_app_id)
    except OSError as e:
        raise NsstuckError(f"cannot reach the Slack API at {settings.slack_api_url}: {e.__class__.__name__}") from None
    log.info("serving app %s of %s", ours.app_id, ours.enterprise_id if ours.org_wide else ours.team_id)
    app.use(installation.middleware(ours))
    limits = CommandLimits(
        user_per_minute=settings.user_commands_per_minute, channel_per_minute=settings.channel_commands_per_minute
    )
    CommandListener(
        config=config,
        db=db,
        metrics=metrics,
        answering=answering,
        limits=limits,
        cluster_checks=cluster_checks,
        tenancy=tenancy,
    ).register(app)
    EventListener(db=db, config=config, slack=slack, channels=ChannelMembers(slack.client), tenancy=tenancy).register(
        app
    )
    ActionListener(
        remediation=remediation, slack=slack, directory=GroupDirectory(slack.client), people=People(slack.client, ours)
    ).register(app)
    app.error(_on_error)
    return SlackDoor(app=app, settings=settings, db=db, metrics=metrics, closing=closing)


class _ContextExecutor(StartedPool):
    """Bolt's listener pool, running each listener in the log context of the request that called it
    (its sender), so the lines Bolt and the listeners log there carry it. Its threads are started
    with it, so that a burst of commands is not handed over one thread start at a time."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(carrying(fn), *args, **kwargs)


def _on_error(error: Exception, body: dict[str, Any]) -> BoltResponse:
    log.exception("unhandled error in a listener (type %s)", body.get("type") or body.get("command"))
    return BoltResponse(status=500, body="")
