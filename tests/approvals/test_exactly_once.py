"""Exactly once, for real: two bot processes on one PostgreSQL database, twenty approval clicks at
the same moment (double clicks, spread over both replicas). The change is made once."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests._migrated import migrated
from tests.approvals._flow import FAST, Flow, write_config
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL
from tests.slack._bot import serve_process

APPROVERS = [f"U0APPR{i:03d}" for i in range(10)]
GROUP = "S0TWENTY1"


@pytest.mark.postgres
def test_twenty_concurrent_approvals_on_two_replicas_apply_the_change_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, postgres_url: str
) -> None:
    for user in APPROVERS:
        slack_emulator.add_user(user, user.lower())
    slack_emulator.add_usergroup(GROUP, "approvers-ten", APPROVERS, name="Ten approvers")
    config = write_config(tmp_path, kube_emulator, approvers=(GROUP,), required=3)
    migrated(postgres_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        serve_process(slack_emulator, config, postgres_url, tmp_path / "a", extra_env=FAST) as first,
        serve_process(slack_emulator, config, postgres_url, tmp_path / "b", extra_env=FAST) as second,
    ):
        flow = Flow(first, slack_emulator, kube_emulator, postgres_url)
        namespace = flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        message = flow.request_message(request["id"])
        kube_emulator.journal.clear()

        clicks = [(user, replica) for user in APPROVERS for replica in (first, second)]  # 20 clicks
        with ThreadPoolExecutor(max_workers=len(clicks)) as pool:
            deliveries = list(
                pool.map(
                    lambda click: click[1].driver.click(OPS_CHANNEL, message["ts"], "nsstuck_approve", user=click[0]),
                    clicks,
                )
            )
        assert [d.status for d in deliveries] == [200] * 20
        row = flow.wait_status(request["id"], "applied", "failed", "stale", timeout=30)
        assert row["status"] == "applied", row["status_reason"]
        # and a retried delivery of one of the clicks, after the fact, changes nothing either
        assert second.driver.resend(deliveries[0]).status == 200
        flow.wait_thread(f"Remediation #{request['id']}: Done")

        events = Counter(flow.audit(request["id"]))
        assert events["execution_started"] == 1, events
        assert events["applied"] == 1, events
        assert events["backed_up"] == 1, events
        assert events["dry_run"] == 1, events
        # the ones that came while it was pending: 3, one per person (a double click that raced its
        # twin once counted twice on PostgreSQL: tests/store/test_insert_if_absent.py)
        assert events["approved"] == 3, events
        assert "failed" not in events
        votes = flow.query("SELECT user_id FROM remediation_votes WHERE request_id = :id", id=request["id"])
        assert len(votes) == 3
        assert len({v["user_id"] for v in votes}) == 3

        path = f"/api/v1/namespaces/{namespace}/configmaps/"
        patches = Counter(line for line in kube_emulator.journal.lines("PATCH") if path in line)
        assert sum(n for line, n in patches.items() if not line.endswith("dryRun")) == 1, patches
        assert sum(n for line, n in patches.items() if line.endswith("dryRun")) == 1, patches

        # everyone else was told, privately, that the change is made or being made
        def told() -> set[str] | None:
            users = {
                user
                for user in APPROVERS
                if any(
                    ("being made" in slack_emulator.render(m) or "made already" in slack_emulator.render(m))
                    for m in slack_emulator.ephemerals(OPS_CHANNEL, user)
                )
            }
            return users if len(users) >= len(APPROVERS) - 3 else None

        slack_emulator.wait_for(told, timeout=15, message="the late approvers were not told")
