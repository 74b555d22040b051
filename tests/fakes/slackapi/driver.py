"""Drivers that play Slack towards the bot: over HTTP (signed requests) or over Socket Mode (envelopes).

Both have the same verbs (``slash_command``, ``click``, ``click_in_view``, ``submit_view``, ``event``,
``app_mention``) and apply the bot's ack the way Slack would (a slash command's reply becomes an ephemeral
or in-channel message; a view_submission's ``response_action`` changes the modal).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

from .payloads import PayloadBuilder, parse_ack_body
from .socketmode import Ack, SocketConnection, SocketModeServer

Signing = Literal["valid", "forged", "stale", "future", "unsigned", "tampered"]
STALE_SECONDS = 400


def slack_signature(signing_secret: str, timestamp: str, body: str) -> str:
    """``v0=`` + HMAC-SHA256 over ``v0:{timestamp}:{raw body}``, as Slack signs requests."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class SignedRequest:
    url: str
    body: str
    headers: dict[str, str]
    payload: dict[str, Any]  # the logical payload (form fields or JSON object)
    kind: str  # "command", "interactive", "event", "raw"


@dataclass
class Delivery:
    """The bot's answer to one request."""

    status: int
    body: str
    headers: dict[str, str]
    elapsed: float
    request: SignedRequest
    error: str | None = None  # set when the connection failed (status is then 0)
    extra: dict[str, Any] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        for name, value in self.headers.items():
            if name.lower() == "content-type":
                return value
        return ""


