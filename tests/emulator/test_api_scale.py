"""Many custom resource types, many objects, many parallel requests with latency."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.emulator._api_support import Raw, admin, emu, make_ns, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]


def _crd(i: int) -> dict[str, object]:
    group = f"g{i % 5}.example.com"
    return {
        "metadata": {"name": f"things{i}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": f"things{i}", "kind": f"Thing{i}"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }


@pytest.mark.timing
def test_parallel_requests_with_latency_overlap(emu: Emulator, admin: Raw, user: Raw) -> None:
    make_ns(admin, "bench")
    for i in range(40):
        assert admin.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _crd(i)).status == 201

    def create(j: int) -> int:
        i = j % 40
        group = f"g{i % 5}.example.com"
        body = {
            "apiVersion": f"{group}/v1",
            "kind": f"Thing{i}",
            "metadata": {"name": f"o{j}", "finalizers": ["example.com/f"]},
        }
        return admin.post(f"/apis/{group}/v1/namespaces/bench/things{i}", body).status

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(create, range(400))) == {201}
    emu.knobs.latency(20)
    paths = ["/apis"] + [f"/apis/g{k}.example.com/v1" for k in range(5)]
    paths += [f"/apis/g{i % 5}.example.com/v1/namespaces/bench/things{i}" for i in range(40)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        responses = list(pool.map(user.get, paths * 4))
    elapsed = time.monotonic() - t0
    assert {r.status for r in responses} == {200}
    assert sum(len(r.json.get("items", [])) for r in responses[-40:]) == 400
    # 180 requests x 20 ms would take 3.6 s one after another
    assert elapsed < 1.5
    groups = {g["name"] for g in responses[0].json["groups"]}
    assert {f"g{k}.example.com" for k in range(5)} <= groups
    # resourceVersions are unique and increasing
    rvs = [int(i["metadata"]["resourceVersion"]) for r in responses[-40:] for i in r.json["items"]]
    assert len(set(rvs)) == 400
