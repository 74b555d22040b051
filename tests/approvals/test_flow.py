"""Every remedy type through Slack against the emulator: request, approval, execution, verification."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, CAROL, OPS_CHANNEL

FOLLOW = {"NSSTUCK_REMEDIATION_FOLLOW_SECONDS": "600"}


def _items(kube: Emulator, path: str) -> list[dict[str, Any]]:
    return KubeHTTP(kube.url, kube.admin_token).list_items(path)


def test_removing_an_orphaned_finalizer_end_to_end(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FOLLOW) as flow:
        namespace = flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        message = flow.request("remove_finalizer")
        rendered = slack_emulator.render(message)
        assert "asked by" in rendered
        assert "kubectl patch" in rendered
        assert "Needs* 1 approval from" in rendered or "Needs 1 approval from" in rendered
        [request] = flow.requests()
        assert request["status"] == "pending"
        assert request["requested_by"] == ALICE

        assert flow.vote(request["id"], BOB).status == 200
        row = flow.wait_status(request["id"], "applied", "failed", "stale")
        assert row["status"] == "applied", row["status_reason"]
        flow.quoted_entry(f"Remediation #{request['id']}: Done", request["id"], "applied")

        maps = _items(kube_emulator, f"/api/v1/namespaces/{namespace}/configmaps")
        finalizers = [m["metadata"].get("finalizers") for m in maps]
        assert all(not f for f in finalizers), finalizers
        events = flow.audit(request["id"])
        assert events == ["requested", "approved", "backed_up", "dry_run", "execution_started", "applied"], events
        [backup] = flow.query("SELECT * FROM backups WHERE request_id = :id", id=request["id"])
        assert backup["kind"] == "ConfigMap"

        # the namespace controller finishes; the bot notices and says so once
        run_for(kube_emulator, 60)
        flow.quoted_entry(f"is gone after remediation #{request['id']}", request["id"], "verified")
        assert flow.audit(request["id"])[-1] == "verified"
        assert flow.wait_status(request["id"], "applied")["verification"] == "gone"


@pytest.mark.parametrize("who", [ALICE, "U0NOTANAP"])
def test_the_requester_and_non_approvers_are_refused_and_recorded(flow: Flow, who: str) -> None:
    slack_emulator = flow.slack
    slack_emulator.add_user("U0NOTANAP", "dave")
    flow.scenario("seed002-configmap-finalizer")
    flow.diagnose()
    flow.request("remove_finalizer")
    [request] = flow.requests()
    assert flow.vote(request["id"], who).status == 200
    said = flow.ephemeral(who, "approv")
    assert ("asked for this change" in said) if who == ALICE else ("not an approver" in said)
    assert flow.audit(request["id"]) == ["requested", "refused"]
    assert flow.request_row(request["id"])["status"] == "pending"


def test_a_reject_ends_the_request_and_later_approvals_are_refused(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, required=2) as flow:
        flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        bobs_click = flow.vote(request["id"], BOB)
        flow.slack.wait_for(lambda: "approved" in flow.audit(request["id"]) or None, timeout=10)
        flow.vote(request["id"], CAROL, approve=False)
        flow.wait_status(request["id"], "rejected")
        flow.quoted_entry("rejected by", request["id"], "rejected")
        assert "Approve" not in slack_emulator.render(flow.request_message(request["id"]))  # no buttons left
        # a click on a stale rendering (or a retried delivery) arrives after the rejection
        assert flow.bot.driver.resend(bobs_click).status == 200
        assert "was rejected" in flow.ephemeral(BOB, "rejected")
        assert flow.audit(request["id"]) == ["requested", "approved", "rejected"]


def test_the_home_tab_lists_requests_waiting_for_approval(flow: Flow) -> None:
    slack_emulator = flow.slack
    flow.scenario("seed002-configmap-finalizer")
    flow.diagnose()
    flow.request("remove_finalizer")
    [request] = flow.requests()
    opened = {"type": "app_home_opened", "user": BOB, "channel": "D0BOB0001", "tab": "home"}
    assert flow.bot.driver.event(flow.bot.driver.builder.event_callback(opened)).status == 200
    home = slack_emulator.wait_for(lambda: slack_emulator.home_view(BOB), timeout=10)
    text = slack_emulator.render_view(home)
    assert "Changes waiting for approval" in text
    assert f"#{request['id']}" in text
    assert "0 of 1 approvals" in text


def test_the_whole_flow_over_socket_mode(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, socket_mode=True) as flow:
        socket = slack_emulator.socket_mode
        flow.scenario("seed002-configmap-finalizer")
        ack = socket.slash_command("/nsstuck", f"prod-eu {flow.namespace}", user=ALICE, channel=OPS_CHANNEL)
        assert ack.elapsed < 3.0
        slack_emulator.wait_for(
            lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL"), timeout=30
        )
        slack_emulator.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=20)
        remedy = flow.remedy_id("remove_finalizer")
        [(ts, button)] = [(t, b) for t, b in flow.buttons(flow.thread_ts()) if b["value"].endswith(f":{remedy}")]
        assert socket.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"]).elapsed < 3.0
        slack_emulator.wait_for(lambda: flow.requests() or None, timeout=10)
        [request] = flow.requests()
        message = flow.request_message(request["id"])
        assert socket.click(OPS_CHANNEL, message["ts"], "nsstuck_approve", user=CAROL).elapsed < 3.0
        row = flow.wait_status(request["id"], "applied", "failed", "stale")
        assert row["status"] == "applied", row["status_reason"]
        flow.wait_thread(f"Remediation #{request['id']}: Done")
