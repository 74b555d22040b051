"""``SlackEmulator``: the Web API, the response_url sink, the Socket Mode server and the drivers, together."""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .blockkit import Limits
from .clock import Clock, wall_clock
from .driver import HttpDriver, SocketModeDriver
from .faults import FaultRule, Faults, Journal, JournalEntry
from .payloads import PayloadBuilder
from .ratelimit import RateLimiter
from .render import render_message, render_view
from .socketmode import Ack, SocketModeServer
from .state import JSON, Channel, Identity, State, UploadedFile, User, UserGroup, WebhookPost
from .webapi import WebApiServer

T = TypeVar("T")


class SlackEmulator:
    """An emulated Slack workspace for one test.

    ``emu.api_url`` is the ``base_url`` for ``WebClient``; ``emu.bot_token`` / ``emu.app_token`` are the
    only tokens it accepts; ``emu.http_driver(bot_url)`` and ``emu.socket_mode`` play Slack towards the bot.
    """

    def __init__(
        self,
        *,
        signing_secret: str | None = None,
        bot_token: str | None = None,
        app_token: str | None = None,
        identity: Identity | None = None,
        clock: Clock = wall_clock,
        limiter_clock: Clock | None = None,
        limits: Limits | None = None,
        post_message_rate: float = 1.0,
        post_message_burst: int = 10,
        single_use_tickets: bool = True,
        port: int = 0,
    ) -> None:
        self.signing_secret = signing_secret or secrets.token_hex(16)
        self.bot_token = bot_token or "xoxb-111-222-" + secrets.token_hex(12)
        self.app_token = app_token or "xapp-1-A111-333-" + secrets.token_hex(16)
        if not self.bot_token.startswith("xoxb-") or not self.app_token.startswith("xapp-"):
            raise ValueError("the bot token must start with xoxb- and the app token with xapp-")
        self.identity = identity or Identity()
        self.clock = clock
        self.limits = limits or Limits()
        self.state = State(self.identity, clock, self.limits)
        self.journal = Journal()
        self.faults = Faults()
        self.limiter = RateLimiter(limiter_clock or clock)
        self.limiter.set_rule("chat.postMessage", per_second=post_message_rate, burst=post_message_burst)
        self.payloads = PayloadBuilder(self.state)
        self.web = WebApiServer(
            self.state,
            tokens={self.bot_token: "bot", self.app_token: "app"},
            journal=self.journal,
            faults=self.faults,
            limiter=self.limiter,
            port=port,
        )
        self.socket = SocketModeServer(
            app_id=self.identity.app_id, single_use_tickets=single_use_tickets, on_ack=self._on_socket_ack
        )
        self.socket_mode = SocketModeDriver(self.payloads, self.socket)
        self.state.issue_socket_url = self.socket.issue_url
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> SlackEmulator:
        self.web.start()
        self.socket.start()
        self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self.socket.stop()
            self.web.stop()
            self._started = False

    def __enter__(self) -> SlackEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return self.web.url

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:P/api/`` — give this to ``WebClient(base_url=...)``."""
        return self.web.url + "/api/"

    @property
    def socket_url(self) -> str:
        return self.socket.url

    def _on_socket_ack(self, envelope: dict[str, Any], ack: Ack) -> None:
        if envelope.get("type") in ("slash_commands", "interactive"):
            self.payloads.apply_ack(envelope["payload"], ack.payload)

    # ------------------------------------------------------------ directory

    def add_user(self, user_id: str, name: str, *, real_name: str = "", email: str | None = None, **kw: Any) -> User:
        return self.state.add_user(User(user_id, name, real_name=real_name, email=email, **kw))

    def add_channel(
        self, channel_id: str, name: str, *, members: list[str] | None = None, bot_is_member: bool = True, **kw: Any
    ) -> Channel:
        return self.state.add_channel(
            Channel(channel_id, name, members=list(members or []), bot_is_member=bot_is_member, **kw)
        )

    def add_usergroup(
        self, group_id: str, handle: str, users: list[str], *, name: str = "", disabled: bool = False
    ) -> UserGroup:
        return self.state.add_usergroup(UserGroup(group_id, handle, name or handle, list(users), disabled))

    def channel(self, channel_id: str) -> Channel:
        return self.state.channels[channel_id]

    def revoke_token(self, token: str) -> None:
        """Later calls with ``token`` get ``token_revoked``."""
        self.web.revoked.add(token)

    # ---------------------------------------------------------- faults etc.

    def inject(
        self,
        method: str,
        error: str | None = None,
        *,
        http_status: int = 200,
        retry_after: int | None = None,
        times: int | None = 1,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        when: Callable[[dict[str, Any]], bool] | None = None,
        reset_connection: bool = False,
    ) -> FaultRule:
        """The next ``times`` calls of ``method`` (``"*"``: any) fail.

        ``http_status=429`` defaults the error to ``ratelimited`` and ``Retry-After`` to 1; otherwise the error
        defaults to ``internal_error``, sent with the status given.
        """
        return self.faults.add(
            FaultRule(
                method=method,
                error=error,
                http_status=http_status,
                retry_after=retry_after,
                times=times,
                body=body,
                headers=dict(headers or {}),
                when=when,
                reset_connection=reset_connection,
            )
        )

    def set_latency(self, method: str, seconds: float) -> None:
        """Delay every call of ``method`` (``"*"``: any without its own setting) by ``seconds``."""
        self.faults.set_latency(method, seconds)

    def set_rate_limit(self, method: str, *, per_second: float, burst: int = 1, per_channel: bool = True) -> None:
        self.limiter.set_rule(method, per_second=per_second, burst=burst, per_channel=per_channel)

    def calls(self, method: str | None = None) -> list[JournalEntry]:
        """The journal: every request received (``method`` filters; "webhook"/"upload" for those endpoints)."""
        return self.journal.entries(method)

    @property
    def server_errors(self) -> list[str]:
        """Tracebacks of emulator bugs (answered 500). A test can assert this is empty."""
        return list(self.web.errors)

    # ------------------------------------------------------- what users see

    def channel_messages(self, channel: str) -> list[JSON]:
        """Top-level messages of the channel (and thread replies broadcast to it), oldest first."""
        return self.state.channel_messages(self.state.resolve_channel(channel).id)

    def thread(self, channel: str, ts: str) -> list[JSON]:
        """The replies in the thread of ``ts`` (the parent not included), oldest first."""
        return self.state.thread(self.state.resolve_channel(channel).id, ts)

    def message(self, channel: str, ts: str) -> JSON | None:
        found = self.state.find_message(self.state.resolve_channel(channel).id, ts)
        return copy.deepcopy(found) if found is not None else None

    def ephemerals(self, channel: str, user: str) -> list[JSON]:
        """Ephemeral messages ``user`` saw in the channel (chat.postEphemeral, command replies, response_url)."""
        return self.state.ephemerals(self.state.resolve_channel(channel).id, user)

    def home_view(self, user: str) -> JSON | None:
        return self.state.home_view(user)

    def modal_stack(self, user: str) -> list[JSON]:
        """The modals open for ``user``, bottom first (empty when none is open)."""
        return self.state.modal_stack(user)

    def view(self, view_id: str) -> JSON | None:
        found = self.state.find_view(view_id)
        return copy.deepcopy(found) if found is not None else None

    def view_errors(self, view_id: str) -> JSON:
        """The ``errors`` of the last ``response_action: errors`` ack for the view (what the modal shows)."""
        with self.state.lock:
            return dict(self.state.view_errors.get(view_id, {}))

    def updates(self, channel: str | None = None) -> list[Any]:
        with self.state.lock:
            return [u for u in self.state.updates if channel is None or u.channel == channel]

    def webhook_posts(self) -> list[WebhookPost]:
        with self.state.lock:
            return list(self.state.webhook_posts)

    def files(self) -> list[UploadedFile]:
        with self.state.lock:
            return list(self.state.files.values())

    @staticmethod
    def render(message: JSON) -> str:
        return render_message(message)

    @staticmethod
    def render_view(view: JSON) -> str:
        return render_view(view)

    def channel_text(self, channel: str) -> list[str]:
        return [render_message(m) for m in self.channel_messages(channel)]

    def thread_text(self, channel: str, ts: str) -> list[str]:
        return [render_message(m) for m in self.thread(channel, ts)]

    def wait_for(self, predicate: Callable[[], T | None], timeout: float = 5.0, *, message: str = "") -> T:
        """Re-evaluates ``predicate`` whenever the workspace changes (and every 50 ms) until it returns a truthy
        value, which is returned. Raises AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        state = self.state
        while True:
            with state.lock:
                seen = state.version
            result = predicate()  # evaluated without the lock: it may call the emulator over HTTP
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(message or f"condition not met within {timeout}s")
            with state.changed:
                if state.version == seen:
                    state.changed.wait(min(remaining, 0.05))

    def wait_for_message(
        self, channel: str, contains: str = "", *, thread_ts: str | None = None, timeout: float = 5.0
    ) -> JSON:
        """The first message (in the channel, or the thread of ``thread_ts``) whose rendering contains ``contains``."""

        def find() -> JSON | None:
            messages = self.thread(channel, thread_ts) if thread_ts else self.channel_messages(channel)
            for msg in messages:
                if contains in render_message(msg):
                    return msg
            return None

        where = f"thread {thread_ts} of {channel}" if thread_ts else channel
        return self.wait_for(find, timeout, message=f"no message containing {contains!r} in {where} within {timeout}s")

    def wait_for_ephemeral(self, channel: str, user: str, contains: str = "", *, timeout: float = 5.0) -> JSON:
        def find() -> JSON | None:
            for msg in self.ephemerals(channel, user):
                if contains in render_message(msg):
                    return msg
            return None

        return self.wait_for(find, timeout, message=f"no ephemeral containing {contains!r} for {user} in {channel}")

    def wait_for_calls(self, method: str, count: int = 1, timeout: float = 5.0) -> list[JournalEntry]:
        def enough() -> list[JournalEntry] | None:
            calls = self.calls(method)
            return calls if len(calls) >= count else None

        return self.wait_for(
            enough,
            timeout,
            message=f"fewer than {count} call(s) of {method} within {timeout}s",
        )

    # --------------------------------------------------------------- drivers

    def http_driver(self, bot_url: str, *, timeout: float = 10.0, apply_acks: bool = True) -> HttpDriver:
        """Plays Slack towards a bot served over HTTP at ``bot_url``, signing with ``self.signing_secret``."""
        return HttpDriver(
            self.payloads, bot_url, signing_secret=self.signing_secret, timeout=timeout, apply_acks=apply_acks
        )

    def issue_trigger(self, user: str) -> str:
        return self.state.issue_trigger(user)

    def post_user_message(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> JSON:
        """A person writes in the channel (or thread); no event is sent — see ``payloads.app_mention``."""
        return self.payloads.user_message(channel, text, user=user, thread_ts=thread_ts)
