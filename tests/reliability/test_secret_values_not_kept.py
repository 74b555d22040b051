"""A terminating namespace's Secrets are listed (they may hold it), but their values never reach a
snapshot, the JSON report or the database: only their metadata is kept."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from bot.services.recording import record
from bot.store import migrating
from bot.store.database import Database
from tests.fakes.kubeapi import Emulator

VALUE = "s3cr3t-value-that-must-not-be-kept-4711"


def test_secret_values_are_dropped_before_anything_keeps_them(
    kube_emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    from tests.fakes.kubeapi.controllers._http import KubeHTTP

    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": "vault"}})
    http.post(
        "/api/v1/namespaces/vault/secrets",
        {
            "metadata": {"name": "db-password", "finalizers": ["example.com/keep"]},
            "type": "Opaque",
            "data": {"password": base64.b64encode(VALUE.encode()).decode()},
            "stringData": {"plain": VALUE},
        },
    )
    http.delete("/api/v1/namespaces/vault")
    kube_emulator.settle()
    kube_emulator.clock.advance(60)  # type: ignore[attr-defined]
    kube_emulator.settle()

    result = diagnose_namespace(ClusterTarget(name="emulator", kubeconfig=kubeconfig_path), "vault")
    secrets = result.snapshot.objects("secrets")
    assert [s["metadata"]["name"] for s in secrets] == ["db-password"]  # listed: it holds the namespace
    assert result.diagnosis.findings  # and diagnosed as such

    snapshot = json.dumps(result.snapshot.to_json())
    encoded = base64.b64encode(VALUE.encode()).decode()
    assert VALUE not in snapshot
    assert encoded not in snapshot

    url = f"sqlite:///{tmp_path / 'bot.db'}"
    migrating.upgrade(url)
    db = Database(url)
    try:
        record(db, result, trigger="cli", requested_by="", post_channel=None)
    finally:
        db.dispose()
    stored = (tmp_path / "bot.db").read_bytes()
    assert b"db-password" in stored or b"vault" in stored  # the record is there (compressed or not)
    assert VALUE.encode() not in stored
    assert encoded.encode() not in stored
