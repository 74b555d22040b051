"""The namespace lifecycle of the reference's section 1."""

from __future__ import annotations

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, status_body, user
from tests.fakes.kubeapi import Emulator

__all__ = ["admin", "emu", "user"]


def test_create_adds_spec_finalizer_phase_and_name_label(user: Raw) -> None:
    ns = make_ns(user, "fresh")
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["status"] == {"phase": "Active"}
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "fresh"}
    # a status in the create body is ignored
    resp = user.post("/api/v1/namespaces", {"metadata": {"name": "other"}, "status": {"phase": "Terminating"}})
    assert resp.json["status"] == {"phase": "Active"}


def test_first_delete_marks_terminating_and_returns_the_namespace(emu: Emulator, user: Raw) -> None:
    make_ns(user, "gone")
    emu.clock.advance(90)  # type: ignore[attr-defined]
    resp = user.delete(
        "/api/v1/namespaces/gone", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    )
    assert resp.status == 200
    body = resp.json
    assert body["kind"] == "Namespace"
    assert body["metadata"]["deletionTimestamp"] == "2026-11-20T08:01:30Z"
    assert "deletionGracePeriodSeconds" not in body["metadata"]
    assert body["status"]["phase"] == "Terminating"
    assert body["spec"]["finalizers"] == ["kubernetes"]
    assert "finalizers" not in body["metadata"]
    # deleting again: 200 with the object, not the pre-1.17 409
    again = user.delete("/api/v1/namespaces/gone")
    assert again.status == 200
    assert again.json["metadata"]["deletionTimestamp"] == "2026-11-20T08:01:30Z"
    assert again.json["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]


def test_delete_with_foreground_or_orphan_sets_gc_finalizers(user: Raw) -> None:
    make_ns(user, "fg")
    resp = user.delete("/api/v1/namespaces/fg", {"propagationPolicy": "Foreground"})
    assert resp.status == 200
    assert resp.json["metadata"]["finalizers"] == ["foregroundDeletion"]
    make_ns(user, "orph")
    resp = user.delete("/api/v1/namespaces/orph", {"orphanDependents": False})
    assert resp.status == 202  # the only 202: not deleted and orphanDependents=false
    assert resp.json["metadata"]["finalizers"] == ["foregroundDeletion"]
    make_ns(user, "orph2")
    resp = user.delete("/api/v1/namespaces/orph2", {"propagationPolicy": "Orphan"})
    assert resp.json["metadata"]["finalizers"] == ["orphan"]


def test_uid_and_resource_version_preconditions(user: Raw) -> None:
    ns = make_ns(user, "pre")
    uid = ns["metadata"]["uid"]
    resp = user.delete("/api/v1/namespaces/pre", {"preconditions": {"uid": "wrong"}})
    assert resp.status == 409
    assert resp.json == status_body(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on namespaces "pre": Precondition failed: UID in precondition: wrong, UID in '
        f"object meta: {uid}",
        {"name": "pre", "kind": "namespaces"},
    )
    resp = user.delete("/api/v1/namespaces/pre", {"preconditions": {"resourceVersion": "1"}})
    assert resp.status == 409
    assert resp.json["message"].endswith(
        f"Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: "
        f"{ns['metadata']['resourceVersion']}"
    )
    assert user.delete("/api/v1/namespaces/pre", {"preconditions": {"uid": uid}}).status == 200


def test_immortal_namespaces(user: Raw) -> None:
    for name in ("default", "kube-system", "kube-public"):
        resp = user.delete(f"/api/v1/namespaces/{name}")
        assert resp.status == 403
        assert resp.json == status_body(
            403,
            "Forbidden",
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            {"name": name, "kind": "namespaces"},
        )


def test_no_new_content_in_a_terminating_namespace(user: Raw) -> None:
    make_ns(user, "term")
    make_cm(user, "term", "old")
    user.delete("/api/v1/namespaces/term")
    resp = user.post(
        "/api/v1/namespaces/term/pods",
        {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    assert resp.status == 403
    assert resp.json == status_body(
        403,
        "Forbidden",
        'pods "x" is forbidden: unable to create new content in namespace term because it is being terminated',
        {
            "name": "x",
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": "namespace term is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
    )
    # updates of existing content are still allowed
    assert user.patch("/api/v1/namespaces/term/configmaps/old", {"data": {"n": "1"}}).status == 200


def test_plain_update_of_spec_finalizers_is_silently_ignored(user: Raw) -> None:
    make_ns(user, "stuck")
    user.delete("/api/v1/namespaces/stuck")
    ns = user.get("/api/v1/namespaces/stuck").json
    ns["spec"]["finalizers"] = []
    resp = user.put("/api/v1/namespaces/stuck", ns)
    assert resp.status == 200
    assert resp.json["spec"]["finalizers"] == ["kubernetes"]
    resp = user.patch("/api/v1/namespaces/stuck", {"spec": {"finalizers": None}})
    assert resp.status == 200
    assert resp.json["spec"]["finalizers"] == ["kubernetes"]
    resp = user.patch("/api/v1/namespaces/stuck", {"status": {"phase": "Active"}})
    assert resp.json["status"]["phase"] == "Terminating"
    assert user.get("/api/v1/namespaces/stuck").status == 200


def test_finalize_is_put_only_and_removes_the_namespace(user: Raw) -> None:
    make_ns(user, "fin")
    user.delete("/api/v1/namespaces/fin")
    assert user.get("/api/v1/namespaces/fin/finalize").status == 405
    assert user.patch("/api/v1/namespaces/fin/finalize", {"spec": {"finalizers": []}}).status == 405
    ns = user.get("/api/v1/namespaces/fin").json
    ns["spec"]["finalizers"] = []
    del ns["metadata"]["resourceVersion"]  # unconditional
    resp = user.put("/api/v1/namespaces/fin/finalize", ns)
    assert resp.status == 200
    assert resp.json["kind"] == "Namespace"
    assert resp.json["spec"]["finalizers"] == []
    assert user.get("/api/v1/namespaces/fin").status == 404


def test_finalize_keeps_namespace_while_metadata_finalizers_remain(user: Raw) -> None:
    make_ns(user, "meta", finalizers=["finalizers.kubesphere.io/namespaces"])
    user.delete("/api/v1/namespaces/meta")
    ns = user.get("/api/v1/namespaces/meta").json
    ns["spec"]["finalizers"] = []
    assert user.put("/api/v1/namespaces/meta/finalize", ns).status == 200
    left = user.get("/api/v1/namespaces/meta").json
    assert left["spec"]["finalizers"] == []
    assert left["metadata"]["finalizers"] == ["finalizers.kubesphere.io/namespaces"]
    # a further delete goes to the generic store: the namespace is returned unchanged
    again = user.delete("/api/v1/namespaces/meta")
    assert again.status == 200
    assert again.json["metadata"]["finalizers"] == ["finalizers.kubesphere.io/namespaces"]
    # removing the last metadata finalizer deletes it (ShouldDeleteDuringUpdate)
    resp = user.patch("/api/v1/namespaces/meta", {"metadata": {"finalizers": None}})
    assert resp.status == 200
    assert user.get("/api/v1/namespaces/meta").status == 404


def test_finalize_validates_finalizer_names_and_resource_version(user: Raw) -> None:
    make_ns(user, "val")
    ns = user.get("/api/v1/namespaces/val").json
    stale = dict(ns)
    user.patch("/api/v1/namespaces/val", {"metadata": {"labels": {"x": "y"}}})
    resp = user.put("/api/v1/namespaces/val/finalize", stale)
    assert resp.status == 409
    fresh = user.get("/api/v1/namespaces/val").json
    fresh["spec"]["finalizers"] = ["kubernetes", "x"]
    resp = user.put("/api/v1/namespaces/val/finalize", fresh)
    assert resp.status == 422
    assert resp.json["message"] == (
        'Namespace "val" is invalid: spec.finalizers[1]: Invalid value: "x": name is neither a standard finalizer name '
        "nor is it fully qualified"
    )
    fresh["spec"]["finalizers"] = ["kubernetes", "example.com/extra"]
    resp = user.put("/api/v1/namespaces/val/finalize", fresh)
    assert resp.status == 200
    assert resp.json["spec"]["finalizers"] == ["kubernetes", "example.com/extra"]


def test_status_subresource_validates_phase(user: Raw) -> None:
    make_ns(user, "st")
    ns = user.get("/api/v1/namespaces/st").json
    ns["status"]["phase"] = "Terminating"
    resp = user.put("/api/v1/namespaces/st/status", ns)
    assert resp.status == 422
    assert resp.json["message"] == (
        'Namespace "st" is invalid: status.Phase: Invalid value: "Terminating": may only be \'Active\' if '
        "`deletionTimestamp` is empty"
    )
    ns = user.get("/api/v1/namespaces/st").json
    ns["status"]["conditions"] = [{"type": "NamespaceDeletionDiscoveryFailure", "status": "False"}]
    ns["spec"]["finalizers"] = []
    resp = user.put("/api/v1/namespaces/st/status", ns)
    assert resp.status == 200
    assert resp.json["status"]["conditions"][0]["type"] == "NamespaceDeletionDiscoveryFailure"
    assert resp.json["spec"]["finalizers"] == ["kubernetes"]  # /status copies spec from the old object


def test_dry_run_delete_of_a_namespace(user: Raw) -> None:
    make_ns(user, "dryns")
    resp = user.delete("/api/v1/namespaces/dryns?dryRun=All")
    assert resp.status == 200
    assert resp.json["status"]["phase"] == "Terminating"
    assert resp.json["metadata"]["deletionTimestamp"]
    assert user.get("/api/v1/namespaces/dryns").json["status"]["phase"] == "Active"


def test_the_curl_finalize_recipe_from_the_seeds(user: Raw) -> None:
    make_ns(user, "delete-me")
    user.delete("/api/v1/namespaces/delete-me")
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "delete-me"}, "spec": {"finalizers": []}}
    resp = user.put("/api/v1/namespaces/delete-me/finalize", body)
    assert resp.status == 200
    assert user.get("/api/v1/namespaces/delete-me").status == 404


def test_pre_1_17_conflict_on_repeated_delete() -> None:
    from tests.fakes.kubeapi import FakeClock

    e = Emulator(clock=FakeClock(), controllers=False, legacy_namespace_delete_conflict=True).start()
    try:
        raw = Raw(e, e.user_token)
        make_ns(raw, "ack-system-e2e-test-0")
        assert raw.delete("/api/v1/namespaces/ack-system-e2e-test-0").status == 200
        resp = raw.delete("/api/v1/namespaces/ack-system-e2e-test-0")
        assert resp.status == 409
        assert resp.json == status_body(
            409,
            "Conflict",
            'Operation cannot be fulfilled on namespaces "ack-system-e2e-test-0": The system is ensuring all content '
            "is removed from this namespace.  Upon completion, this namespace will automatically be purged by the "
            "system.",
            {"name": "ack-system-e2e-test-0", "kind": "namespaces"},
        )
    finally:
        e.stop()