class HttpDriver:
    """Sends Slack's HTTP requests to the bot at ``url`` (e.g. ``http://127.0.0.1:P/slack/events``)."""

    def __init__(
        self,
        builder: PayloadBuilder,
        url: str,
        *,
        signing_secret: str,
        timeout: float = 10.0,
        apply_acks: bool = True,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.builder = builder
        self.url = url
        self.signing_secret = signing_secret
        self.timeout = timeout
        self.apply_acks = apply_acks
        self.now = now  # the bot checks timestamps against its own clock: real time, not the emulator's
        self.deliveries: list[Delivery] = []
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # ---------------------------------------------------------------- signing

    def sign(
        self,
        body: str,
        content_type: str,
        *,
        signing: Signing = "valid",
        payload: dict[str, Any] | None = None,
        kind: str = "raw",
        extra_headers: dict[str, str] | None = None,
    ) -> SignedRequest:
        now = int(self.now())
        timestamp = {"stale": now - STALE_SECONDS, "future": now + STALE_SECONDS}.get(signing, now)
        headers = {"Content-Type": content_type}
        if signing != "unsigned":
            secret = "forged-" + self.signing_secret if signing == "forged" else self.signing_secret
            headers["X-Slack-Request-Timestamp"] = str(timestamp)
            headers["X-Slack-Signature"] = slack_signature(secret, str(timestamp), body)
        if signing == "tampered":
            body = body + "&x=1" if content_type.startswith("application/x-www-form-urlencoded") else body + " "
        headers.update(extra_headers or {})
        return SignedRequest(self.url, body, headers, payload or {}, kind)

    def send(self, request: SignedRequest) -> Delivery:
        req = urllib.request.Request(request.url, data=request.body.encode(), headers=request.headers, method="POST")
        started = time.perf_counter()
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                status, text, headers = resp.status, resp.read().decode("utf-8", errors="replace"), dict(resp.headers)
            error = None
        except urllib.error.HTTPError as exc:
            status, text, headers = exc.code, exc.read().decode("utf-8", errors="replace"), dict(exc.headers)
            error = None
        except (urllib.error.URLError, OSError) as exc:
            status, text, headers, error = 0, "", {}, str(exc)
        delivery = Delivery(status, text, headers, time.perf_counter() - started, request, error)
        self.deliveries.append(delivery)
        if self.apply_acks and status == 200 and request.kind in ("command", "interactive"):
            self.builder.apply_ack(request.payload, parse_ack_body(delivery.content_type, text))
        return delivery

    def replay(self, previous: Delivery | SignedRequest) -> Delivery:
        """Sends exactly the same bytes and headers again (a replay attack, or a duplicate delivery)."""
        request = previous.request if isinstance(previous, Delivery) else previous
        return self.send(request)

    def resend(self, previous: Delivery | SignedRequest, *, extra_headers: dict[str, str] | None = None) -> Delivery:
        """Sends the same body again, signed anew with a later timestamp: what Slack does when it retries
        an event, and what a click on a stale rendering of a message amounts to (not a replay)."""
        request = previous.request if isinstance(previous, Delivery) else previous
        headers = {k: v for k, v in request.headers.items() if not k.lower().startswith("x-slack-")}
        before = int(request.headers.get("X-Slack-Request-Timestamp", "0"))
        timestamp = str(max(int(self.now()), before + 1))
        headers["X-Slack-Request-Timestamp"] = timestamp
        headers["X-Slack-Signature"] = slack_signature(self.signing_secret, timestamp, request.body)
        headers.update(extra_headers or {})
        return self.send(SignedRequest(request.url, request.body, headers, request.payload, request.kind))

    def post_form(self, fields: dict[str, str], *, signing: Signing = "valid", kind: str = "raw") -> Delivery:
        body = urlencode(fields)
        return self.send(
            self.sign(body, "application/x-www-form-urlencoded", signing=signing, payload=fields, kind=kind)
        )

    def post_json(
        self,
        obj: dict[str, Any],
        *,
        signing: Signing = "valid",
        kind: str = "raw",
        extra_headers: dict[str, str] | None = None,
    ) -> Delivery:
        body = json.dumps(obj)
        return self.send(
            self.sign(body, "application/json", signing=signing, payload=obj, kind=kind, extra_headers=extra_headers)
        )

    # ------------------------------------------------------------------ verbs

    def slash_command(
        self, command: str, text: str = "", *, user: str, channel: str, signing: Signing = "valid"
    ) -> Delivery:
        fields = self.builder.slash_command(command, text, user=user, channel=channel)
        return self.post_form(fields, signing=signing, kind="command")

    def interactive(self, payload: dict[str, Any], *, signing: Signing = "valid") -> Delivery:
        """Any interactivity payload, sent as Slack does: form-encoded ``payload=<json>``."""
        body = urlencode({"payload": json.dumps(payload)})
        return self.send(
            self.sign(body, "application/x-www-form-urlencoded", signing=signing, payload=payload, kind="interactive")
        )

    def click(
        self,
        channel: str,
        message_ts: str,
        action_id: str,
        *,
        user: str,
        block_id: str | None = None,
        value: Any = None,
        signing: Signing = "valid",
    ) -> Delivery:
        payload = self.builder.block_actions(channel, message_ts, action_id, user=user, block_id=block_id, value=value)
        return self.interactive(payload, signing=signing)

    def click_in_view(
        self, view_id: str, action_id: str, *, user: str, block_id: str | None = None, value: Any = None
    ) -> Delivery:
        return self.interactive(
            self.builder.view_block_actions(view_id, action_id, user=user, block_id=block_id, value=value)
        )

    def submit_view(
        self, view_id: str, values: dict[str, dict[str, Any]] | None = None, *, user: str, signing: Signing = "valid"
    ) -> Delivery:
        return self.interactive(self.builder.view_submission(view_id, values, user=user), signing=signing)

    def event(
        self,
        payload: dict[str, Any],
        *,
        retry_num: int | None = None,
        retry_reason: str | None = None,
        signing: Signing = "valid",
    ) -> Delivery:
        """An Events API callback (JSON body); ``retry_num``/``retry_reason`` add ``X-Slack-Retry-*`` headers."""
        headers = {}
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
        return self.post_json(payload, signing=signing, kind="event", extra_headers=headers)

    def app_mention(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> Delivery:
        return self.event(self.builder.app_mention(channel, text, user=user, thread_ts=thread_ts))

    def url_verification(self, challenge: str = "emulator-challenge", *, signing: Signing = "valid") -> Delivery:
        return self.post_json(
            {"token": self.builder.ident.verification_token, "challenge": challenge, "type": "url_verification"},
            signing=signing,
        )

    def ssl_check(self) -> Delivery:
        return self.post_form({"ssl_check": "1", "token": self.builder.ident.verification_token}, signing="unsigned")


class SocketModeDriver:
    """The same verbs as ``HttpDriver``, delivered as Socket Mode envelopes; each returns the client's ``Ack``."""

    def __init__(self, builder: PayloadBuilder, server: SocketModeServer, *, timeout: float = 3.0) -> None:
        self.builder = builder
        self.server = server
        self.timeout = timeout

    def _send(self, kind: str, payload: dict[str, Any], timeout: float | None, **kwargs: Any) -> Ack:
        return self.server.request(kind, payload, timeout=self.timeout if timeout is None else timeout, **kwargs)

    def slash_command(
        self,
        command: str,
        text: str = "",
        *,
        user: str,
        channel: str,
        timeout: float | None = None,
        connection: SocketConnection | int | None = None,
    ) -> Ack:
        """On `connection`, or the newest open one."""
        payload = dict(self.builder.slash_command(command, text, user=user, channel=channel))
        return self._send("slash_commands", payload, timeout, connection=connection)

    def click(
        self,
        channel: str,
        message_ts: str,
        action_id: str,
        *,
        user: str,
        block_id: str | None = None,
        value: Any = None,
        timeout: float | None = None,
    ) -> Ack:
        payload = self.builder.block_actions(channel, message_ts, action_id, user=user, block_id=block_id, value=value)
        return self._send("interactive", payload, timeout)

    def click_in_view(
        self, view_id: str, action_id: str, *, user: str, block_id: str | None = None, value: Any = None
    ) -> Ack:
        payload = self.builder.view_block_actions(view_id, action_id, user=user, block_id=block_id, value=value)
        return self._send("interactive", payload, None)

    def submit_view(
        self, view_id: str, values: dict[str, dict[str, Any]] | None = None, *, user: str, timeout: float | None = None
    ) -> Ack:
        return self._send("interactive", self.builder.view_submission(view_id, values, user=user), timeout)

    def event(
        self,
        payload: dict[str, Any],
        *,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
        timeout: float | None = None,
    ) -> Ack:
        return self._send("events_api", payload, timeout, retry_attempt=retry_attempt, retry_reason=retry_reason)

    def app_mention(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> Ack:
        return self.event(self.builder.app_mention(channel, text, user=user, thread_ts=thread_ts))
