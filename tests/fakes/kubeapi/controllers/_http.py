"""A tiny HTTP client for the emulated API server, as the controllers see it.

kube-controller-manager talks plain HTTP(S) to the API server with its own identity. The
controllers here do the same with ``emu.admin_token`` and the standard library only, so they
exercise exactly the surface every other client sees. (Two optimisations read the emulator's
store in-process, only to decide whether a pass can be skipped: see ``_gate.py`` and the garbage
collector's ``_woken``; every decision is still made from HTTP answers.)

``ApiError.client_go_text`` renders an error the way client-go's ``err.Error()`` does, because
the namespace controller copies those texts verbatim into the namespace conditions.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = dict[str, Any]


class ClockLike(Protocol):
    def now(self) -> Any: ...


class KnobsLike(Protocol):
    unreachable_services: set[str]


class EmulatorLike(Protocol):
    """The part of the Emulator facade (owned by the apiserver half) the controllers use."""

    @property
    def url(self) -> str: ...

    @property
    def admin_token(self) -> str: ...

    @property
    def clock(self) -> Any: ...

    @property
    def knobs(self) -> Any: ...


# client-go's NewGenericServerResponse messages for bodies that are not a Status object
# (k8s.io/apimachinery/pkg/api/errors/errors.go).
_GENERIC_MESSAGES: dict[int, str] = {
    409: "the server reported a conflict",
    404: "the server could not find the requested resource",
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    405: "the server does not allow this method on the requested resource",
    422: "the server rejected our request due to an error in our request",
    503: "the server is currently unable to handle the request",
    504: ("the server was unable to return a response in the time allotted, but may still be processing the request"),
    429: "the server has received too many requests and has asked us to try again later",
}

_GENERIC_REASONS: dict[int, str] = {
    409: "Conflict",
    404: "NotFound",
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    405: "MethodNotAllowed",
    422: "Invalid",
    503: "ServiceUnavailable",
    504: "Timeout",
    429: "TooManyRequests",
}


def generic_server_message(status: int, server_message: str) -> str:
    """The message client-go builds for an error response whose body is not a Status."""
    if status in _GENERIC_MESSAGES:
        return _GENERIC_MESSAGES[status]
    if status == 403:
        return server_message
    if status >= 500:
        # Go's %q of the server message.
        return f"an error on the server ({json.dumps(server_message)}) has prevented the request from succeeding"
    return f"the server responded with the status code {status} but did not return more information"


@dataclass
class ApiError(Exception):
    """A non-2xx answer from the emulated API server."""

    status: int
    method: str
    path: str
    body: bytes
    content_type: str = ""
    status_obj: JSON | None = field(default=None)

    def __post_init__(self) -> None:
        if self.status_obj is None and "json" in self.content_type:
            try:
                parsed = json.loads(self.body or b"null")
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and parsed.get("kind") == "Status":
                self.status_obj = parsed
        super().__init__(self.client_go_text)

    @property
    def reason(self) -> str:
        if self.status_obj is not None:
            return str(self.status_obj.get("reason") or "")
        return _GENERIC_REASONS.get(self.status, "InternalError" if self.status >= 500 else "Unknown")

    @property
    def client_go_text(self) -> str:
        """What ``err.Error()`` prints in client-go for this response."""
        if self.status_obj is not None:
            return str(self.status_obj.get("message") or "")
        text = self.body.decode("utf-8", "replace").strip()
        return generic_server_message(self.status, text)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def method_not_supported(self) -> bool:
        return self.status == 405


class KubeHTTP:
    """One identity talking JSON to one API server, over one keep-alive connection per thread."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self._host = parsed.hostname or "127.0.0.1"
        self._port = parsed.port or 80
        self._token = token
        self._timeout = timeout
        self._local = threading.local()
        # every connection any thread opened, so that close_all() can close them all
        self._opened: list[http.client.HTTPConnection] = []
        self._opened_lock = threading.Lock()
        self.base_url = base_url

    def _conn(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.conn = conn
            with self._opened_lock:
                self._opened = [c for c in self._opened if c.sock is not None]
                self._opened.append(conn)
        return conn

    def close(self) -> None:
        """Close this thread's connection."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close_all(self) -> None:
        """Close the connections of every thread (the next request opens a new one)."""
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()

    def __del__(self) -> None:
        # a client dropped without close_all() (a test's own, say) takes its sockets with it, quietly
        for conn in getattr(self, "_opened", ()):
            conn.close()

    def raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> tuple[int, str, bytes]:
        """Send one request on this thread's keep-alive connection; returns (status, content type, body).

        A connection the server closed in the meantime is replaced once.
        """
        url = path
        if query:
            url += "?" + urllib.parse.urlencode(dict(query))
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": accept}
        if payload is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            try:
                conn = self._conn()
                conn.request(method, url, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                self.close()
                if attempt == 1:
                    raise
                continue
            if resp.will_close:
                self.close()
            return resp.status, resp.getheader("Content-Type", ""), data
        raise AssertionError("unreachable")  # pragma: no cover

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> JSON:
        status, ctype, data = self.raw(method, path, query=query, body=body, content_type=content_type)
        if status >= 400:
            raise ApiError(status=status, method=method, path=path, body=data, content_type=ctype)
        if not data:
            return {}
        parsed = json.loads(data)
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def get(self, path: str, **query: str) -> JSON:
        return self.request("GET", path, query=query or None)

    def get_negotiated(self, path: str, accept: str) -> tuple[JSON, str]:
        """A GET with that Accept header: the document and the Content-Type it came back as."""
        status, ctype, data = self.raw("GET", path, accept=accept)
        if status >= 400:
            raise ApiError(status=status, method="GET", path=path, body=data, content_type=ctype)
        parsed = json.loads(data) if data else {}
        return (parsed if isinstance(parsed, dict) else {"value": parsed}), ctype

    def get_or_none(self, path: str, **query: str) -> JSON | None:
        try:
            return self.get(path, **query)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def list_items(self, path: str, **query: str) -> list[JSON]:
        items = self.get(path, **query).get("items") or []
        return [item for item in items if isinstance(item, dict)]

    def post(self, path: str, body: JSON) -> JSON:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, *, patch_type: str = "merge") -> JSON:
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return self.request("PATCH", path, body=body, content_type=ctype)

    def delete(self, path: str, options: JSON | None = None, **query: str) -> JSON:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **(options or {})}
        return self.request("DELETE", path, query=query or None, body=body)


_clients: weakref.WeakKeyDictionary[Any, KubeHTTP] = weakref.WeakKeyDictionary()
_fallback_clients: dict[tuple[str, str], KubeHTTP] = {}
_clients_lock = threading.Lock()


def client_for(emu: EmulatorLike) -> KubeHTTP:
    """The admin client for an emulator (kube-controller-manager's identity), one per emulator."""
    with _clients_lock:
        try:
            client = _clients.get(emu)
        except TypeError:  # not weakly referenceable
            key = (emu.url, emu.admin_token)
            client = _fallback_clients.get(key)
            if client is None or client.base_url != emu.url:
                client = _fallback_clients[key] = KubeHTTP(emu.url, emu.admin_token)
            return client
        if client is None or client.base_url != emu.url:
            client = KubeHTTP(emu.url, emu.admin_token)
            _clients[emu] = client
        return client


def close_clients(emu: EmulatorLike) -> None:
    """Close the admin client of an emulator that stops (its connections in every thread)."""
    with _clients_lock:
        try:
            client = _clients.pop(emu, None)
        except TypeError:
            client = _fallback_clients.pop((emu.url, emu.admin_token), None)
    if client is not None:
        client.close_all()


def object_path(
    *, group: str, version: str, resource: str, namespace: str | None = None, name: str | None = None
) -> str:
    """The REST path of a collection or an object."""
    prefix = f"/api/{version}" if group == "" else f"/apis/{group}/{version}"
    if namespace is not None:
        prefix += f"/namespaces/{urllib.parse.quote(namespace)}"
    prefix += f"/{resource}"
    if name is not None:
        prefix += f"/{urllib.parse.quote(name)}"
    return prefix
