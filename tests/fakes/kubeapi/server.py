"""The HTTP front end: routing, authentication, the knobs, watch streaming and response writing."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
import time
import traceback
import unicodedata
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.quickparse import QuickParsing
from tests.fakes.tracing import UntracedHTTPServer, untraced

from . import discovery, events_v1, openapi, podlogs, protobuf, rbac, tables
from .apiserver import Ctx, DeleteOptions, Result
from .errors import (
    ApiError,
    FieldError,
    internal,
    invalid,
    method_not_allowed,
    route_not_found,
    service_unavailable_plain,
    unauthorized,
)
from .journal import Journaled
from .knobs import RewriteRule
from .protobuf import ProtobufError
from .registry import ResourceType
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .store import Event, dumps

if TYPE_CHECKING:
    from .emulator import Emulator

NAMESPACE_SUBRESOURCES = frozenset({"finalize", "status"})
# the /version document; emulator option `server_version` ("1.28.2", "v1.15.12-gke.1") replaces the
# version fields (major, minor, gitVersion), as that release's API server writes them
VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "59526cd4867447956156ae3a602fcbac10a2c335",
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T16:02:27Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def version_info(version: object) -> dict[str, str]:
    """VERSION_INFO for a version string: `1.28.2` -> major "1", minor "28", gitVersion "v1.28.2"."""
    if not isinstance(version, str) or not version:
        return dict(VERSION_INFO)
    git_version = version if version.startswith("v") else f"v{version}"
    major, _, rest = git_version[1:].partition(".")
    minor = rest.split(".", 1)[0]
    if "-" in rest.split(".", 1)[-1] or "+" in rest:  # managed builds report "28+" for minor
        minor = f"{minor}+"
    return {**VERSION_INFO, "major": major, "minor": minor, "gitVersion": git_version}


GENERIC_REASONS = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    403: ("Forbidden", "the server does not allow access to the requested resource"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    410: ("Expired", "the server reported the resource is no longer available"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    500: ("InternalError", 'an error on the server ("unknown") has prevented the request from succeeding'),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, but may still be processing the request",
    ),
}


@dataclass
class ResourceRequest:
    rt: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    sub: str | None
    watch_path: bool = False


@dataclass
class RequestState:
    method: str
    path: str
    query: dict[str, str]
    query_lists: dict[str, list[str]]
    headers: Any
    body: bytes
    raw_query: str = ""
    user: str = ""
    admin: bool = False
    identity: rbac.UserInfo | None = None  # user and groups, after impersonation
    impersonator: str = ""  # who sent it, when it acts as someone else
    extra_headers: dict[str, str] = field(default_factory=dict)


def partial_metadata(obj: dict[str, Any], *, is_list: bool) -> dict[str, Any]:
    """What the metadata client gets (``Accept: ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1``)."""
    if is_list or "items" in obj:
        return {
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {},
            "items": [
                {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": item.get("metadata") or {},
                }
                for item in obj.get("items") or []
            ],
        }
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def warning_header(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


WARNINGS_TOTAL_RUNES, WARNING_ITEM_RUNES = 4 * 1024, 256


def recorded_warnings(texts: list[str]) -> list[str]:
    """The warnings a response carries, as ``endpoints/filters/warning.go``'s recorder keeps them: empty
    ones dropped, duplicates once, one with a control character dropped (``NewWarningHeader`` refuses
    it); past 4096 characters in all, every warning cut to 256 and those past 4096 again dropped."""
    ordered: list[str] = []
    for text in texts:
        if text and text not in ordered:
            ordered.append(text)
    out: list[str] = []
    written, truncating = 0, False
    for index, text in enumerate(ordered):
        if truncating and written >= WARNINGS_TOTAL_RUNES:
            break
        item = text[:WARNING_ITEM_RUNES] if truncating else text
        if any(unicodedata.category(c) == "Cc" for c in item):
            continue
        if written + len(item) <= WARNINGS_TOTAL_RUNES or truncating:
            written += len(item)
            out.append(item)
            continue
        truncating, written, out = True, 0, []
        for earlier in ordered[: index + 1]:
            cut = earlier[:WARNING_ITEM_RUNES]
            if not any(unicodedata.category(c) == "Cc" for c in cut):
                written += len(cut)
                out.append(cut)
    return out


class Handler(QuickParsing):
    protocol_version = "HTTP/1.1"
    server_version = "kube-emulator"
    sys_version = ""
    emu: Emulator  # set on the subclass by the emulator
    _journaled: Journaled | None = None  # the journal's record of the request being answered, if any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")

    # -- response writing -----------------------------------------------------------------------------
    def _send(
        self,
        code: int,
        body: bytes | dict[str, Any] | list[Any],
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        raw = body if isinstance(body, bytes) else dumps(body)
        self.send_response(code)
        self.send_header("Audit-Id", self.emu.next_audit_id())
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for w in recorded_warnings(warnings or []):
            self.send_header("Warning", warning_header(w))
        self.send_header("Content-Length", str(len(raw)))
        # one write for headers and body (no Nagle/delayed-ACK stall between two small segments)
        buffer: list[bytes] = self._headers_buffer  # type: ignore[attr-defined]
        buffer.append(b"\r\n")
        if self.command != "HEAD":
            buffer.append(raw)
        self.flush_headers()

    def send_response(self, code: int, message: str | None = None) -> None:
        if self._journaled is not None and not self._journaled.status:
            self._journaled.status = code  # the first status line is what the client was answered
        super().send_response(code, message)

    def _send_error(self, err: ApiError) -> None:
        self._send(err.code, err.body(), err.content_type, err.headers, warnings=err.warnings)

    def _trickle(self, interval: float, *, headers: bool = False) -> None:
        """A 200 with a body of 64 MiB announced, sent a byte at a time (knobs.trickle); or, with
        `headers`, a status line and then a header that never ends."""
        self.close_connection = True
        if headers:
            if self._journaled is not None and not self._journaled.status:
                self._journaled.status = 200
            with contextlib.suppress(OSError):
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trickle: ")
                self.wfile.flush()
                while not self.emu.stopping.wait(interval):
                    self.wfile.write(b"a")
                    self.wfile.flush()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1 << 26))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(b"{")
            self.wfile.flush()
            while not self.emu.stopping.wait(interval):
                self.wfile.write(b" ")
                self.wfile.flush()

    def _rewrite(self, rule: RewriteRule) -> None:
        """The answer a knobs.rewrite rule gives instead of the API server's."""
        headers = dict(rule.headers)
        names = {name.lower() for name in headers}
        if "content-type" not in names:
            headers["Content-Type"] = "application/json"
        streamed = not isinstance(rule.body, bytes)
        chunked = streamed and "content-length" not in names
        if isinstance(rule.body, bytes) and not names & {"content-length", "transfer-encoding"}:
            headers["Content-Length"] = str(len(rule.body))
        elif chunked and "transfer-encoding" not in names:
            headers["Transfer-Encoding"] = "chunked"
        self.send_response(rule.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if isinstance(rule.body, bytes):
            self.wfile.write(rule.body)
            return
        self.close_connection = True
        with contextlib.suppress(OSError):
            for piece in rule.body():
                if self.emu.stopping.is_set():
                    return
                if chunked and piece:
                    self._chunk(piece)
                elif piece:
                    self.wfile.write(piece)
            if chunked:
                self._end_chunks()

    def _reset(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.close()

    # -- entry point ----------------------------------------------------------------------------------
    def _handle(self, method: str) -> None:
        self._journaled = None
        try:
            parts = urlsplit(self.path)
            lists = parse_qs(parts.query, keep_blank_values=True)
            query = {k: v[0] for k, v in lists.items()}
            body = self._read_body()
            req = RequestState(method, parts.path, query, lists, self.headers, body, parts.query)
            self._dispatch(req)
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            traceback.print_exc()
            self._send_error(internal(f"{type(exc).__name__}: {exc}"))

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _authenticate(self, req: RequestState) -> None:
        # as the API server's union of authenticators: a verified client certificate first, then
        # the Authorization header (a bearer token, or basic auth for the pairs add_basic_auth made)
        user, cert_groups = self._certificate_user()
        if user is None:
            auth = req.headers.get("Authorization") or ""
            if auth.lower().startswith("basic "):
                user = self.emu.basic_auth.get(auth[6:].strip())
            else:
                token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
                user = None if token in self.emu.knobs.expired_tokens else self.emu.tokens.get(token)
                if user is None and self.emu.eks_auth is not None:  # Emulator.accept_eks_tokens
                    user = self.emu.eks_auth.user(token)
        if user is None:
            raise unauthorized()
        req.user = user
        req.admin = user == self.emu.admin_identity
        req.identity = rbac.authenticated_user(user, [*cert_groups, *([rbac.MASTERS] if req.admin else [])])

    def _certificate_user(self) -> tuple[str | None, list[str]]:
        """The common name and organisations of the client certificate the TLS listener verified."""
        getpeercert = getattr(self.connection, "getpeercert", None)
        cert = getpeercert() if getpeercert is not None else None
        name: str | None = None
        groups: list[str] = []
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName" and name is None:
                    name = str(value)
                elif key == "organizationName":
                    groups.append(str(value))
        return name, groups

    def _impersonate(self, req: RequestState) -> None:
        """The impersonation filter: act as the Impersonate-* headers say once the caller may."""
        assert req.identity is not None
        uri = req.path + (f"?{req.raw_query}" if req.raw_query else "")
        cluster = self.emu.cluster
        acting = rbac.impersonate(
            cluster, req.identity, req.headers, uri, check=cluster.rbac and not req.admin, knobs=not req.admin
        )
        if acting is None:
            return
        req.impersonator = req.user
        req.identity = acting
        req.user = acting.name
        req.admin = rbac.MASTERS in acting.groups

    def _authorize_path(self, req: RequestState, path: str) -> None:
        """RBAC for a non-resource request (discovery, /version, /healthz, /openapi)."""
        if req.admin or not self.emu.cluster.rbac:
            return
        assert req.identity is not None
        verb = "get" if req.method == "HEAD" else req.method.lower()
        attrs = rbac.Attributes(req.identity, verb, resource_request=False, path=path)
        decision = rbac.authorize(self.emu.cluster, attrs)
        if not decision.allowed:
            raise rbac.forbidden_error(attrs, decision.reason)

    def _dispatch(self, req: RequestState) -> None:
        self._authenticate(req)
        sender_admin = req.admin
        self._impersonate(req)
        line = f"{req.method} {req.path}"
        if not sender_admin or req.impersonator:
            assert req.identity is not None
            self._journaled = self.emu.journal.record(
                Journaled(
                    req.method,
                    req.path,
                    req.raw_query,
                    req.headers.get("Accept") or "",
                    peer="{}:{}".format(*self.client_address[:2]),
                    dry_run=bool(req.query_lists.get("dryRun")),
                    user=req.user,
                    groups=tuple(req.identity.groups),
                    impersonated_by=req.impersonator,
                    by_admin=sender_admin,
                )
            )
        if not req.admin:
            delay = self.emu.knobs.delay_for(line)
            if delay > 0:
                time.sleep(delay)
            fault = self.emu.knobs.fault_for(line, req.raw_query)
            if fault is not None:
                if fault.reset_connection:
                    self._reset()
                    return
                self._send_fault(fault.status, fault.body, fault.headers)
                return
            rewrite = self.emu.knobs.rewrite_for(line)
            if rewrite is not None:
                self._rewrite(rewrite)
                return
            trickle = self.emu.knobs.trickle_for(line)
            if trickle is not None:
                self._trickle(trickle.interval, headers=trickle.headers)
                return
        path = req.path.rstrip("/") or "/"
        segs = [unquote(x) for x in path.split("/") if x]
        if not ((segs[:1] == ["api"] and len(segs) >= 3) or (segs[:1] == ["apis"] and len(segs) >= 4)):
            self._authorize_path(req, req.path)
        if path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/version":
            self._send(200, version_info(self.emu.options.get("server_version")))
            return
        if path == "/openapi/v2" or path.startswith("/openapi/v3"):
            self._openapi(req, path)
            return
        if path in ("/api", "/apis"):
            self._get_only(req)
            accept = req.headers.get("Accept") or ""
            served: tuple[str, ...] = ()
            if self.emu.options.get("aggregated_discovery"):
                served = discovery.served_aggregated_versions(self.emu.options.get("server_version"))
            chosen = discovery.negotiate_aggregated(accept, served)
            if chosen is None:
                media = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
                self._send_error(
                    ApiError(406, "NotAcceptable", f"only the following media types are accepted: {media}", {})
                )
            elif chosen:
                doc = discovery.aggregated_list(self.emu.cluster, legacy_core=path == "/api", discovery_version=chosen)
                self._send(200, doc, discovery.aggregated_content_type(chosen), {"Vary": "Accept"})
            elif path == "/api":
                self._send(200, discovery.api_versions(self.emu.cluster), headers={"Vary": "Accept"})
            else:
                self._send(200, discovery.api_group_list(self.emu.cluster), headers={"Vary": "Accept"})
            return
        segs = [unquote(s) for s in path.split("/") if s]
        if segs[0] == "api":
            if len(segs) < 2 or segs[1] != "v1":
                raise route_not_found()
            group, version, rest = "", "v1", segs[2:]
        elif segs[0] == "apis" and len(segs) >= 2:
            group = segs[1]
            if len(segs) == 2:
                self._get_only(req)
                group_doc = discovery.api_group(self.emu.cluster, group)
                if group_doc is None:
                    raise route_not_found()
                self._send(200, group_doc)
                return
            version, rest = segs[2], segs[3:]
            if self._maybe_proxy(req, group, version, rest):
                return
        else:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"})
            return
        if not rest:
            self._get_only(req)
            resources = discovery.api_resource_list(self.emu.cluster, group, version)
            if resources is None:
                raise route_not_found()
            self._send(200, resources)
            return
        rr = self._parse_resource(group, version, rest)
        self._resource(req, rr)

    def _get_only(self, req: RequestState) -> None:
        if req.method not in ("GET", "HEAD"):
            raise method_not_allowed()

    def _send_fault(self, status: int, body: Any, headers: dict[str, str]) -> None:
        extra = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
        if body is None:
            reason, message = GENERIC_REASONS.get(status, ("", f"the server responded with the status code {status}"))
            err = ApiError(status, reason, message, {})
            self._send(status, err.body(), ctype or "application/json", extra)
        elif isinstance(body, dict):
            self._send(status, body, ctype or "application/json", extra)
        else:
            raw = body.encode() if isinstance(body, str) else body
            self._send(status, raw, ctype or "text/plain; charset=utf-8", extra)

    # -- aggregated APIs ------------------------------------------------------------------------------
    def _maybe_proxy(self, req: RequestState, group: str, version: str, rest: list[str]) -> bool:
        cluster = self.emu.cluster
        with cluster.store.lock:
            svc = cluster.apiservice(group, version)
            backend = cluster.backend(group, version)
        if svc is None or not (svc.get("spec") or {}).get("service"):
            return False
        if rest:  # a resource request: authorized before the aggregator proxies it
            self._authorize_proxied(req, group, rest)
        conds = (svc.get("status") or {}).get("conditions") or []
        available = any(c.get("type") == "Available" and c.get("status") == "True" for c in conds)
        if not available or backend is None:
            self._send_error(service_unavailable_plain())
            return True
        if not rest:
            self._send(200, discovery.backend_resource_list(group, version, backend.resources))
            return True
        # the backend serves empty lists and 404s
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        res = next((r for r in backend.resources if r.get("name") == plural), None)
        if res is None:
            raise route_not_found()
        if len(rest) == 1:
            kind = res.get("kind", "")
            self._send(200, {"kind": f"{kind}List", "apiVersion": f"{group}/{version}", "metadata": {}, "items": []})
            return True
        from .errors import not_found_resource

        _ = namespace
        raise not_found_resource(plural, group, rest[1])

    def _authorize_proxied(self, req: RequestState, group: str, rest: list[str]) -> None:
        if req.admin or not self.emu.cluster.rbac:
            return
        assert req.identity is not None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        name = rest[1] if len(rest) >= 2 else ""
        watching = req.query.get("watch", "").lower() in ("1", "true")
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(req.method, "")
        if req.method in ("GET", "HEAD"):
            verb = "watch" if watching else ("get" if name else "list")
        elif req.method == "DELETE":
            verb = "delete" if name else "deletecollection"
        attrs = rbac.Attributes(
            req.identity,
            verb or req.method.lower(),
            group=group,
            resource=rest[0],
            subresource=rest[2] if len(rest) >= 3 else "",
            namespace=namespace,
            name=name,
        )
        decision = rbac.authorize(self.emu.cluster, attrs)
        if not decision.allowed:
            raise rbac.forbidden_error(attrs, decision.reason)

    # -- resources ------------------------------------------------------------------------------------
    def _parse_resource(self, group: str, version: str, rest: list[str]) -> ResourceRequest:
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace: str | None = None
        if (
            rest
            and rest[0] == "namespaces"
            and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES and group == "")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise route_not_found()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        rt = self.emu.cluster.lookup(group, version, plural)
        if rt is None:
            raise route_not_found()
        if rt.namespaced is False and namespace is not None:
            raise route_not_found()
        if group == "" and plural == "namespaces" and name is not None:
            namespace = None
        return ResourceRequest(rt, group, version, plural, namespace, name, sub, watch_path)

    def _verb(self, req: RequestState, rr: ResourceRequest) -> str:
        watching = rr.watch_path or req.query.get("watch", "").lower() in ("1", "true")
        if req.method in ("GET", "HEAD"):
            if watching:
                return "watch"
            return "get" if rr.name else "list"
        return {
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if rr.name else "deletecollection",
        }.get(req.method, req.method.lower())

    def _authorize(self, req: RequestState, rr: ResourceRequest, verb: str) -> None:
        if req.admin or rr.rt is None:
            return
        rt = rr.rt
        namespace = rr.namespace
        if rt.group == "" and rt.plural == "namespaces" and rr.name:
            namespace = rr.name
        resource = f"{rt.plural}/{rr.sub}" if rr.sub else rt.plural
        name = rr.name or ""
        if not name and verb in ("list", "watch"):
            for part in req.query.get("fieldSelector", "").split(","):
                if part.startswith("metadata.name="):
                    name = part.split("=", 1)[1]
        assert req.identity is not None
        attrs = rbac.Attributes(
            req.identity,
            verb,
            group=rt.group,
            resource=rt.plural,
            subresource=rr.sub or "",
            namespace=namespace or "",
            name=name,
        )
        knobs = self.emu.knobs
        if knobs.is_forbidden(rt.plural, rt.group, verb, namespace) or (
            rr.sub and knobs.is_forbidden(resource, rt.group, verb, namespace)
        ):
            raise rbac.forbidden_error(attrs)
        if self.emu.cluster.rbac:
            decision = rbac.authorize(self.emu.cluster, attrs)
            if not decision.allowed:
                raise rbac.forbidden_error(attrs, decision.reason)

    def _dry_run(self, req: RequestState, kind: str) -> bool:
        values = req.query_lists.get("dryRun")
        if kind == "DeleteOptions" and req.body:
            # handlers/delete.go: a DeleteOptions body is read instead of the query (kubectl sends one)
            body = self._json_body(req)
            if isinstance(body, dict) and "dryRun" in body:
                values = [str(v) for v in body.get("dryRun") or []]
        if not values:
            return False
        bad = [v for v in values if v != "All"]
        if bad:
            raise invalid(
                kind,
                "meta.k8s.io",
                "",
                [
                    FieldError(
                        "dryRun",
                        "Unsupported value",
                        'supported values: "All"',
                        "[]string{" + ", ".join(json.dumps(v) for v in values) + "}",
                    )
                ],
            )
        return True

    def _json_body(self, req: RequestState) -> Any:
        if not req.body:
            return None
        ctype = (req.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype == "application/vnd.kubernetes.protobuf":
            try:
                return protobuf.decode_object(req.body)
            except ProtobufError:
                pass
        if ctype not in ("application/json", "application/yaml", "application/apply-patch+yaml", "*/*", ""):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml",
            )
        try:
            if ctype in ("application/yaml", "application/apply-patch+yaml"):
                import yaml

                return yaml.safe_load(req.body.decode())
            return json.loads(req.body)
        except ValueError as exc:
            raise ApiError(
                400, "BadRequest", f"Object 'Kind' is missing in '{req.body[:200].decode(errors='replace')}'"
            ) from exc

    def _resource(self, req: RequestState, rr: ResourceRequest) -> None:
        rt = rr.rt
        assert rt is not None
        cluster = self.emu.cluster
        verb = self._verb(req, rr)
        if rr.sub is not None:
            verbs = rt.sub_verbs(rr.sub)
            if verbs is None:
                raise route_not_found()
            if verb not in verbs:
                raise method_not_allowed()
        elif (verb not in rt.verbs and verb != "watch") or (verb == "watch" and "watch" not in rt.verbs):
            raise method_not_allowed()
        if verb == "create" and rr.name is not None and rr.sub is None:
            raise method_not_allowed()
        if rt.namespaced and rr.namespace is None and verb in ("create", "deletecollection") and rr.sub is None:
            raise method_not_allowed()
        if rt.namespaced and rr.namespace is None and rr.name is not None:
            raise route_not_found()
        self._authorize(req, rr, verb)
        ns = rr.namespace or ""
        if rr.sub == "scale" and rr.name is not None:
            ctx = Ctx(req.user, self._dry_run(req, "UpdateOptions"), admin=req.admin)
            body = None
            if verb in ("update", "patch"):
                body = self._json_body(req) if verb == "update" else req.body
            res = cluster.scale(
                rt, ns, rr.name, verb=verb, body=body, content_type=req.headers.get("Content-Type") or "", ctx=ctx
            )
            self._send(res.code, res.body)
            return
        if verb == "watch":
            self._watch(req, rr)
            return
        if verb == "get":
            assert rr.name is not None
            if rr.sub == "log":
                pod = json.loads(cluster.get(rt, ns, rr.name).body)
                container = podlogs.container_of(pod, req.query)
                lines = self.emu.pod_logs.lines(ns, rr.name, container)
                body = podlogs.render(lines, req.query, self.emu.clock.now(), rr.name)
                self._send(200, body, "text/plain")
                return
            res = cluster.get(rt, ns, rr.name)
            self._reply(req, rt, res)
            return
        if verb == "list":
            res = cluster.list_objects(rt, rr.namespace, req.query)
            self._reply(req, rt, res, is_list=True)
            return
        if verb == "create":
            ctx = Ctx(
                req.user,
                self._dry_run(req, "CreateOptions"),
                admin=req.admin,
                identity=req.identity,
                manager=_field_manager(req),
            )
            if rr.sub is not None:
                assert rr.name is not None
                res = cluster.create_subresource(rt, ns, rr.name, rr.sub, body=self._json_body(req), ctx=ctx)
                self._send(res.code, res.body, warnings=res.warnings)
                return
            if rt.group == events_v1.GROUP:  # stored as a core Event, answered as events.k8s.io
                res = cluster.create(self._core_events(), ns, self._events_body(req), ctx)
                self._reply(req, rt, self._as_events_v1(res))
                return
            res = cluster.create(rt, ns, self._json_body(req), ctx)
            self._reply(req, rt, res)
            return
        if verb == "update":
            assert rr.name is not None
            ctx = Ctx(req.user, self._dry_run(req, "UpdateOptions"), manager=_field_manager(req))
            if rt.group == events_v1.GROUP:
                res = cluster.update(self._core_events(), ns, rr.name, self._events_body(req), sub=rr.sub, ctx=ctx)
                self._reply(req, rt, self._as_events_v1(res))
                return
            res = cluster.update(rt, ns, rr.name, self._json_body(req), sub=rr.sub, ctx=ctx)
            self._reply(req, rt, res)
            return
        if verb == "patch":
            assert rr.name is not None
            ctx = Ctx(req.user, self._dry_run(req, "PatchOptions"), manager=_field_manager(req))
            if (req.headers.get("Content-Type") or "").startswith("application/apply-patch"):
                ctx.operation = "Apply"
            res = cluster.patch(
                rt,
                ns,
                rr.name,
                content_type=req.headers.get("Content-Type") or "",
                raw=req.body,
                sub=rr.sub,
                ctx=ctx,
                query=req.query,
            )
            self._reply(req, rt, res)
            return
        if verb == "delete":
            assert rr.name is not None
            ctx = Ctx(req.user, self._dry_run(req, "DeleteOptions"), admin=req.admin, identity=req.identity)
            opts = DeleteOptions.parse(self._json_body(req), req.query)
            res = cluster.delete(rt, ns, rr.name, opts, ctx)
            self._reply(req, rt, res)
            return
        if verb == "deletecollection":
            ctx = Ctx(req.user, self._dry_run(req, "DeleteOptions"))
            opts = DeleteOptions.parse(self._json_body(req), req.query)
            res = cluster.delete_collection(rt, rr.namespace, opts, req.query, ctx)
            self._reply(req, rt, res)
            return
        raise method_not_allowed()

    def _core_events(self) -> ResourceType:
        return self.emu.cluster.rt("", "v1", "events")

    def _events_body(self, req: RequestState) -> Any:
        body = self._json_body(req)
        return events_v1.to_core(body) if isinstance(body, dict) else body

    @staticmethod
    def _as_events_v1(res: Result) -> Result:
        obj = json.loads(res.body) if isinstance(res.body, bytes) else res.body
        if res.code < 300 and isinstance(obj, dict) and obj.get("kind") == "Event":
            return replace(res, body=dumps(events_v1.to_events_v1(obj)))
        return res

    def _reply(self, req: RequestState, rt: ResourceType, res: Result, *, is_list: bool = False) -> None:
        accept = req.headers.get("Accept") or ""
        body = res.body
        if "as=Table" in accept and req.method == "GET":
            obj = json.loads(body) if isinstance(body, bytes) else body
            table = tables.to_table(
                self.emu.cluster, rt, obj, is_list=is_list, include_object=req.query.get("includeObject", "Metadata")
            )
            self._send(res.code, table, warnings=res.warnings)
            return
        # as the API server's transformResponseObject: every verb that answers with the object
        if (
            "as=PartialObjectMetadata" in accept
            and req.method in ("GET", "DELETE", "PATCH", "PUT", "POST")
            and res.code < 300
        ):
            obj = json.loads(body) if isinstance(body, bytes) else body
            if obj.get("kind") != "Status":
                self._send(res.code, partial_metadata(obj, is_list=is_list), warnings=res.warnings)
                return
        self._send(res.code, body, warnings=res.warnings)

    # -- openapi --------------------------------------------------------------------------------------
    def _openapi(self, req: RequestState, path: str) -> None:
        self._get_only(req)
        doc = openapi.document(self.emu.cluster, path)
        if doc is None:
            raise route_not_found()
        self._send(200, doc)

    # -- watch ----------------------------------------------------------------------------------------
    def _watch(self, req: RequestState, rr: ResourceRequest) -> None:
        rt = rr.rt
        assert rt is not None
        cluster = self.emu.cluster
        store = cluster.store
        label_reqs = parse_label_selector(req.query.get("labelSelector", ""))
        field_reqs = parse_field_selector(req.query.get("fieldSelector", ""), rt.kind, rt.custom)
        name = rr.name
        namespace = rr.namespace if rt.namespaced else None
        timeout = float(req.query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + min(timeout, 3600)
        rv_param = req.query.get("resourceVersion", "")

        def matches(obj: dict[str, Any]) -> bool:
            meta = obj["metadata"]
            if name is not None and meta["name"] != name:
                return False
            if namespace is not None and meta.get("namespace", "") != namespace:
                return False
            if label_reqs and not labels_match(label_reqs, meta.get("labels")):
                return False
            return not (field_reqs and not fields_match(field_reqs, obj))

        initial: list[bytes] = []
        expired: int | None = None
        with store.lock:
            if rv_param in ("", "0"):
                last_rv = store.rv
                for entry in store.items(rt.key, namespace):
                    if matches(entry.obj):
                        initial.append(self._event_bytes("ADDED", rt, entry.obj, req))
            else:
                try:
                    last_rv = int(rv_param)
                except ValueError as exc:
                    raise ApiError(400, "BadRequest", f"invalid resource version: {rv_param}") from exc
                if last_rv < store.first_rv - 1 and store.events:
                    expired = last_rv
        self.send_response(200)
        self.send_header("Audit-Id", self.emu.next_audit_id())
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if expired is not None:
                status = ApiError(410, "Expired", f"too old resource version: {expired} ({store.first_rv})").status()
                self._chunk(dumps({"type": "ERROR", "object": status}) + b"\n")
                self._end_chunks()
                return
            for line in initial:
                self._chunk(line)
            while not self.emu.stopping.is_set():
                with store.lock:
                    events = store.events_after(last_rv)
                    if not events:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or store.closed:
                            break
                        store.cond.wait(timeout=min(remaining, 0.5))
                        events = store.events_after(last_rv)
                    picked: list[Event] = []
                    for ev in events:
                        last_rv = ev.rv
                        if ev.key == rt.key and matches(ev.entry.obj):
                            picked.append(ev)
                for ev in picked:
                    self._chunk(self._event_bytes(ev.type, rt, ev.entry.obj, req))
                if time.monotonic() >= deadline:
                    break
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _event_bytes(self, etype: str, rt: ResourceType, obj: dict[str, Any], req: RequestState) -> bytes:
        if rt.group == events_v1.GROUP and obj.get("kind") == "Event":
            obj = events_v1.to_events_v1(obj)
        if rt.custom and obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        if "as=Table" in (req.headers.get("Accept") or ""):
            # kubectl get -w: every event carries a one-row Table
            include = req.query.get("includeObject", "Metadata")
            obj = tables.to_table(self.emu.cluster, rt, obj, is_list=False, include_object=include)
        return dumps({"type": etype, "object": obj}) + b"\n"

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(UntracedHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    tls: ssl.SSLContext | None = None
    handshakes = 0  # TLS connections established (what a client that keeps its connections saves)
    _counting = threading.Lock()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        # the TLS handshake runs in the request's own thread, not in the accept loop
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        with self._counting:
            self.handshakes += 1
        try:
            super().finish_request(wrapped, client_address)
        finally:
            # the socket server closes the plain socket it accepted, which the wrapping emptied: the
            # TLS socket that took its place is closed here
            self.shutdown_request(wrapped)


def make_server(emu: Emulator, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> Server:
    handler = type("BoundHandler", (Handler,), {"emu": emu})
    server = Server((host, port), handler)
    server.tls = tls
    return server


def serve_in_thread(server: Server) -> threading.Thread:
    thread = threading.Thread(target=untraced(server.serve_forever), name="kube-emulator", daemon=True)
    thread.start()
    return thread


def _field_manager(req: RequestState) -> str:
    """The field manager of a write, as the API server names it: `?fieldManager=`, else the prefix of
    the User-Agent before its first "/" (client-go's "kubectl/v1.34.2 (linux/amd64)" -> "kubectl")."""
    return req.query.get("fieldManager") or (req.headers.get("User-Agent") or "").split("/", 1)[0]
