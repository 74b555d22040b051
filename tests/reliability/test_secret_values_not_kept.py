"""A terminating namespace's Secrets and ConfigMaps are listed (they may hold it), but as metadata only:
their values are never sent to nsstuck, and nothing it keeps, logs or posts holds them, nor a pod's
environment values (tests/reliability/_values.py builds the namespace)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from bot.domain.refs import meta
from bot.domain.snapshot import NamespaceSnapshot
from bot.domain.snapshot_codec import decompress_snapshot
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from bot.services.recording import record
from bot.store.database import Database
from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests.approvals._flow import FAST, Flow, write_config
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL
from tests.reliability._values import (
    FINALIZER,
    NAMESPACE,
    OTHER_NAMESPACE,
    ValueCanaries,
    build_vault,
    value_requests,
)
from tests.reliability.test_secrets_sweep import Surfaces, _dump_database, _slack_surfaces
from tests.slack._bot import serve_process

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
    migrated(url)
    db = Database(url)
    try:
        record(db, result, trigger="cli", requested_by="", post_channel=None)
    finally:
        db.dispose()
    stored = (tmp_path / "bot.db").read_bytes()
    assert b"db-password" in stored or b"vault" in stored  # the record is there (compressed or not)
    assert VALUE.encode() not in stored
    assert encoded.encode() not in stored


# ---------------------------------------------------------------------------------------------
# Through the running bot (issue 18 item 4, issue 20 item 1)


def _surfaces_of(flow: Flow, database: str, tmp_path: Path, backups: list[int]) -> dict[str, str]:
    """Everything nsstuck stored or posted: the database as text (snapshots decompressed) and the
    SQLite file's bytes, the bot's log at DEBUG, every request the Slack emulator received and all it
    shows, the audit export, and every backup as `nsstuck backup show` prints it."""
    surfaces = Surfaces()
    surfaces.add("database dump", _dump_database(database))
    for file in tmp_path.glob("*.db*"):
        surfaces.add(f"database file {file.name}", file.read_bytes())
    surfaces.add("bot log", flow.bot.log.read_text())
    _slack_surfaces(flow.slack, surfaces, [OPS_CHANNEL], [ALICE, BOB])
    env = {"NSSTUCK_DATABASE_URL": database}
    commands = [("audit", "export"), ("audit", "export", "--csv"), ("history", "--json")]
    commands += [("backup", "show", str(b), *raw) for b in backups for raw in ((), ("--raw",))]
    for args in commands:
        done = run_nsstuck(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        surfaces.add(f"nsstuck {' '.join(args)}", done.stdout + done.stderr)
    return surfaces.texts


def _diagnose_and_request(flow: Flow, socket_mode: bool) -> int:
    """/nsstuck prod-eu vault, then the Request button of the remedy that removes the Secret's finalizer."""
    if socket_mode:
        socket = flow.slack.socket_mode
        socket.slash_command("/nsstuck", f"prod-eu {NAMESPACE}", user=ALICE, channel=OPS_CHANNEL)
        # a first diagnosis by a bot just started: its workers may still be importing on a loaded machine
        flow.slack.wait_for(
            lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL"), timeout=30
        )
        flow.slack.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=20)
    else:
        flow.diagnose()
    [remedy] = [
        r
        for finding in flow.latest_report()["findings"]
        for r in finding["remedies"]
        if r["action"] == "remove_finalizer" and [t["kind"] for t in r["targets"]] == ["Secret"]
    ]
    [(ts, button)] = [(t, b) for t, b in flow.buttons(flow.thread_ts()) if b["value"].endswith(f":{remedy['id']}")]
    if socket_mode:
        flow.slack.socket_mode.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"])
    else:
        assert (
            flow.bot.driver.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"]).status == 200
        )
    flow.slack.wait_for(lambda: flow.requests() or None, timeout=10)
    [request] = flow.requests()
    return int(request["id"])


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "socket_mode"])
def test_no_secret_or_configmap_value_reaches_the_running_bot(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, database_url: str, transport: str
) -> None:
    """A Secret and a ConfigMap with canaries in their data, the Secret holding the namespace with a
    finalizer nobody removes; a pod with canaries as environment values. Diagnosed through /nsstuck,
    the Secret's finalizer removed through Request and someone else's Approve: its values were never
    asked for (the emulator saw only metadata requests for Secrets and ConfigMaps, the re-check's read
    and the patches included), and no canary is in the database, the log, Slack, the audit export or
    the backups. The annotation `kubectl apply` writes (it repeats the values) reaches nsstuck as
    metadata, and is not kept either."""
    canaries = ValueCanaries()
    build_vault(kube_emulator, canaries)
    socket_mode = transport == "socket_mode"
    config = write_config(tmp_path, kube_emulator)
    migrated(database_url)
    kube_emulator.journal.clear()
    with serve_process(
        slack_emulator,
        config,
        database_url,
        tmp_path,
        socket_mode=socket_mode,
        extra_env=FAST,
        options=("--log-level", "DEBUG"),
    ) as bot:
        if socket_mode:
            slack_emulator.socket.wait_for_connections(1, timeout=15)
        try:
            flow = Flow(bot, slack_emulator, kube_emulator, database_url, namespace=NAMESPACE)
            request_id = _diagnose_and_request(flow, socket_mode)
            message = flow.request_message(request_id)
            if socket_mode:
                slack_emulator.socket_mode.click(OPS_CHANNEL, str(message["ts"]), "nsstuck_approve", user=BOB)
            else:
                assert flow.vote(request_id, BOB).status == 200
            row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)
            assert row["status"] == "applied", row["status_reason"]
            flow.wait_thread(f"Remediation #{request_id}: Done")
        finally:
            if socket_mode:
                slack_emulator.socket.drop_all()
        # the change was made: the Secret lost its finalizer, and being deleted, it is gone
        admin = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
        assert admin.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/secrets/db-password") is None
        backups = [int(r["id"]) for r in flow.query("SELECT id, kind FROM backups") if r["kind"] == "Secret"]
        assert len(backups) == 1
        texts = _surfaces_of(flow, database_url, tmp_path, backups)

    # nothing stored, logged or posted holds a value (first: a leak is reported whatever else went wrong)
    leaks = canaries.found_in(texts)
    assert not leaks, "values leaked:\n" + "\n".join(leaks)
    # what was asked for: Secrets and ConfigMaps as metadata only, every time
    asked = value_requests(kube_emulator.journal.entries())
    full = [f"{e.method} {e.path} (Accept: {e.accept})" for e in asked if not e.metadata_only]
    assert not full, full
    secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/db-password"
    seen = {(e.method, e.path) for e in asked}
    assert {
        ("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets"),  # the diagnosis, and the re-check's
        ("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps"),
        ("GET", secret),  # the read right before acting
        ("PATCH", secret),  # the dry run and the change
    } <= seen, seen
    assert sum(1 for e in asked if e.method == "PATCH") == 2

    # ... while what the rules need was kept: the objects by name, the pod's variables by name and reference
    [row] = flow.query("SELECT snapshot FROM diagnoses WHERE namespace = :ns", ns=NAMESPACE)
    kept = decompress_snapshot(bytes(row["snapshot"]))
    assert [o["metadata"]["name"] for o in kept.objects("secrets")] == ["db-password"]
    assert "settings" in [o["metadata"]["name"] for o in kept.objects("configmaps")]
    [pod] = kept.objects("pods")
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "API_KEY"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-password", "key": "password"}}},
    ]
    assert pod["spec"]["nodeName"] == "node-2"
    _names_kept(kept)
    shown = texts[f"nsstuck backup show {backups[0]}"]
    assert "# only the Secret's metadata was read and kept, never its data" in shown
    assert f"- {FINALIZER}" in shown  # the YAML re-creates the finalizer it had
    assert "metadata only (the data was never read)" in texts["nsstuck audit export"]


