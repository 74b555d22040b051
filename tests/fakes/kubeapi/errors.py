"""Kubernetes ``Status`` error bodies, worded as ``k8s.io/apimachinery/pkg/api/errors`` words them."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from .registry import ResourceType


class ApiError(Exception):
    """An error answered as a ``Status`` object (or, with ``raw``, as a plain body)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        raw: bytes | None = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.raw = raw
        self.content_type = content_type
        self.headers = headers or {}
        self.warnings: list[str] = []  # answered as Warning headers, as on a success

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.status(), separators=(",", ":")).encode()


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    out.update(extra)
    return out


def qualified(resource: str, group: str) -> str:
    """``schema.GroupResource.String()``: ``pods`` or ``kialis.kiali.io``."""
    return f"{resource}.{group}" if group else resource


def go_quote(value: str) -> str:
    """Go's ``%q`` for the printable strings used in messages."""
    return json.dumps(value, ensure_ascii=False)


def go_string_slice(values: list[str]) -> str:
    """Go's ``%#v`` of a ``[]string``."""
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f"{qualified(rt.plural, rt.group)} {go_quote(name)} not found",
        _details(name, rt.group, rt.plural),
    )


def not_found_resource(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f"{qualified(plural, group)} {go_quote(name)} not found", _details(name, group, plural)
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f"{qualified(rt.plural, rt.group)} {go_quote(name)} already exists",
        _details(name, rt.group, rt.plural),
    )


def conflict(resource: str, group: str, name: str, err: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {qualified(resource, group)} {go_quote(name)}: {err}",
        _details(name, group, resource),
    )


OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"


def optimistic_lock(rt: ResourceType, name: str) -> ApiError:
    return conflict(rt.plural, rt.group, name, OPTIMISTIC_LOCK)


class FieldError:
    """One ``field.Error``: renders as ``<field>: <Type>: <value>: <detail>``."""

    REASONS: ClassVar[dict[str, str]] = {
        "Invalid value": "FieldValueInvalid",
        "Forbidden": "FieldValueForbidden",
        "Unsupported value": "FieldValueNotSupported",
        "Required value": "FieldValueRequired",
        "Duplicate value": "FieldValueDuplicate",
    }

    def __init__(self, field: str, type_: str, detail: str = "", value: str | None = None) -> None:
        self.field = field
        self.type = type_
        self.detail = detail
        self.value = value  # already formatted the Go way (quoted string, number, []string{...})

    def body(self) -> str:
        s = self.type
        if self.value is not None:
            s += f": {self.value}"
        if self.detail:
            s += f": {self.detail}"
        return s

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": self.REASONS.get(self.type, "FieldValueInvalid"), "message": self.body(), "field": self.field}


def invalid(kind: str, group: str, name: str, errs: list[FieldError]) -> ApiError:
    """``errors.NewInvalid``: ``<Kind[.group]> "<n>" is invalid: <errs>``."""
    rendered = str(errs[0]) if len(errs) == 1 else "[" + ", ".join(str(e) for e in errs) + "]"
    return ApiError(
        422,
        "Invalid",
        f"{qualified(kind, group)} {go_quote(name)} is invalid: {rendered}",
        _details(name, group, kind, causes=[e.cause() for e in errs]),
    )


def forbidden(
    resource: str, group: str, name: str, reason: str, causes: list[dict[str, str]] | None = None
) -> ApiError:
    if not resource:
        message = f"forbidden: {reason}"
    elif name:
        message = f"{qualified(resource, group)} {go_quote(name)} is forbidden: {reason}"
    else:
        message = f"{qualified(resource, group)} is forbidden: {reason}"
    details = _details(name, group, resource)
    if causes:
        details["causes"] = causes
    return ApiError(403, "Forbidden", message, details)


def internal(err: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {err}", {"causes": [{"message": err}]})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_supported(resource: str, group: str, action: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"{action} is not supported on resources of kind {go_quote(qualified(resource, group))}",
        _details("", group, resource),
    )


def method_not_allowed() -> ApiError:
    """What go-restful answers for a route without that method."""
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def route_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f"application/json, application/yaml (got {content_type})",
    )


def service_unavailable_plain() -> ApiError:
    """The aggregator's answer for an unavailable APIService: plain text, no Status."""
    return ApiError(
        503,
        "ServiceUnavailable",
        "service unavailable",
        raw=b"service unavailable\n",
        content_type="text/plain; charset=utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )
