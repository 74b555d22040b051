"""Raw JSON calls through the official client's ApiClient, with errors translated at the boundary.

We read objects as plain JSON rather than typed models: the typed models drop fields they do not
know (custom resources, new fields), and deserialising thousands of objects into them is slow.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from bot.kube.answers import Kinds, Malformed, Shape, judge
from bot.kube.connecting import Connection, error_answers_within
from bot.kube.observing import CallObserver, CallOutcome, status_outcome
from bot.kube.requesting import (
    MAX_ANSWER,
    ConnectTimeout,
    Dropped,
    NotConnected,
    Reader,
    ReadTimeout,
    Refused,
    TlsFailed,
    check_head,
    read_limited,
    read_tail,
)
from bot.kube.watchdog import Watch

UNAVAILABLE = "the server is currently unable to handle the request"
# how long after a call's deadline its sockets are shut (bot.kube.watchdog), if urllib3's own timeouts
# have not ended it by then
WATCH_GRACE = 0.1
NOT_FOUND = "the server could not find the requested resource"

# what a call asks the answer to be: the object as JSON, or only its metadata (the API server's
# PartialObjectMetadata, as client-go's metadata client asks for it, but without its fallback to the
# whole object: a server that cannot answer with metadata only refuses with 406 Not Acceptable)
JSON = "application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# /api and /apis as client-go (1.27+) asks for them: aggregated discovery v2 (served from 1.30), v2beta1
# (1.26-1.29), else the legacy documents; the answer's Content-Type says which came back
AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


class CallKind(StrEnum):
    """How a call failed."""

    STATUS = "status"  # the server answered, with an error status
    TIMEOUT = "timeout"  # no answer in time (the server may have acted on it)
    CONNECTION = "connection"  # no connection, or it broke (see `CallError.dropped`)


@dataclass(frozen=True)
class Tail:
    """The newest bytes of a text answer (a container's log): `cut` when older ones were dropped."""

    body: bytes
    cut: bool


@dataclass(frozen=True)
class CallError(Exception):
    """A call that did not produce a 2xx answer, as a client would describe it."""

    kind: CallKind
    message: str
    status: int | None = None
    body: str | None = None
    reason: str | None = None  # the Status reason (Forbidden, NotFound, ...) when the body was a Status
    retry_after: float | None = None
    # the connection was dropped after the request went out (reset, closed without an answer): the
    # server may or may not have acted on it; for a GET, asking again is safe
    dropped: bool = False
    # a 2xx answer in a shape it cannot have (`bot.kube.answers`): a gap, never "no objects"
    malformed: bool = False

    def __str__(self) -> str:
        return self.message


def _status_message(status: int, body: str) -> tuple[str, str | None]:
    """The message client-go would show for an error response, and the Status reason if any."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        data = None
    if isinstance(data, dict) and data.get("kind") == "Status" and data.get("message"):
        return str(data["message"]), data.get("reason")
    if status == 503:
        return UNAVAILABLE, "ServiceUnavailable"
    if status == 404:
        return NOT_FOUND, "NotFound"
    if status == 401:
        return "Unauthorized", "Unauthorized"
    if status == 403:
        return "forbidden", "Forbidden"
    return f"the server returned HTTP {status}", None


# a GET answered with one of these is asked once more: a server error or a gateway's (an aggregated
# API's proxy, a load balancer) is often momentary, and a GET changes nothing
RETRIED_STATUSES = frozenset({500, 502, 503, 504})
# the pause before that second GET when the server sent no Retry-After
SERVER_ERROR_PAUSE = 0.2
# the pause after a 429 without Retry-After
THROTTLE_PAUSE = 1.0
# without a deadline, the longest Retry-After we wait for; a longer one ends the call
MAX_PAUSE = 5.0
# a retry is not worth starting with less than this left for the call itself
MIN_CALL_TIME = 0.1


class Transport:
    """GET, PATCH, PUT and DELETE of raw JSON documents, one connection pool, thread-safe.

    What it retries, within the caller's deadline when one is given (`deadline`, a `time.monotonic()`
    instant by which the call must be over, retries and pauses included):
    - a 429 (any method: a throttled request was not processed), after its Retry-After (1 s when
      absent), up to `retries_on_429` times;
    - a GET answered 500, 502, 503 or 504, once, after a short pause or the Retry-After the server sent;
    - a GET whose connection was dropped without an answer (reset, closed), once, at once.
    A retry whose pause would not leave time for the call before the deadline (or, without one, a
    Retry-After beyond MAX_PAUSE) is not made: the last error is raised, saying why it was not retried.
    Writes are never retried on an error or a dropped connection: they may have been applied.

    Each attempt is told to `observer` (by default the connection's): the cluster, how it ended
    (`CallOutcome`) and how long it took.

    Every answer is bounded (`bot.kube.requesting`): its whole body must come within the attempt's
    timeout, hold at most `max_answer` bytes and not be encoded; one that is not is a CONNECTION error
    saying so, not retried.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        call_timeout: float = 10.0,
        retries_on_429: int = 3,
        observer: CallObserver | None = None,
        max_answer: int = MAX_ANSWER,
    ) -> None:
        self.connection = connection
        self.call_timeout = call_timeout
        self.max_answer = max_answer
        self.retries_on_429 = retries_on_429
        self.observer = observer if observer is not None else connection.observer

    def get(
        self,
        path: str,
        query: dict[str, str] | None = None,
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        accept: str = JSON,
        shape: Shape | None = None,
        kind: Kinds = None,
    ) -> Any:
        """The document a GET answers, judged (`bot.kube.answers.judge`: the `shape` its path says unless
        given, and the `kind` of a list or an object when given) before it is returned."""
        return self.call(
            "GET", path, query=query, timeout=timeout, deadline=deadline, accept=accept, shape=shape, kind=kind
        )

    def get_tail(
        self,
        path: str,
        query: dict[str, str] | None = None,
        *,
        keep: int,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> Tail:
        """A text answer (`text/plain`, a pod's log) read to its end within the call's time, of which only
        the last `keep` bytes are kept; not judged as JSON."""
        answer = self.call("GET", path, query=query, timeout=timeout, deadline=deadline, accept="*/*", tail=keep)
        assert isinstance(answer, Tail)
        return answer

    def get_negotiated(
        self, path: str, *, accept: str, timeout: float | None = None, deadline: float | None = None
    ) -> tuple[Any, str]:
        """A GET whose answer may come in more than one form: the document and its Content-Type."""
        answer: list[str] = []
        doc = self.call("GET", path, timeout=timeout, deadline=deadline, accept=accept, content_types=answer)
        return doc, answer[-1] if answer else ""

    def call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        deadline: float | None = None,
        accept: str = JSON,
        content_types: list[str] | None = None,
        shape: Shape | None = None,
        kind: Kinds = None,
        tail: int | None = None,
    ) -> Any:
        """`accept`: JSON (the whole object), or METADATA / METADATA_LIST (metadata only).
        `content_types`: the answer's Content-Type is appended to it. The answer to a GET is judged
        (`shape`, `kind`: see `get`); one in a shape it cannot have is a CallError saying so (status 200,
        `malformed`), not retried."""
        throttled = 0
        retried = False  # the one retry of a GET after a server error or a dropped connection
        while True:
            attempt_timeout = timeout or self.call_timeout
            if deadline is not None:
                attempt_timeout = max(MIN_CALL_TIME, min(attempt_timeout, deadline - time.monotonic()))
            try:
                return self._once(
                    method,
                    path,
                    query=query,
                    body=body,
                    content_type=content_type,
                    timeout=attempt_timeout,
                    accept=accept,
                    content_types=content_types,
                    shape=shape,
                    kind=kind,
                    tail=tail,
                )
            except CallError as e:
                if e.status == 429:
                    if throttled >= self.retries_on_429:
                        raise  # in the server's words, as callers show it
                    pause = e.retry_after if e.retry_after is not None else THROTTLE_PAUSE
                    throttled += 1
                elif method == "GET" and not retried and (e.status in RETRIED_STATUSES or e.dropped):
                    pause = 0.0 if e.dropped else (e.retry_after if e.retry_after is not None else SERVER_ERROR_PAUSE)
                    retried = True
                else:
                    raise
                why_not = _too_long(pause, deadline)
                if why_not:
                    raise _not_retried(e, why_not) from None
                if pause > 0:
                    time.sleep(pause)

    def _once(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
        accept: str = JSON,
        content_types: list[str] | None = None,
        shape: Shape | None = None,
        kind: Kinds = None,
        tail: int | None = None,
    ) -> Any:
        send = partial(
            self._send,
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=timeout,
            accept=accept,
            content_types=content_types,
            shape=shape,
            kind=kind,
            tail=tail,
        )
        if self.observer is None:
            return send()
        cluster, started = self.connection.target.name, time.monotonic()
        try:
            answer = send()
        except CallError as e:
            self.observer.call_observed(cluster, _outcome(e), time.monotonic() - started)
            raise
        self.observer.call_observed(cluster, CallOutcome.SUCCESS, time.monotonic() - started)
        return answer

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
        accept: str = JSON,
        content_types: list[str] | None = None,
        shape: Shape | None = None,
        kind: Kinds = None,
        tail: int | None = None,
    ) -> Any:
        reader = self.connection.reader
        if method == "GET" and reader is not None:
            try:
                return self._read(
                    reader,
                    path,
                    query,
                    timeout=timeout or self.call_timeout,
                    accept=accept,
                    content_types=content_types,
                    shape=shape,
                    kind=kind,
                    tail=tail,
                )
            except NotConnected:
                pass  # nothing was sent: the client opens a connection and says why it cannot, in its words
        return self._send_by_client(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=timeout,
            accept=accept,
            content_types=content_types,
            shape=shape,
            kind=kind,
            tail=tail,
        )

    def _read(
        self,
        reader: Reader,
        path: str,
        query: dict[str, str] | None,
        *,
        timeout: float,
        accept: str,
        content_types: list[str] | None,
        shape: Shape | None = None,
        kind: Kinds = None,
        tail: int | None = None,
    ) -> Any:
        """A GET by the connection's Reader, its failures said as those of the client (`_send_by_client`)."""
        try:
            answer = reader.get(path, query, accept=accept, timeout=timeout, limit=self.max_answer, tail=tail)
        except ConnectTimeout:
            raise CallError(CallKind.TIMEOUT, f"timed out after {timeout:g}s (ConnectTimeoutError)") from None
        except ReadTimeout:
            raise CallError(CallKind.TIMEOUT, f"timed out after {timeout:g}s (ReadTimeoutError)") from None
        except Dropped as e:
            raise CallError(
                CallKind.CONNECTION, self.connection.scrub(_dropped_message(e.cause)), dropped=True
            ) from None
        except TlsFailed as e:
            raise CallError(
                CallKind.CONNECTION, self.connection.scrub(_client_failure(f"SSLError\n{e.text}"))
            ) from None
        except Refused as e:
            raise _refused(path, e) from None
        except (ValueError, TypeError) as e:
            raise CallError(CallKind.CONNECTION, f"the request could not be made ({e.__class__.__name__})") from None
        if not 200 <= answer.status <= 299:
            raise self._status_error(answer.status, answer.body, answer.headers.get("retry-after"))
        content_type = str(answer.headers.get("content-type") or "")
        if content_types is not None:
            content_types.append(content_type)
        if tail is not None:
            return Tail(bytes(answer.body), answer.cut)
        return _judged(answer.body, path, answer.status, content_type, shape=shape, kind=kind)

    def _status_error(self, status: int, body: object, retry_after: object) -> CallError:
        """An answer with an error status, as callers see it (a 401 marks the connection refused)."""
        if status == 401:
            self.connection.refused = True  # its credentials are loaded again before it is lent again
        text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else str(body or "")
        message, reason = _status_message(status, text)
        return CallError(
            CallKind.STATUS,
            self.connection.scrub(message),
            status,
            self.connection.scrub(text[:2000]),
            reason,
            _retry_after(retry_after),
        )

    def _send_by_client(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
        accept: str = JSON,
        content_types: list[str] | None = None,
        shape: Shape | None = None,
        kind: Kinds = None,
        tail: int | None = None,
    ) -> Any:
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        started = time.monotonic()
        ends = started + (timeout or self.call_timeout)
        watch = Watch(ends + WATCH_GRACE)
        try:
            with watch:
                return self._by_client(
                    method,
                    path,
                    query=query,
                    body=body,
                    headers=headers,
                    timeout=timeout,
                    ends=ends,
                    content_types=content_types,
                    shape=shape,
                    kind=kind,
                    tail=tail,
                )
        except CallError as e:
            if watch.fired and e.kind is not CallKind.TIMEOUT:
                raise _watch_fired(timeout or self.call_timeout) from None
            raise

    def _by_client(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None,
        body: Any,
        headers: dict[str, str],
        timeout: float | None,
        ends: float,
        content_types: list[str] | None,
        shape: Shape | None,
        kind: Kinds,
        tail: int | None,
    ) -> Any:
        """The call through the client, watched by `_send_by_client`."""
        try:
            with error_answers_within(self.max_answer):
                response = self.connection.api_client.call_api(
                    path,
                    method,
                    query_params=list((query or {}).items()),
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    # a (connect, read) pair: the client silently ignores a single float
                    _request_timeout=(timeout or self.call_timeout, timeout or self.call_timeout),
                )
            content_type = str(response.headers.get("Content-Type") or "")
            if content_types is not None:
                content_types.append(content_type)
            if tail is not None:
                return Tail(*_tail_by_client(response, tail, ends))
            raw = _read_by_client(response, self.max_answer, ends)
        except Refused as e:
            raise _refused(path, e, method) from None
        except ApiException as e:
            if not e.status and e.body is None:
                # not an answer: the client failed on its side, e.g. a TLS handshake (status 0)
                raise CallError(
                    CallKind.CONNECTION, self.connection.scrub(_client_failure(str(e.reason or "")))
                ) from None
            raise self._status_error(int(e.status or 0), e.body, (e.headers or {}).get("Retry-After")) from None
        except urllib3.exceptions.NewConnectionError as e:
            # urllib3 makes this a subclass of its timeout error; it is a refused or failed connection
            raise CallError(CallKind.CONNECTION, self.connection.scrub(_connection_message(e))) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError) as e:
            raise CallError(
                CallKind.TIMEOUT, f"timed out after {timeout or self.call_timeout:g}s ({e.__class__.__name__})"
            ) from None
        except urllib3.exceptions.ProtocolError as e:
            # "Connection aborted.": reset by the peer, or closed before a whole answer came
            cause = e.args[1] if len(e.args) > 1 else None
            raise CallError(CallKind.CONNECTION, self.connection.scrub(_dropped_message(cause)), dropped=True) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise CallError(CallKind.CONNECTION, self.connection.scrub(_connection_message(e))) from None
        except (ValueError, TypeError) as e:
            # the request could not be built (a credential with a line break in it: http.client refuses
            # the header and quotes it, so the message is not repeated)
            raise CallError(CallKind.CONNECTION, f"the request could not be made ({e.__class__.__name__})") from None
        if method == "GET":
            status = int(getattr(response, "status", 200) or 200)
            return _judged(raw, path, status, content_type, shape=shape, kind=kind)
        return _decoded_json(raw)


