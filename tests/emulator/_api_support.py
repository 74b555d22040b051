"""Helpers shared by the apiserver-half tests (tests/emulator/test_api_*.py)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fakes.kubeapi import Emulator, FakeClock

KUBECTL = "/usr/bin/kubectl"
START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def header_list(self, name: str) -> list[str]:
        return self.headers.get_all(name) or []


class Raw:
    """A bare HTTP client for one identity, to see status codes, headers and bodies exactly."""

    def __init__(self, emu: Emulator, token: str | None) -> None:
        parts = urlsplit(emu.url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> Response:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        hdrs = {"Accept": "application/json", **(headers or {})}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = content_type
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return Response(resp.status, resp.headers, resp.read())
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body: Any, **kw: Any) -> Response:
        return self.request("PUT", path, body, **kw)

    def patch(self, path: str, body: Any, ptype: str = "merge", **kw: Any) -> Response:
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[ptype]
        return self.request("PATCH", path, body, content_type=ctype, **kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("DELETE", path, body, **kw)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A started emulator WITHOUT controllers: only what the API server itself does."""
    e = Emulator(clock=FakeClock(START), seed=0, controllers=False)
    e.start()
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture
def admin(emu: Emulator) -> Raw:
    return Raw(emu, emu.admin_token)


@pytest.fixture
def user(emu: Emulator) -> Raw:
    return Raw(emu, emu.user_token)


def kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    return subprocess.run(
        [KUBECTL, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def make_ns(raw: Raw, name: str, **meta: Any) -> dict[str, Any]:
    resp = raw.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **meta}})
    assert resp.status == 201, resp.raw
    out: dict[str, Any] = resp.json
    return out


def make_cm(raw: Raw, ns: str, name: str, **meta: Any) -> dict[str, Any]:
    resp = raw.post(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"a": "b"}},
    )
    assert resp.status == 201, resp.raw
    out: dict[str, Any] = resp.json
    return out


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


KIALI_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "kialis.kiali.io"},
    "spec": {
        "group": "kiali.io",
        "names": {"plural": "kialis", "singular": "kiali", "kind": "Kiali", "listKind": "KialiList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "subresources": {"status": {}},
            }
        ],
    },
}
