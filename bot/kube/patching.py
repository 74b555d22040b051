"""Executing Operations: the one place where nsstuck changes a cluster.

An Operation already carries its preconditions (see bot.remediation.planning); this module sends it,
as a dry run or for real, and classifies the API server's answer. It never retries a change: an
answer is final, and no answer (UNREACHABLE) means the change may or may not have happened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bot.domain.changes import CallResult, Operation, Verdict, object_path
from bot.domain.refs import KubeObject, ObjectRef
from bot.domain.values import holds_values, metadata_only
from bot.errors import ClusterUnreachableError, PermanentError
from bot.kube.transport import JSON, METADATA, CallError, CallKind, Transport

JSON_PATCH = "application/json-patch+json"
# the field manager of every write nsstuck makes: the API server records it in the object's
# managedFields, where the diagnosis tells nsstuck's own writes from a controller's (bot.diagnosis.controllers)
FIELD_MANAGER = "nsstuck"

# What k8s.io/apiserver answers when a JSON patch cannot be applied, a failed `test` included: a 422
# built by NewGenericServerResponse, with empty details and without the json-patch error text
# (endpoints/handlers/patch.go, applyJSPatch).
PATCH_NOT_APPLICABLE = "the server rejected our request due to an error in our request"

# Admission refusals, in the words of k8s.io/apiserver: a webhook that denies (any status the webhook
# chose, often 400 or 403), a webhook that cannot be called with failurePolicy Fail (500), a webhook
# without dry-run support (400), and a ValidatingAdmissionPolicy that denies (403 or 422).
_ADMISSION = re.compile(
    r'admission webhook "[^"]*" (denied the request|does not support dry run)'
    r'|failed calling webhook "'
    r"|ValidatingAdmissionPolicy '[^']*' with binding '[^']*' denied request"
)


def _accept(ref: ObjectRef) -> str:
    """Secrets and ConfigMaps are read, and answered after a change, as metadata only: their values
    are never sent to nsstuck (what a remedy changes of them is metadata: finalizers)."""
    return METADATA if holds_values(ref.api_version, ref.kind) else JSON


class Patcher:
    """Reads objects right before a change, and runs Operations (dry run or real)."""

    def __init__(self, transport: Transport, *, timeout: float | Callable[[], float] | None = None) -> None:
        """`timeout`: every call's, or a function that gives it for each call as it is sent (the time
        left to a deadline); the transport's call timeout without one."""
        self.transport = transport
        self.timeout = timeout

    def _timeout(self) -> float:
        if self.timeout is None:
            return self.transport.call_timeout
        return self.timeout() if callable(self.timeout) else self.timeout

    def _where(self) -> str:
        connection = self.transport.connection
        return f"cluster {connection.target.name!r} ({connection.host})"

    def read(self, ref: ObjectRef) -> KubeObject | None:
        """The object as it is now, or None when it no longer exists.

        Raises ClusterUnreachableError when there is no answer or our credentials are refused (401),
        PermanentError with the API server's words for any other refusal (403, 5xx, ...).
        """
        accept = _accept(ref)
        try:
            doc = self.transport.call("GET", object_path(ref), timeout=self._timeout(), accept=accept)
        except CallError as e:
            if e.status == 404:
                return None
            if e.kind in (CallKind.CONNECTION, CallKind.TIMEOUT):
                raise ClusterUnreachableError(f"{self._where()} is unreachable: {e.message}") from None
            if e.status == 401:
                raise ClusterUnreachableError(f"{self._where()} refuses our credentials: {e.message}") from None
            raise PermanentError(f"cannot read {ref.display}: {e.message}") from None
        if not isinstance(doc, dict):
            raise PermanentError(f"cannot read {ref.display}: the server did not answer with an object")
        if accept == METADATA:
            # `PartialObjectMetadata` in the answer's own words; and nothing else, should a server send more
            return metadata_only(doc, ref.api_version, ref.kind)
        return doc

    def run(self, op: Operation, *, dry_run: bool) -> CallResult:
        """Send the Operation (with `dryRun=All` for a dry run). Never raises for an answer."""
        accept = _accept(op.target)
        query = {"fieldManager": FIELD_MANAGER} if op.method in ("PATCH", "PUT", "POST") else {}
        if dry_run:
            query["dryRun"] = "All"
        try:
            answer = self.transport.call(
                op.method,
                op.path,
                query=query or None,
                body=op.body,
                content_type=op.content_type,
                timeout=self._timeout(),
                accept=accept,
            )
        except CallError as e:
            return classify(op, e)
        # PATCH, PUT and DELETE (without orphanDependents=false) answer 200 when they succeed
        if isinstance(answer, dict) and accept == METADATA and answer.get("kind") != "Status":
            answer = metadata_only(answer, op.target.api_version, op.target.kind)
        return CallResult(Verdict.OK, "", 200, answer if isinstance(answer, dict) else None)


def classify(op: Operation, error: CallError) -> CallResult:
    """The verdict on a refused or unanswered Operation, with the API server's own message."""
    message = error.message
    status = error.status
    if error.kind in (CallKind.CONNECTION, CallKind.TIMEOUT):
        return CallResult(Verdict.UNREACHABLE, message, None)
    if _ADMISSION.search(message):
        return CallResult(Verdict.DENIED, message, status)
    if status == 409:
        return CallResult(Verdict.CONFLICT, message, status)
    if status == 422 and op.content_type == JSON_PATCH and _is_patch_not_applicable(error):
        # our JSON patches can only fail to apply on their `test` operations (uid, resourceVersion,
        # finalizer at its index): the object is no longer the one that was checked
        return CallResult(
            Verdict.CONFLICT,
            f"a precondition failed: {op.target.display} changed since it was checked (the server said: {message})",
            status,
        )
    if status == 404:
        return CallResult(Verdict.GONE, message, status)
    if status == 403:
        return CallResult(Verdict.FORBIDDEN, message, status)
    if status in (400, 422):
        return CallResult(Verdict.DENIED, message, status)
    return CallResult(Verdict.ERROR, message, status)


def _is_patch_not_applicable(error: CallError) -> bool:
    """The generic 422 of a JSON patch that does not apply, as opposed to a validation error on the
    patched object (`<Kind> "<name>" is invalid: ...`, whose details name the kind)."""
    if error.message != PATCH_NOT_APPLICABLE:
        return False
    details: Any = None
    try:
        details = (json.loads(error.body or "") or {}).get("details")
    except (ValueError, AttributeError):
        return True  # not a Status body: nothing contradicts the message
    return not (isinstance(details, dict) and details.get("kind"))
