"""Real calls of validating admission webhooks (AdmissionReview over HTTPS), for a namespace DELETE.

As ``k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go`` calls them: every
matching webhook at once, each bounded by its ``timeoutSeconds`` (sent as ``?timeout=Ns``), the server
certificate verified against the ``caBundle`` (the system roots without one) for the Service's DNS
name ``<name>.<namespace>.svc`` or the URL's host; a call that fails follows ``failurePolicy`` (Fail: a
500 ``Internal error occurred: failed calling webhook "<name>": failed to call webhook: Post ...``),
``allowed: false`` refuses with the webhook's ``status`` (``webhook/errors/statuserror.go``), and
the ``warnings`` of every webhook called are kept for the response's ``Warning`` headers, a refusal's
included. Only webhooks the emulator can reach are called this way (``endpoint``); the others stay
simulated (``admission.py``). Nothing here holds the store lock.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import ApiError, bad_request, internal

if TYPE_CHECKING:
    from .apiserver import Cluster

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_RESPONSE = 3 * 1024 * 1024  # the webhook client's largest answer read (more is an error)


@dataclass(frozen=True)
class Endpoint:
    """Where a webhook is called: ``shown`` is the URL the API server names (in errors), ``address``
    where the emulator connects, ``server_name`` the name the certificate must carry."""

    shown: str
    address: tuple[str, int]
    server_name: str
    host_header: str


def endpoint(cluster: Cluster, hook: dict[str, Any]) -> Endpoint | None:
    """The endpoint of a webhook the emulator calls for real: a ``clientConfig.url`` on a loopback
    host, or a ``clientConfig.service`` routed with ``emu.route_service``; None otherwise."""
    cfg = hook.get("clientConfig") or {}
    if cfg.get("url"):
        parts = urlsplit(str(cfg["url"]))
        host = parts.hostname or ""
        if parts.scheme != "https" or host not in LOOPBACK_HOSTS:
            return None
        port = parts.port or 443
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        shown = f"https://{parts.netloc}{parts.path}"
        return Endpoint(shown, (host, port), host, netloc if parts.port else host)
    svc = cfg.get("service") or {}
    namespace, name = str(svc.get("namespace") or ""), str(svc.get("name") or "")
    port = int(svc.get("port") or 443)
    address = cluster.service_routes.get((namespace, name, port))
    if address is None:
        return None
    dns = f"{name}.{namespace}.svc"
    return Endpoint(f"https://{dns}:{port}{svc.get('path') or ''}", address, dns, f"{dns}:{port}")


@dataclass
class Review:
    """What the API server knows of one namespace DELETE when it calls the webhooks."""

    name: str
    old_object: dict[str, Any]
    user_info: dict[str, Any]
    options: dict[str, Any]
    dry_run: bool
    remote: list[tuple[dict[str, Any], Endpoint]] = field(default_factory=list)

    def request(self, uid: str) -> dict[str, Any]:
        """The AdmissionRequest (``request/admissionreview.go`` CreateV1AdmissionReview), as Go encodes
        it: the namespace's own name as ``namespace``, ``object`` null, ``oldObject`` the namespace."""
        gvk = {"group": "", "version": "v1", "kind": "Namespace"}
        gvr = {"group": "", "version": "v1", "resource": "namespaces"}
        return {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": self.name,
            "namespace": self.name,
            "operation": "DELETE",
            "userInfo": self.user_info,
            "object": None,
            "oldObject": self.old_object,
            "dryRun": self.dry_run,
            "options": self.options,
        }


class CallFailed(Exception):
    """``webhookutil.ErrCallingWebhook``: the reason after ``failed calling webhook "<name>": ``."""


def go_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def dispatch(review: Review) -> list[str]:
    """Call every remote webhook of ``review`` at once; return their warnings, or raise the first error
    to arrive (as the dispatcher returns ``errs[0]``) with the warnings recorded so far."""
    lock = threading.Lock()
    warnings: list[str] = []
    errors: list[ApiError] = []

    def run(hook: dict[str, Any], where: Endpoint) -> None:
        name = str(hook.get("name") or "")
        try:
            got, denial = _call(review, hook, where)
        except CallFailed as exc:
            if (hook.get("failurePolicy") or "Fail") == "Ignore":
                return
            with lock:
                errors.append(internal(f'failed calling webhook "{name}": {exc}'))
            return
        except ApiError as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            warnings.extend(got)
            if denial is not None:
                errors.append(denial)

    threads = [
        threading.Thread(target=run, args=(hook, where), name=f"webhook-{hook.get('name')}", daemon=True)
        for hook, where in review.remote
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        errors[0].warnings = [*warnings, *errors[0].warnings]
        raise errors[0]
    return warnings


def _call(review: Review, hook: dict[str, Any], where: Endpoint) -> tuple[list[str], ApiError | None]:
    """One webhook: its warnings and its refusal (None when allowed); CallFailed or ApiError otherwise."""
    name = str(hook.get("name") or "")
    if review.dry_run:
        effects = hook.get("sideEffects")
        if effects is None:
            raise CallFailed("Webhook SideEffects is nil")
        if effects not in ("None", "NoneOnDryRun"):
            raise bad_request(f'admission webhook "{name}" does not support dry run')
    versions = [v for v in hook.get("admissionReviewVersions") or [] if v in ("v1", "v1beta1")]
    if not versions:
        raise CallFailed(
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
        )
    version = versions[0]
    uid = str(uuid.uuid4())
    body = json.dumps(
        {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": review.request(uid)},
        separators=(",", ":"),
    ).encode()
    timeout = int(hook.get("timeoutSeconds") or 10)
    url = f"{where.shown}?timeout={go_duration(timeout)}"
    context = _tls_context((hook.get("clientConfig") or {}).get("caBundle"))
    status, raw = _post(where, url, body, context, timeout)
    reply = _decode(url, status, raw)
    response = reply.get("response")
    if not isinstance(response, dict):
        raise CallFailed("received invalid webhook response: webhook response was absent")
    if version == "v1":
        if response.get("uid", "") != uid:
            raise CallFailed(
                f'received invalid webhook response: expected response.uid="{uid}", got "{response.get("uid", "")}"'
            )
        if reply.get("apiVersion") != "admission.k8s.io/v1" or reply.get("kind") != "AdmissionReview":
            got_gv, got_kind = reply.get("apiVersion") or "", reply.get("kind") or ""
            group, _, gv_version = got_gv.rpartition("/")
            raise CallFailed(
                "received invalid webhook response: expected webhook response of "
                f"admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{gv_version}, Kind={got_kind}"
            )
    warnings = [str(w) for w in response.get("warnings") or []]
    if response.get("allowed") is True:
        return warnings, None
    return warnings, _refusal(name, response.get("status"))


def _refusal(name: str, result: Any) -> ApiError:
    """``webhook/errors/statuserror.go`` ToStatusErr: the webhook's Status, a code under 400 raised to
    400, its message prefixed with ``admission webhook "<name>" denied the request``."""
    status = dict(result) if isinstance(result, dict) else {}
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return ApiError(max(int(code or 0), 400), str(status.get("reason") or ""), message, details)


def _tls_context(ca_bundle: Any) -> ssl.SSLContext:
    if not ca_bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(str(ca_bundle), validate=True).decode()
        return ssl.create_default_context(cadata=pem)
    except (ValueError, ssl.SSLError) as exc:
        raise CallFailed(
            "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block"
        ) from exc


def _post(where: Endpoint, url: str, body: bytes, context: ssl.SSLContext, timeout: int) -> tuple[int, bytes]:
    """POST the review; the whole call (connect, TLS, answer) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    parts = urlsplit(url)
    path = f"{parts.path or '/'}?{parts.query}"
    host, port = where.address
    outcome: dict[str, Any] = {}
    held: list[socket.socket] = []

    def attempt() -> None:
        raw_sock: socket.socket | None = None
        try:
            try:
                # the deadline is the caller's join below; this only ends a worker left behind
                raw_sock = socket.create_connection((host, port), timeout=timeout + 5)
            except ConnectionRefusedError:
                outcome["error"] = f"dial tcp {_hostport(host, port)}: connect: connection refused"
                return
            held.append(raw_sock)
            try:
                tls = context.wrap_socket(raw_sock, server_hostname=where.server_name)
            except ssl.SSLCertVerificationError as exc:
                outcome["error"] = f"tls: failed to verify certificate: {_x509(exc, where)}"
                return
            raw_sock = tls
            held.append(tls)
            request = (
                f"POST {path} HTTP/1.1\r\nHost: {where.host_header}\r\nUser-Agent: kube-apiserver-admission\r\n"
                "Content-Type: application/json\r\nAccept: application/json, */*\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            tls.sendall(request + body)
            response = http.client.HTTPResponse(tls, method="POST")
            try:
                response.begin()
                raw = response.read(MAX_RESPONSE + 1)
            finally:
                response.close()
            outcome["reply"] = (response.status, raw)
        except (http.client.RemoteDisconnected, http.client.IncompleteRead, ssl.SSLEOFError):
            outcome["error"] = "EOF"
        except TimeoutError:
            outcome["error"] = "context deadline exceeded"
        except ConnectionResetError:
            outcome["error"] = "read: connection reset by peer"
        except (OSError, http.client.HTTPException) as exc:
            outcome["error"] = str(exc) or type(exc).__name__
        finally:
            if raw_sock is not None:
                with contextlib.suppress(OSError):
                    raw_sock.close()

    worker = threading.Thread(target=attempt, name="webhook-call", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        for sock in held:  # wake the blocked read; the worker closes its socket
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        worker.join(5)
        raise CallFailed(f'failed to call webhook: Post "{url}": context deadline exceeded')
    if "error" in outcome:
        raise CallFailed(f'failed to call webhook: Post "{url}": {outcome["error"]}')
    status, raw = outcome["reply"]
    if len(raw) > MAX_RESPONSE:
        raise CallFailed(f'failed to call webhook: Post "{url}": the response exceeds {MAX_RESPONSE} bytes')
    return int(status), bytes(raw)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _x509(exc: ssl.SSLCertVerificationError, where: Endpoint) -> str:
    """Go's crypto/x509 words for the two verification failures: a certificate for other names
    (listing the names it is valid for), or an unknown authority."""
    if exc.verify_code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
        return f"x509: certificate is valid for {_names(where)}, not {where.server_name}"
    return "x509: certificate signed by unknown authority"


def _names(where: Endpoint) -> str:
    """The names of the certificate ``where`` serves (read again without verification)."""
    from cryptography import x509

    loose = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    loose.check_hostname = False
    loose.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(where.address, timeout=5) as raw,
            loose.wrap_socket(raw, server_hostname=where.server_name) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return "other names"
    if not der:
        return "other names"
    cert = x509.load_der_x509_certificate(der)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "other names"
    names = [str(n) for n in sans.get_values_for_type(x509.DNSName)]
    names += [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    return ", ".join(names) or "other names"


def _decode(url: str, status: int, raw: bytes) -> dict[str, Any]:
    """client-go's ``Do().Into()``: a non-2xx answer is an error (its Status's message when it is one),
    a body that is not JSON a decoding error."""
    try:
        parsed: Any = json.loads(raw) if raw else None
    except ValueError as exc:
        if 200 <= status < 300:
            raise CallFailed(
                f"failed to call webhook: couldn't get version/kind; json parse error: {exc.args[0]}"
            ) from exc
        parsed = None
    if not 200 <= status < 300:
        if isinstance(parsed, dict) and parsed.get("kind") == "Status" and parsed.get("message"):
            raise CallFailed(f"failed to call webhook: {parsed['message']}")
        if status == 404:
            raise CallFailed("failed to call webhook: the server could not find the requested resource")
        text = raw.decode(errors="replace").strip()
        raise CallFailed(
            f'failed to call webhook: an error on the server ("{text}") has prevented the request from succeeding'
        )
    if not isinstance(parsed, dict):
        raise CallFailed("failed to call webhook: couldn't get version/kind; json parse error: not an object")
    return parsed
