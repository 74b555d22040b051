"""The Socket Mode side: a ``websockets`` server on ``ws://127.0.0.1:Q/link/`` in its own thread and event loop.

``apps.connections.open`` hands out ``ws://127.0.0.1:Q/link/?ticket=<t>&app_id=<A>``; a connection with an
unknown (or, by default, already used) ticket is refused with HTTP 401 at the handshake. On connect the
server sends ``hello``; tests then push envelopes and wait for the client's ``{"envelope_id": ...}`` ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tests.fakes.tracing import untraced


class AckTimeout(AssertionError):
    """The client did not acknowledge an envelope in time."""


class NotConnected(RuntimeError):
    """No Socket Mode client is connected."""


@dataclass
class Ack:
    envelope_id: str
    payload: Any  # the "payload" of the ack frame, or None for a bare ack
    frame: dict[str, Any]
    elapsed: float  # seconds between sending the envelope and receiving the ack
    connection_id: int


@dataclass
class SocketConnection:
    id: int
    ticket: str
    opened: float
    closed: float | None = None
    frames: list[Any] = field(default_factory=list)  # every text frame the client sent, parsed when JSON
    ws: ServerConnection | None = field(default=None, repr=False)

    @property
    def open(self) -> bool:
        return self.closed is None


class SocketModeServer:
    def __init__(
        self,
        *,
        app_id: str,
        host: str = "127.0.0.1",
        port: int = 0,
        single_use_tickets: bool = True,
        on_ack: Callable[[dict[str, Any], Ack], None] | None = None,
    ) -> None:
        self.app_id = app_id
        self.single_use_tickets = single_use_tickets
        self.on_ack = on_ack
        self._host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Server | None = None
        self._cond = threading.Condition()
        self._tickets: dict[str, bool] = {}  # ticket -> used
        self._connections: list[SocketConnection] = []
        self._envelopes: dict[str, tuple[float, dict[str, Any], int]] = {}  # id -> (sent at, envelope, connection)
        self._acks: dict[str, Ack] = {}
        self.refused_handshakes: list[str] = []  # request paths refused at the handshake
        self.sent: list[dict[str, Any]] = []  # every frame the server sent (hello, envelopes, disconnects)

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the Socket Mode server is not running")
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://{self._host}:{port}/link/"

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(self._start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=untraced(run), name="slack-emulator-socket-mode", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]

    async def _start(self) -> Server:
        return await serve(
            self._handle,
            self._host,
            self._port,
            process_request=self._process_request,
            ping_interval=None,  # the client pings; the server answers automatically
            close_timeout=0.5,  # the builtin client never answers a close frame
            max_size=2**22,
        )

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._thread = None

    # ---------------------------------------------------------------- handshake

    def issue_url(self) -> str:
        """A fresh ``ws://.../link/?ticket=...&app_id=...`` (what ``apps.connections.open`` answers)."""
        ticket = secrets.token_hex(16)
        with self._cond:
            self._tickets[ticket] = False
        return f"{self.url}?ticket={ticket}&app_id={self.app_id}"

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        ticket = parse_qs(parts.query).get("ticket", [""])[0]
        with self._cond:
            used = self._tickets.get(ticket)
            if not parts.path.startswith("/link") or used is None or (used and self.single_use_tickets):
                self.refused_handshakes.append(request.path)
                return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid ticket\n")
            self._tickets[ticket] = True
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        ticket = parse_qs(urlsplit(ws.request.path if ws.request else "").query).get("ticket", [""])[0]
        with self._cond:
            conn = SocketConnection(id=len(self._connections) + 1, ticket=ticket, opened=time.time(), ws=ws)
            self._connections.append(conn)
            live = sum(1 for c in self._connections if c.open)
            self._cond.notify_all()
        hello = {
            "type": "hello",
            "num_connections": live,
            "debug_info": {"host": "emu", "build_number": 10, "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.app_id},
        }
        try:
            await self._send(ws, hello)
            async for message in ws:
                self._on_frame(conn, message)
        except ConnectionClosed:
            pass
        finally:
            with self._cond:
                conn.closed = time.time()
                self._cond.notify_all()

    async def _send(self, ws: ServerConnection, frame: dict[str, Any]) -> None:
        with self._cond:
            self.sent.append(frame)
        await ws.send(json.dumps(frame))

    def _on_frame(self, conn: SocketConnection, message: str | bytes) -> None:
        text = message.decode("utf-8", errors="replace") if isinstance(message, bytes) else message
        try:
            frame: Any = json.loads(text)
        except ValueError:
            frame = text
        ack: Ack | None = None
        envelope: dict[str, Any] | None = None
        with self._cond:
            conn.frames.append(frame)
            if isinstance(frame, dict) and isinstance(frame.get("envelope_id"), str):
                eid = frame["envelope_id"]
                sent_at, envelope, _ = self._envelopes.get(eid, (time.perf_counter(), None, conn.id))
                ack = Ack(eid, frame.get("payload"), frame, time.perf_counter() - sent_at, conn.id)
        # Apply the ack to the workspace before anyone waiting for it wakes up.
        if ack is not None and envelope is not None and self.on_ack is not None:
            self.on_ack(envelope, ack)
        with self._cond:
            if ack is not None:
                self._acks.setdefault(ack.envelope_id, ack)
            self._cond.notify_all()

    # ------------------------------------------------------------ connections

    def connections(self, *, include_closed: bool = False) -> list[SocketConnection]:
        with self._cond:
            return [c for c in self._connections if include_closed or c.open]

    def wait_for_connections(self, count: int = 1, timeout: float = 5.0) -> list[SocketConnection]:
        """Blocks until at least ``count`` clients are connected."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                live = [c for c in self._connections if c.open]
                if len(live) >= count:
                    return live
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NotConnected(f"{len(live)} Socket Mode connection(s) after {timeout}s, wanted {count}")
                self._cond.wait(remaining)

    def wait_for_new_connection(self, after: int, timeout: float = 5.0) -> SocketConnection:
        """Blocks until a connection with an id greater than ``after`` is open (e.g. after a reconnect)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                fresh = [c for c in self._connections if c.id > after and c.open]
                if fresh:
                    return fresh[-1]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NotConnected(f"no new Socket Mode connection after #{after} within {timeout}s")
                self._cond.wait(remaining)

    def wait_for_close(self, connection: SocketConnection, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while connection.open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"connection #{connection.id} still open after {timeout}s")
                self._cond.wait(remaining)

    def _pick(self, connection: SocketConnection | int | None) -> SocketConnection:
        with self._cond:
            live = [c for c in self._connections if c.open]
        if connection is None:
            if not live:
                raise NotConnected("no Socket Mode client is connected")
            return live[-1]
        wanted = connection.id if isinstance(connection, SocketConnection) else connection
        for c in live:
            if c.id == wanted:
                return c
        raise NotConnected(f"connection #{wanted} is not open")

    def _run(self, coro: Any, timeout: float = 5.0) -> Any:
        if self._loop is None:
            raise RuntimeError("the Socket Mode server is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ------------------------------------------------------------- envelopes

    def send_envelope(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool | None = None,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
        envelope_id: str | None = None,
        connection: SocketConnection | int | None = None,
    ) -> str:
        """Sends ``{"envelope_id", "type", "accepts_response_payload", "payload", ...}``; returns the envelope id."""
        conn = self._pick(connection)
        eid = envelope_id or str(uuid.uuid4())
        if accepts_response_payload is None:
            accepts_response_payload = kind == "slash_commands" or (
                kind == "interactive" and payload.get("type") in ("view_submission", "block_suggestion")
            )
        envelope: dict[str, Any] = {
            "envelope_id": eid,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
        }
        if retry_attempt is not None:
            envelope["retry_attempt"] = retry_attempt
            envelope["retry_reason"] = retry_reason or ""
        with self._cond:
            self._envelopes[eid] = (time.perf_counter(), envelope, conn.id)
        assert conn.ws is not None
        self._run(self._send(conn.ws, envelope))
        return eid

    def send_frame(self, frame: str | bytes, *, connection: SocketConnection | int | None = None) -> None:
        """Sends one WebSocket message exactly as given (text or binary): what a broken or hostile peer
        could send, envelope or not."""
        conn = self._pick(connection)
        ws = conn.ws
        assert ws is not None

        async def go() -> None:
            with self._cond:
                self.sent.append({"raw": frame if isinstance(frame, str) else frame.decode("latin-1")})
            await ws.send(frame)

        self._run(go())

    def wait_ack(self, envelope_id: str, timeout: float = 3.0) -> Ack:
        deadline = time.monotonic() + timeout
        with self._cond:
            while envelope_id not in self._acks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AckTimeout(f"envelope {envelope_id} was not acknowledged within {timeout}s")
                self._cond.wait(remaining)
            return self._acks[envelope_id]

    def request(self, kind: str, payload: dict[str, Any], *, timeout: float = 3.0, **kwargs: Any) -> Ack:
        """``send_envelope`` then ``wait_ack``."""
        return self.wait_ack(self.send_envelope(kind, payload, **kwargs), timeout)

    def acks(self) -> list[Ack]:
        with self._cond:
            return list(self._acks.values())

    # ---------------------------------------------------------- disconnects

    def send_disconnect(
        self,
        reason: str = "refresh_requested",
        *,
        connection: SocketConnection | int | None = None,
        close_after: float | None = None,
    ) -> SocketConnection:
        """Sends ``{"type":"disconnect","reason":...}``; with ``close_after`` the server then closes the socket."""
        conn = self._pick(connection)
        frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "emu"}}
        ws = conn.ws
        assert ws is not None

        async def go() -> None:
            await self._send(ws, frame)
            if close_after is not None:

                async def later() -> None:
                    await asyncio.sleep(close_after)
                    await ws.close(1000, reason)

                asyncio.get_running_loop().create_task(later())

        self._run(go())
        return conn

    def close(self, connection: SocketConnection | int | None = None, code: int = 1000, reason: str = "") -> None:
        """A clean close (with a close frame)."""
        conn = self._pick(connection)
        assert conn.ws is not None
        self._run(conn.ws.close(code, reason))

    def drop_all(self) -> None:
        """Cuts every open connection without a close frame.

        Useful before closing a builtin ``SocketModeClient`` (or Bolt's ``SocketModeHandler``): its ``close()``
        waits for a blocking ``recv`` (3 s timeout) unless the peer has gone away.
        """
        for conn in self.connections():
            with contextlib.suppress(NotConnected):
                self.drop(conn)

    def silence(self, connection: SocketConnection | int | None = None) -> SocketConnection:
        """The network path goes dead without a FIN or RST: nothing the client sends is read or answered
        (no pongs), nothing more is sent to it, and the TCP connection stays up. Only the client's pings
        can tell."""
        return self._on_transport(connection, "pause_reading")

    def drop(self, connection: SocketConnection | int | None = None) -> SocketConnection:
        """Cuts the TCP connection without a close frame (what a network failure looks like)."""
        return self._on_transport(connection, "abort")

    def _on_transport(self, connection: SocketConnection | int | None, what: str) -> SocketConnection:
        """Call `what` on the connection's TCP transport, on the server's event loop."""
        conn = self._pick(connection)
        ws = conn.ws
        assert ws is not None
        assert self._loop is not None
        self._loop.call_soon_threadsafe(getattr(ws.transport, what))
        return conn
