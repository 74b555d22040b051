"""GET /api/v1/namespaces/NS/pods/NAME/log: the log lines stored on an emulated pod, served with the
kubelet's query parameters (tests/fakes/kubeapi/podlogs.py), and the real `kubectl logs` agreeing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.emulator._api_support import START, Raw, admin, emu, kubectl, make_ns, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]

LINES = [
    (START - timedelta(minutes=30), "starting manager"),
    (START - timedelta(minutes=20), 'reconcile failed: "deleting topic": broker refused'),
    (START - timedelta(minutes=10, microseconds=-250_000), "finalizer still present"),
    (START - timedelta(minutes=1), "retrying in 60s"),
]


def _pod(raw: Raw, ns: str, name: str, containers: list[str], node: str | None = "node-1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    resp = raw.post(
        f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    )
    assert resp.status == 201, resp.raw
    out: dict[str, Any] = resp.json
    return out


@pytest.fixture
def logged(emu: Emulator, admin: Raw) -> str:
    make_ns(admin, "ops")
    _pod(admin, "ops", "manager", ["manager"])
    emu.pod_logs.set("ops", "manager", LINES)
    return "/api/v1/namespaces/ops/pods/manager/log"


def _text(raw: Raw, path: str) -> str:
    resp = raw.get(path, headers={"Accept": "*/*"})
    assert resp.status == 200, resp.raw
    assert resp.headers["Content-Type"] == "text/plain"
    return resp.raw.decode()


def test_the_whole_log_in_order(logged: str, user: Raw) -> None:
    assert _text(user, logged).splitlines() == [text for _, text in LINES]


def test_tail_lines_keeps_the_newest(logged: str, user: Raw) -> None:
    assert _text(user, logged + "?tailLines=2").splitlines() == ["finalizer still present", "retrying in 60s"]
    assert _text(user, logged + "?tailLines=0") == ""


def test_since_time_and_since_seconds(logged: str, user: Raw) -> None:
    since = (START - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert _text(user, f"{logged}?sinceTime={since}").splitlines() == [text for _, text in LINES[1:]]
    # counted back from the emulator's clock (START)
    assert _text(user, f"{logged}?sinceSeconds=120").splitlines() == ["retrying in 60s"]


def test_tail_first_then_since(logged: str, user: Raw) -> None:
    since = (START - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert _text(user, f"{logged}?tailLines=2&sinceTime={since}").splitlines() == ["retrying in 60s"]


def test_timestamps_are_rfc3339_nano(logged: str, user: Raw) -> None:
    lines = _text(user, logged + "?timestamps=true").splitlines()
    assert lines[0] == "2026-11-20T07:30:00Z starting manager"
    assert lines[2] == "2026-11-20T07:50:00.25Z finalizer still present"


def test_limit_bytes_counts_from_the_start_of_the_selection(logged: str, user: Raw) -> None:
    body = _text(user, logged + "?limitBytes=20")
    assert body == "starting manager\nrec"
    # with a tail, from the start of the tail
    assert _text(user, logged + "?tailLines=1&limitBytes=8") == "retrying"


def test_container_required_when_there_are_several(emu: Emulator, admin: Raw, user: Raw) -> None:
    make_ns(admin, "ops")
    _pod(admin, "ops", "two", ["manager", "proxy"])
    emu.pod_logs.set("ops", "two", [(START, "from the manager")], container="manager")
    emu.pod_logs.set("ops", "two", [(START, "from the proxy")], container="proxy")
    resp = user.get("/api/v1/namespaces/ops/pods/two/log")
    assert resp.status == 400
    assert resp.json["message"] == "a container name must be specified for pod two, choose one of: [manager proxy]"
    assert _text(user, "/api/v1/namespaces/ops/pods/two/log?container=proxy") == "from the proxy\n"
    resp = user.get("/api/v1/namespaces/ops/pods/two/log?container=sidecar")
    assert (resp.status, resp.json["message"]) == (400, "container sidecar is not valid for pod two")


def test_refusals(emu: Emulator, admin: Raw, user: Raw, logged: str) -> None:
    resp = user.get(logged + "?tailLines=-1")
    assert resp.status == 422
    assert resp.json["message"] == (
        'PodLogOptions "manager" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0'
    )
    resp = user.get(logged + "?limitBytes=0")
    assert resp.status == 422
    assert "limitBytes: Invalid value: 0: must be greater than 0" in resp.json["message"]
    resp = user.get(logged + "?sinceSeconds=10&sinceTime=2026-11-20T07:00:00Z")
    assert resp.status == 422
    assert "at most one of `sinceTime` or `sinceSeconds` may be specified" in resp.json["message"]
    assert user.get("/api/v1/namespaces/ops/pods/ghost/log").status == 404
    _pod(admin, "ops", "pending", ["main"], node=None)
    resp = user.get("/api/v1/namespaces/ops/pods/pending/log")
    assert (resp.status, resp.json["message"]) == (400, "pod pending does not have a host assigned")


def test_forbidden_like_rbac(emu: Emulator, user: Raw, logged: str) -> None:
    emu.knobs.forbid("pods/log", verbs=("get",), namespace="ops")
    resp = user.get(logged)
    assert resp.status == 403
    assert resp.json["message"] == (
        'pods "manager" is forbidden: User "system:serviceaccount:nsstuck:nsstuck" cannot get resource '
        '"pods/log" in API group "" in the namespace "ops"'
    )


@pytest.mark.kubectl
def test_kubectl_logs_agrees(emu: Emulator, logged: str, tmp_path: Path, user: Raw) -> None:
    kc = tmp_path / "kc"
    emu.write_kubeconfig(kc)
    for args, query in (
        ((), ""),
        (("--tail=2",), "?tailLines=2"),
        (("--timestamps",), "?timestamps=true"),
        (("--since-time=2026-11-20T07:40:00Z",), "?sinceTime=2026-11-20T07:40:00Z"),
        (("--limit-bytes=30",), "?limitBytes=30"),
    ):
        out = kubectl(kc, "logs", "-n", "ops", "manager", *args)
        assert out.returncode == 0, out.stderr
        assert out.stdout == _text(user, logged + query), args
