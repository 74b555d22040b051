"""Latency, faults, RBAC-style 403s, and watch."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, status_body, user
from tests.fakes.kubeapi import Emulator

# their assertions are about time: never beside another such test (tests/_scheduling.py)
pytestmark = pytest.mark.timing

__all__ = ["admin", "emu", "user"]


def test_latency_applies_to_users_not_to_the_admin(emu: Emulator, admin: Raw, user: Raw) -> None:
    emu.knobs.latency(150)
    t0 = time.monotonic()
    user.get("/api/v1/namespaces")
    assert time.monotonic() - t0 >= 0.15
    t0 = time.monotonic()
    admin.get("/api/v1/namespaces")
    assert time.monotonic() - t0 < 0.1
    emu.knobs.clear()
    emu.knobs.latency(200, match=r"^GET /apis/apps")
    t0 = time.monotonic()
    user.get("/api/v1/namespaces")
    assert time.monotonic() - t0 < 0.1


def test_latency_does_not_serialise_requests(emu: Emulator) -> None:
    emu.knobs.latency(100)
    raw = Raw(emu, emu.user_token)
    t0 = time.monotonic()
    threads = [threading.Thread(target=raw.get, args=("/api/v1/namespaces",)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - t0 < 0.6


def test_fault_injection(emu: Emulator, admin: Raw, user: Raw) -> None:
    emu.knobs.inject_fault(r"^GET /api/v1/namespaces$", 500, times=2)
    first = user.get("/api/v1/namespaces")
    assert first.status == 500
    assert first.json["reason"] == "InternalError"
    assert admin.get("/api/v1/namespaces").status == 200  # the admin is never faulted
    assert user.get("/api/v1/namespaces").status == 500
    assert user.get("/api/v1/namespaces").status == 200  # times=2 used up
    emu.knobs.inject_fault(r"/api/v1/nodes", 429, body="slow down", headers={"Retry-After": "1"})
    resp = user.get("/api/v1/nodes")
    assert (resp.status, resp.raw, resp.headers["Retry-After"]) == (429, b"slow down", "1")
    emu.knobs.inject_fault(r"^GET /apis$", 503, body="service unavailable\n", headers={"Content-Type": "text/html"})
    for _ in range(2):
        resp = user.get("/apis")
        assert (resp.status, resp.headers["Content-Type"], resp.raw) == (503, "text/html", b"service unavailable\n")
        assert len(resp.header_list("Content-Type")) == 1
    emu.knobs.inject_fault(r"/api/v1/secrets", 200, reset_connection=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        user.get("/api/v1/secrets")


def test_faults_by_query_and_in_alternation(emu: Emulator, user: Raw) -> None:
    paged = emu.knobs.inject_fault(r"^GET /api/v1/nodes$", 500, query=r"(^|&)continue=")
    assert user.get("/api/v1/nodes?limit=1").status == 200  # the path alone does not match
    assert user.get("/api/v1/nodes?limit=1&continue=abc").status == 500
    assert (paged.seen, paged.hits) == (1, 1)
    emu.knobs.clear()
    flapping = emu.knobs.inject_fault(r"^GET /apis/apps/v1$", 503, every=2)
    assert [user.get("/apis/apps/v1").status for _ in range(4)] == [503, 200, 503, 200]
    assert (flapping.seen, flapping.hits) == (4, 2)
    emu.knobs.clear()
    emu.knobs.inject_fault(r"^GET /apis/apps/v1$", 503, every=2, skip=1, times=1)
    assert [user.get("/apis/apps/v1").status for _ in range(4)] == [200, 503, 200, 200]
    with pytest.raises(ValueError, match="every must be at least 1"):
        emu.knobs.inject_fault(r"^GET /$", 500, every=0)


def test_forbid_answers_like_rbac(emu: Emulator, admin: Raw, user: Raw) -> None:
    make_ns(admin, "x")
    emu.knobs.forbid("pods")
    resp = user.get("/api/v1/namespaces/x/pods")
    assert resp.status == 403
    assert resp.json == status_body(
        403,
        "Forbidden",
        'pods is forbidden: User "system:serviceaccount:nsstuck:nsstuck" cannot list resource "pods" in API group "" '
        'in the namespace "x"',
        {"kind": "pods"},
    )
    resp = user.get("/api/v1/pods")
    assert resp.json["message"].endswith('cannot list resource "pods" in API group "" at the cluster scope')
    assert user.get("/api/v1/namespaces/x/pods/p").status == 404  # get is still allowed
    assert admin.get("/api/v1/namespaces/x/pods").status == 200
    emu.knobs.forbid("deployments", group="apps", verbs=("get", "list"), namespace="x")
    resp = user.get("/apis/apps/v1/namespaces/x/deployments/web")
    assert resp.json["message"] == (
        'deployments.apps "web" is forbidden: User "system:serviceaccount:nsstuck:nsstuck" cannot get resource '
        '"deployments" in API group "apps" in the namespace "x"'
    )
    assert resp.json["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    assert user.get("/apis/apps/v1/namespaces/default/deployments").status == 200
    emu.knobs.forbid("namespaces", verbs=("update",))
    ns = admin.get("/api/v1/namespaces/x").json
    resp = user.put("/api/v1/namespaces/x/finalize", ns)
    assert resp.json["message"] == (
        'namespaces "x" is forbidden: User "system:serviceaccount:nsstuck:nsstuck" cannot update resource '
        '"namespaces/finalize" in API group "" in the namespace "x"'
    )


def _stream(emu: Emulator, path: str, events: list[dict[str, Any]], stop_after: int) -> None:
    parts = urlsplit(emu.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {emu.user_token}"})
    resp = conn.getresponse()
    assert resp.status == 200
    while len(events) < stop_after:
        line = resp.readline()
        if not line:
            break
        events.append(json.loads(line))
    conn.close()


def test_watch_list_with_field_selector(emu: Emulator, user: Raw) -> None:
    make_ns(user, "w")
    start_rv = make_cm(user, "w", "other")["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []
    t = threading.Thread(
        target=_stream,
        args=(
            emu,
            f"/api/v1/namespaces/w/configmaps?watch=1&fieldSelector=metadata.name%3Dc&resourceVersion={start_rv}",
            events,
            3,
        ),
    )
    t.start()
    time.sleep(0.2)
    make_cm(user, "w", "c", finalizers=["example.com/x"])
    make_cm(user, "w", "ignored")
    user.delete("/api/v1/namespaces/w/configmaps/c")
    user.patch("/api/v1/namespaces/w/configmaps/c", {"metadata": {"finalizers": None}})
    t.join(timeout=5)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["metadata"]["deletionTimestamp"]
    assert events[2]["object"]["metadata"]["name"] == "c"


def test_watch_without_resource_version_replays_current_state(emu: Emulator, user: Raw) -> None:
    make_ns(user, "w2")
    make_cm(user, "w2", "a")
    events: list[dict[str, Any]] = []
    t = threading.Thread(target=_stream, args=(emu, "/api/v1/namespaces/w2/configmaps?watch=true", events, 2))
    t.start()
    time.sleep(0.2)
    make_cm(user, "w2", "b")
    t.join(timeout=5)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_times_out_and_too_old_versions_expire(emu: Emulator, user: Raw) -> None:
    rv = make_ns(user, "w3")["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []
    t0 = time.monotonic()
    _stream(emu, f"/api/v1/namespaces/w3/configmaps?watch=1&timeoutSeconds=1&resourceVersion={rv}", events, 10)
    assert 0.9 <= time.monotonic() - t0 < 3
    assert events == []
    _stream(emu, "/api/v1/namespaces/w3/configmaps?watch=1&resourceVersion=1", events, 10)
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] == "Expired"
    assert events[0]["object"]["message"].startswith("too old resource version: 1 (")
