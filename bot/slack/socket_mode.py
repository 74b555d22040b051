"""Socket Mode with connections that are replaced at once and dead ones noticed within seconds.

Bolt's default handler runs slack_sdk's builtin client, which has two slow spots (measured in
bench/socket.py, tested in tests/slack/test_socket_switching.py):

- a connection cut without a close frame (a NAT timeout, a dead peer) is noticed only when no pong
  came for more than four ping intervals, checked once per interval: 40 to 57 s with Bolt's 10 s;
- when Slack asks for a new connection (`disconnect`, `refresh_requested`), the client opens the new
  one, then closes the old one *before* using the new one; that close waits for the old connection's
  blocking read (up to 3 s), and meanwhile nothing on the new connection is read or acknowledged:
  a command arriving then is acknowledged late, past Slack's 3 s.

`SwitchingClient` makes the new connection the current one as soon as its handshake is done, and
retires the old one in the background (its socket shut down so that its read returns at once). Its
monitor pings every `ping_interval` and replaces a connection that has not answered for `stale_after`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode.base_handler import BaseSocketModeHandler
from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.builtin.connection import Connection, ConnectionState
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.logs import log_context
from bot.slack import shapes

log = logging.getLogger(__name__)

# the envelopes that carry a request to acknowledge (the others: hello, disconnect)
_ENVELOPE_TYPES = frozenset({"slash_commands", "interactive", "events_api"})

# a retired connection's read ends in an error by design; that is not worth an error in the log
_retired_log = logging.getLogger("nsstuck.socket_mode.retired")
_retired_log.addHandler(logging.NullHandler())
_retired_log.propagate = False


class SwitchingClient(SocketModeClient):
    """The builtin Socket Mode client, switching connections without a pause and detecting dead ones."""

    def __init__(self, *, stale_after: float, **kwargs: Any) -> None:
        self.stale_after = stale_after
        self._opened_at = time.time()
        super().__init__(**kwargs)

    def connect(self) -> None:
        """Open a connection to `wss_uri` (a new URL if none), make it current, retire the previous one."""
        old_session, old_state = self.current_session, self.current_session_state
        if self.wss_uri is None:
            self.wss_uri = self.issue_new_wss_url()
        session = Connection(
            url=self.wss_uri,
            logger=self.logger,
            ping_interval=self.ping_interval,
            trace_enabled=self.trace_enabled,
            all_message_trace_enabled=self.all_message_trace_enabled,
            ping_pong_trace_enabled=self.ping_pong_trace_enabled,
            receive_buffer_size=self.receive_buffer_size,
            proxy=self.proxy,
            proxy_headers=self.proxy_headers,
            on_message_listener=self._on_message,
            on_error_listener=self._on_error,
            on_close_listener=self._on_close,
            ssl_context=self.web_client.ssl,
        )
        session.connect()  # a failed handshake leaves it inactive: the monitor then tries again
        # the new connection first: from here on acknowledgements go out on it and its frames are read
        self.current_session = session
        self.current_session_state = ConnectionState()  # type: ignore[no-untyped-call]
        self._opened_at = time.time()
        self.auto_reconnect_enabled = self.default_auto_reconnect_enabled
        if old_state is not None:
            old_state.terminated = True
        if old_session is not None and old_session is not session:
            _retire(old_session)
        if not self.current_app_monitor_started:
            self.current_app_monitor_started = True
            self.current_app_monitor.start()
        log.info("Socket Mode connection %s open", session.session_id)

    def enqueue_message(self, message: str) -> None:
        """Only JSON objects go on to the listeners: the builtin client logs a traceback for any other
        frame (and would hand a wrong-typed envelope to Bolt). Anything else is dropped with one line."""
        try:
            frame = json.loads(message)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            log.warning("Socket Mode: ignored a frame that is not an envelope (%d characters)", len(message))
            return
        kind, envelope_id = frame.get("type", ""), frame.get("envelope_id")
        envelope = isinstance(kind, str) and kind in _ENVELOPE_TYPES
        request_like = envelope or "envelope_id" in frame or "payload" in frame
        well_formed = isinstance(kind, str) and (
            not request_like
            or (
                envelope
                and isinstance(envelope_id, str)
                and isinstance(frame.get("payload"), dict)
                and isinstance(frame.get("accepts_response_payload", False), bool)
            )
        )
        if not well_formed:
            log.warning("Socket Mode: ignored a frame of a wrong shape (%d characters)", len(message))
            if isinstance(envelope_id, str) and 0 < len(envelope_id) <= 200:
                # acknowledged all the same, so that it is not sent again
                with contextlib.suppress(Exception):
                    self.send_message(json.dumps({"envelope_id": envelope_id}))
            return
        super().enqueue_message(message)

    def _monitor_current_session(self) -> None:
        """Every ping interval: replace a connection silent for `stale_after`, else the builtin checks."""
        session = self.current_session
        watching = self.current_app_monitor_started and self.auto_reconnect_enabled
        if watching and session is not None and session.is_active():
            silent = time.time() - (session.last_ping_pong_time or self._opened_at)
            if silent > self.stale_after:
                log.warning("Socket Mode connection %s silent for %.1fs: replacing it", session.session_id, silent)
                try:
                    self.connect_to_new_endpoint(force=True)
                except Exception as e:  # Slack unreachable: the next check tries again
                    log.warning("Socket Mode: no new connection yet (%s)", type(e).__name__)
                return
        super()._monitor_current_session()  # type: ignore[no-untyped-call]


def _retire(session: Connection) -> None:
    """Stop reading a replaced connection at once and close it in the background."""
    session.on_message_listener = None
    session.on_error_listener = None
    session.on_close_listener = None
    session.logger = _retired_log
    sock = session.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            # the plain socket's shutdown (also under TLS): wakes the blocked read with an end of file
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
    threading.Thread(target=session.close, name="nsstuck-socket-retire", daemon=True).start()


class SocketModeHandler(BaseSocketModeHandler):
    """Bolt's Socket Mode handler on a `SwitchingClient`."""

    def __init__(self, app: App, app_token: str, *, ping_interval: float, stale_after: float) -> None:
        self.app = app
        self.app_token = app_token
        self.switching = SwitchingClient(
            stale_after=stale_after,
            app_token=app_token,
            logger=app.logger,
            web_client=app.client,
            proxy=app.client.proxy,
            ping_interval=ping_interval,
        )
        self.client = self.switching
        self.client.socket_mode_request_listeners.append(self.handle)  # type: ignore[arg-type]

    def close(self) -> None:
        self.switching.close()
        # close() joins the monitor: a reconnect it had under way may have opened a session after
        # close() closed the current one
        if self.switching.current_session is not None:
            self.switching.current_session.close()

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        started = time.time()
        payload = req.payload if isinstance(req.payload, dict) else {}
        with log_context(slack_user=shapes.sender(payload)):
            response = run_bolt_app(self.app, req)
        if response.status != 200:
            # refused (another app or workspace) or unhandled: acknowledged bare, or Slack would send it again
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        send_response(client, req, response, started)