# ---------------------------------------------------------------------------------------------
# Snapshots keep names, not values (issue 36, finding 4)


def _names_kept(kept: NamespaceSnapshot) -> None:
    """What a snapshot of `vault` keeps of the objects that held the issue 36 canaries: the flag names,
    the program, the probe's and hooks' kind, port, path and header names; no annotation."""
    [pod] = kept.objects("pods")
    [app] = pod["spec"]["containers"]
    assert app["command"] == ["/bin/sh", "-c", "<redacted>"]
    assert app["args"] == ["--stripe-key=<redacted>", "--verbose", "-v", "<redacted>"]
    assert app["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [{"name": "Authorization"}]}
    }
    assert app["lifecycle"]["preStop"] == {"exec": {}}
    assert app["lifecycle"]["postStart"]["httpGet"]["httpHeaders"] == [{"name": "X-Token"}]
    assert "annotations" not in pod["metadata"]
    assert "annotations" not in (kept.namespace_object or {}).get("metadata", {})
    # the Deployment held in `vault` was read whole (it is being deleted): its template reduced the same way
    [worker] = kept.objects("deployments.apps")
    template = worker["spec"]["template"]
    [container] = template["spec"]["containers"]
    assert container["args"] == ["--stripe-key=<redacted>"]
    assert container["env"] == [{"name": "SEED"}]
    assert "annotations" not in template["metadata"]
    # every Deployment of the cluster, for controller attribution: names, images, flag names
    workloads = {(meta(w)["namespace"], meta(w)["name"]): w for w in kept.workloads}
    billing = workloads[(OTHER_NAMESPACE, "billing")]
    assert billing["spec"]["template"]["spec"]["containers"] == [
        {"name": "billing", "image": "example.com/billing:2.0", "args": ["--stripe-key=<redacted>"]}
    ]
    assert set(billing["metadata"]) <= {"name", "namespace", "uid", "labels"}