def _tail_by_client(response: Any, keep: int, ends: float) -> tuple[bytes, bool]:
    """The last `keep` bytes of the client's answer, read whole by `ends` (`requesting.read_tail`)."""
    try:
        check_head(lambda name: None if name == "content-length" else response.headers.get(name), keep)

        def bounded() -> None:
            if ends - time.monotonic() <= 0:
                raise urllib3.exceptions.ReadTimeoutError(None, "", "Read timed out.")  # type: ignore[arg-type]
            sock = getattr(response.connection, "sock", None)
            if sock is not None:
                sock.settimeout(ends - time.monotonic())

        body, cut = read_tail(partial(response.read1, decode_content=False), keep, bounded)
        return bytes(body), cut
    finally:
        response.close()
        response.release_conn()


def _read_by_client(response: Any, limit: int, ends: float) -> bytearray:
    """The body of the client's answer (urllib3's, not yet read), bounded as the Reader bounds it: not
    encoded, at most `limit` bytes, whole by `ends`. Each read waits for at most one receive, itself
    waiting at most for what is left of the time (its socket's timeout set to it: urllib3 set it to
    the call's timeout, for each receive). The headers' time is urllib3's: each receive of them within
    the timeout, not all of them. An error answer never comes here: its body is read bounded by the
    connection (`connecting._bounded_errors`), before the client's ApiException would read it whole."""
    try:
        check_head(response.headers.get, limit)

        def bounded() -> None:
            left = ends - time.monotonic()
            if left <= 0:
                raise urllib3.exceptions.ReadTimeoutError(None, "", "Read timed out.")  # type: ignore[arg-type]
            sock = getattr(response.connection, "sock", None)
            if sock is not None:
                sock.settimeout(left)

        return read_limited(partial(response.read1, decode_content=False), limit, bounded)
    except BaseException:
        response.close()  # closes its connection too: what is left of the answer is not read
        response.release_conn()
        raise


