"""A bot killed in the middle of a change: after a restart, the request ends in a recorded state that
matches the live cluster, and its thread is told."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests._migrated import migrated
from tests.approvals._flow import FAST, Flow, write_config
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import BOB
from tests.slack._bot import serve_process

# a short execution deadline, so that the restarted bot takes over soon after it passes
ENV = {**FAST, "NSSTUCK_EXECUTION_TIMEOUT_SECONDS": "8"}
CONFIGMAPS = "/api/v1/namespaces/finalizer-demo/configmaps"


def _finalizers(kube: Emulator) -> list[list[str]]:
    items = KubeHTTP(kube.url, kube.admin_token).list_items(CONFIGMAPS)
    return [c["metadata"].get("finalizers") or [] for c in items]


def _wait_for_event(flow: Flow, request_id: int, event: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while event not in flow.audit(request_id):
        assert time.monotonic() < deadline, f"no {event} in {flow.audit(request_id)}"
        time.sleep(0.02)


@contextmanager
def _requested(slack: SlackEmulator, kube: Emulator, tmp_path: Path) -> Iterator[tuple[Flow, int, Path, str]]:
    """A first bot with a pending request to remove the ConfigMap's finalizer: (flow, request id,
    config, database). The test makes it die; a second bot is started from the same config and database."""
    config = write_config(tmp_path, kube)
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    migrated(database)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with serve_process(slack, config, database, tmp_path / "first", extra_env=ENV) as first:
        flow = Flow(first, slack, kube, database)
        flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        yield flow, int(request["id"]), config, database


def test_killed_after_execution_started_is_reconciled_as_applied(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with _requested(slack_emulator, kube_emulator, tmp_path) as (flow, request_id, config, database):
        name = next(
            c["metadata"]["name"]
            for c in KubeHTTP(kube_emulator.url, kube_emulator.admin_token).list_items(CONFIGMAPS)
            if c["metadata"].get("finalizers")
        )
        # the API server takes its time with the PATCH: long enough to die in the middle of it
        kube_emulator.knobs.latency(2500, match=f"^PATCH {CONFIGMAPS}/{name}$")
        flow.vote(request_id, BOB)
        _wait_for_event(flow, request_id, "execution_started")
        # killed once the PATCH has reached the API server (before: right after execution_started, which
        # on a loaded machine could be before the PATCH was sent, and then nothing changed)
        patch = f"PATCH {CONFIGMAPS}/{name}"
        slack_emulator.wait_for(lambda: patch in kube_emulator.journal.lines() or None, timeout=20)
        flow.bot.kill()
    assert flow.request_row(request_id)["status"] == "executing"
    assert flow.audit(request_id)[-1] == "execution_started"

    # the PATCH was on its way: the API server makes the change although the client is gone
    slack_emulator.wait_for(lambda: all(not f for f in _finalizers(kube_emulator)) or None, timeout=10)

    with serve_process(slack_emulator, config, database, tmp_path / "second", extra_env=ENV) as second:
        flow.bot = second
        row = flow.wait_status(request_id, "applied", "failed", timeout=30)
        assert row["status"] == "applied"
        assert row["status_reason"].startswith("reconciled with the cluster: the change is in the cluster")
        assert flow.audit(request_id)[-3:] == ["execution_started", "reconciled", "applied"]
        # the thread quotes the outcome's own entry (the one after `reconciled`)
        flow.quoted_entry(f"Remediation #{request_id}: Done", request_id, "applied")


def test_killed_before_the_change_is_reconciled_as_failed_with_nothing_changed(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with _requested(slack_emulator, kube_emulator, tmp_path) as (flow, request_id, config, database):
        before = _finalizers(kube_emulator)
        # the dry run hangs: the bot dies before it ever starts the change
        kube_emulator.knobs.latency(3000, match=f"^PATCH {CONFIGMAPS}/")
        flow.vote(request_id, BOB)
        _wait_for_event(flow, request_id, "backed_up")
        flow.bot.kill()
    kube_emulator.knobs.clear()
    time.sleep(3.5)  # the hung dry run ends on the server, changing nothing
    assert _finalizers(kube_emulator) == before

    with serve_process(slack_emulator, config, database, tmp_path / "second", extra_env=ENV) as second:
        flow.bot = second
        row = flow.wait_status(request_id, "applied", "failed", timeout=30)
        assert row["status"] == "failed"
        assert "before making the change" in row["status_reason"]
        events = flow.audit(request_id)
        assert "execution_started" not in events
        assert events[-2:] == ["reconciled", "failed"]
        flow.wait_thread(f"Remediation #{request_id}: Failed")
    assert _finalizers(kube_emulator) == before