def _planted_in_the_cluster(kube: Emulator, canaries: ValueCanaries) -> None:
    """Not vacuous: the cluster holds every issue 36 canary where the test put it."""
    admin = KubeHTTP(kube.url, kube.admin_token)
    pod = json.dumps(admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods/app"))
    worker = json.dumps(admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/worker"))
    billing = json.dumps(admin.get(f"/apis/apps/v1/namespaces/{OTHER_NAMESPACE}/deployments/billing"))
    namespace = json.dumps(admin.get(f"/api/v1/namespaces/{NAMESPACE}"))
    pod_canaries = ("pod_flag", "pod_positional", "pod_command", "probe_header", "lifecycle_command")
    for name in (*pod_canaries, "lifecycle_header", "pod_annotation"):
        assert getattr(canaries, name) in pod, name
    for name in ("template_flag", "template_env", "template_annotation"):
        assert getattr(canaries, name) in worker, name
    assert canaries.other_flag in billing
    assert canaries.namespace_annotation in namespace


@pytest.mark.slow
def test_snapshots_keep_flag_names_not_values(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, database_url: str
) -> None:
    """Issue 36, finding 4, through the running bot: `/nsstuck prod-eu vault`, where a pod's command line
    (a flag's value, a positional value, a shell script), its probe's header, its lifecycle hooks and
    its annotations, the namespace's annotation, a held Deployment's template (arguments, environment,
    annotations) and a Deployment in another namespace (`--stripe-key=...`) hold canaries. No canary is
    in the database (snapshots decompressed, the SQLite file's bytes), the bot's log at DEBUG or Slack;
    the snapshot keeps the flag names. On 595198c the pod's arguments and annotations, and every
    Deployment's arguments, were stored as they were."""
    canaries = ValueCanaries()
    build_vault(kube_emulator, canaries)
    _planted_in_the_cluster(kube_emulator, canaries)
    config = write_config(tmp_path, kube_emulator)
    migrated(database_url)
    with serve_process(
        slack_emulator, config, database_url, tmp_path, extra_env=FAST, options=("--log-level", "DEBUG")
    ) as bot:
        flow = Flow(bot, slack_emulator, kube_emulator, database_url, namespace=NAMESPACE)
        flow.diagnose()
        [row] = flow.query("SELECT snapshot FROM diagnoses WHERE namespace = :ns", ns=NAMESPACE)
        surfaces = Surfaces()
        surfaces.add("database dump", _dump_database(database_url))
        for file in tmp_path.glob("*.db*"):
            surfaces.add(f"database file {file.name}", file.read_bytes())
        surfaces.add("bot log", bot.log.read_text())
        _slack_surfaces(slack_emulator, surfaces, [OPS_CHANNEL], [ALICE, BOB])

    leaks = canaries.found_in(surfaces.texts)
    assert not leaks, "values leaked:\n" + "\n".join(leaks)
    _names_kept(decompress_snapshot(bytes(row["snapshot"])))