def _watch_fired(timeout: float) -> CallError:
    """A call whose sockets the watchdog shut at its deadline (`bot.kube.watchdog`): whatever the read
    then failed with, the call timed out."""
    return CallError(CallKind.TIMEOUT, f"timed out after {timeout:g}s (ReadTimeoutError)")  # as the Reader says it


def _refused(path: str, error: Refused, method: str = "GET") -> CallError:
    """An answer not read whole on purpose (`requesting.Refused`), as the gap that names it."""
    return CallError(CallKind.CONNECTION, f"the answer to {method} {path} {error.why}")


def _judged(
    raw: bytes | bytearray, path: str, status: int, content_type: str, *, shape: Shape | None, kind: Kinds
) -> Any:
    """The answer to a GET once judged (`bot.kube.answers`), the one rule of both paths."""
    try:
        return judge(raw, path=path, status=status, content_type=content_type, shape=shape, kind=kind)
    except Malformed as e:
        raise CallError(CallKind.STATUS, str(e), status, malformed=True) from None


def _decoded_json(raw: bytes | bytearray | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        raise CallError(CallKind.STATUS, "the server sent a response that is not JSON", 200) from None


def _outcome(error: CallError) -> CallOutcome:
    if error.kind is CallKind.TIMEOUT:
        return CallOutcome.TIMEOUT
    if error.kind is CallKind.CONNECTION:
        return CallOutcome.CONNECTION_ERROR
    return status_outcome(error.status)


def _too_long(pause: float, deadline: float | None) -> str | None:
    """Why a retry after `pause` seconds is not made, or None when it fits."""
    if deadline is None:
        return f"Retry-After {pause:g}s is longer than we wait ({MAX_PAUSE:g}s)" if pause > MAX_PAUSE else None
    left = deadline - time.monotonic()
    if pause + MIN_CALL_TIME > left:
        return f"a retry after {pause:g}s would not finish within the {max(0.0, left):.1f}s left"
    return None


def _not_retried(error: CallError, why: str) -> CallError:
    return replace(error, message=f"{error.message} (not retried: {why})")


def _dropped_message(cause: BaseException | None) -> str:
    """Why a connection broke (urllib3's ProtocolError("Connection aborted.", ConnectionResetError(104,
    'Connection reset by peer')) gives it second)."""
    if isinstance(cause, OSError) and cause.strerror:
        return f"connection dropped: {cause.strerror.lower()}"
    if cause is not None and str(cause):
        return f"connection dropped: {cause}"
    return "connection dropped before an answer came"


def _retry_after(value: object) -> float | None:
    try:
        return max(0.0, float(str(value))) if value is not None else None
    except ValueError:
        return None


def _client_failure(reason: str) -> str:
    """What the client put in an ApiException without a response: "SSLError\n[SSL: ...] ..." for TLS."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if lines and lines[0] == "SSLError":
        return f"cannot connect: TLS failed: {lines[1] if len(lines) > 1 else 'handshake error'}"
    # the client's other status 0: a request it could not build (a body of a type it cannot send)
    return f"the request could not be made: {lines[0] if lines else 'the client failed before sending it'}"


def _connection_message(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    text = str(reason)
    # urllib3 wraps the useful part: "...: Failed to establish a new connection: [Errno 111] Connection refused"
    if "Failed to establish a new connection:" in text:
        text = text.split("Failed to establish a new connection:", 1)[1].strip().rstrip(")'\"")
    return f"cannot connect: {text}"
