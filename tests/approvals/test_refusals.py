"""Every way a remediation request ends without the change, and what each leaves behind: an
unchanged cluster, a recorded reason, and a clear word in the thread or to the person who clicked."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL

CONFIGMAP = "/api/v1/namespaces/finalizer-demo/configmaps"


def _admin(kube: Emulator) -> KubeHTTP:
    return KubeHTTP(kube.url, kube.admin_token)


def _the_configmap(kube: Emulator) -> dict[str, Any]:
    [item] = [c for c in _admin(kube).list_items(CONFIGMAP) if c["metadata"].get("finalizers")]
    return item


def _filed(flow: Flow) -> int:
    flow.scenario("seed002-configmap-finalizer")
    flow.diagnose()
    flow.request("remove_finalizer")
    [request] = flow.requests()
    return int(request["id"])


def test_an_expired_request_cannot_be_approved(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = {"NSSTUCK_REQUEST_EXPIRY_SECONDS": "2"}
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as flow:
        request_id = _filed(flow)
        flow.wait_status(request_id, "expired", timeout=15)
        flow.quoted_entry(f"request #{request_id} expired", request_id, "expired")
        assert "Approve" not in slack_emulator.render(flow.request_message(request_id))
        before = _the_configmap(kube_emulator)["metadata"]["resourceVersion"]
        flow.bot.driver.interactive(_click(flow, request_id, BOB, "nsstuck_approve"))
        assert "expired" in flow.ephemeral(BOB, "expired")
        assert flow.audit(request_id) == ["requested", "expired"]
        assert _the_configmap(kube_emulator)["metadata"]["resourceVersion"] == before


def test_a_target_that_changed_since_the_diagnosis_makes_the_request_stale(flow: Flow) -> None:
    kube_emulator = flow.kube
    request_id = _filed(flow)
    cm = _the_configmap(kube_emulator)
    _admin(kube_emulator).patch(f"{CONFIGMAP}/{cm['metadata']['name']}", {"metadata": {"labels": {"x": "y"}}})
    flow.vote(request_id, BOB)
    row = flow.wait_status(request_id, "stale", "applied", "failed")
    assert row["status"] == "stale"
    assert "changed since the diagnosis (resourceVersion" in row["status_reason"]
    text = flow.wait_thread("Not applied: the cluster changed")
    assert "request it from the fresh diagnosis" in text
    flow.quoted_entry("Not applied: the cluster changed", request_id, "stale")
    assert flow.audit(request_id) == ["requested", "approved", "stale"]
    assert _the_configmap(kube_emulator)["metadata"]["finalizers"] == cm["metadata"]["finalizers"]
    # nothing was about to change, so nothing was kept (of this test's requests: the module's bot is shared)
    assert flow.query("SELECT id FROM backups WHERE request_id > :since", since=flow.since_request) == []


def test_a_webhook_that_denies_stops_the_change_at_the_dry_run(flow: Flow) -> None:
    slack_emulator, kube_emulator = flow.slack, flow.kube
    request_id = _filed(flow)
    _denying_webhook(kube_emulator, "frozen.policy.example.com", "configmaps are frozen <!channel>")
    before = _the_configmap(kube_emulator)
    flow.vote(request_id, BOB)
    row = flow.wait_status(request_id, "failed", "applied", "stale")
    assert row["status"] == "failed"
    assert "the dry run was refused" in row["status_reason"]
    assert 'admission webhook "frozen.policy.example.com" denied the request' in row["status_reason"]
    thread = flow.wait_thread(f"Remediation #{request_id}: Failed: the dry run was refused")
    flow.quoted_entry(f"Remediation #{request_id}: Failed", request_id, "failed")
    # the webhook's words reach the thread as text: nobody is pinged
    assert "configmaps are frozen <!channel>" not in str(slack_emulator.thread(OPS_CHANNEL, flow.thread_ts()))
    assert "configmaps are frozen &lt;!channel&gt;" in str(slack_emulator.thread(OPS_CHANNEL, flow.thread_ts()))
    assert "configmaps are frozen" in thread
    assert flow.audit(request_id) == ["requested", "approved", "backed_up", "dry_run", "failed"]
    after = _the_configmap(kube_emulator)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_an_object_changed_between_dry_run_and_apply_is_a_conflict_and_nothing_changes(flow: Flow) -> None:
    kube_emulator = flow.kube
    request_id = _filed(flow)
    before = _the_configmap(kube_emulator)
    name = before["metadata"]["name"]
    kube_emulator.knobs.latency(1500, match=f"^PATCH {CONFIGMAP}/{name}$")
    flow.vote(request_id, BOB)
    flow.slack.wait_for(lambda: "execution_started" in flow.audit(request_id) or None, timeout=20)
    # someone edits the object while our PATCH is on its way
    _admin(kube_emulator).patch(f"{CONFIGMAP}/{name}", {"metadata": {"labels": {"edited": "meanwhile"}}})
    row = flow.wait_status(request_id, "failed", "applied", timeout=20)
    assert row["status"] == "failed"
    assert "changed between the check and the change" in row["status_reason"]
    assert flow.audit(request_id)[-2:] == ["execution_started", "failed"]
    after = _the_configmap(kube_emulator)
    assert after["metadata"]["labels"] == {"edited": "meanwhile"}
    assert after["metadata"]["finalizers"] == before["metadata"]["finalizers"]  # the finalizer stayed


def test_a_cluster_with_remediation_off_offers_no_buttons_and_refuses_forged_clicks(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, remediation=False) as flow:
        flow.scenario("seed002-configmap-finalizer")
        delivery = flow.bot.driver.slash_command(
            "/nsstuck", f"prod-eu {flow.namespace}", user=ALICE, channel=OPS_CHANNEL
        )
        assert delivery.status == 200
        # a hang guard, not a speed target (5 s was not enough beside the parallel run at load 40)
        slack_emulator.wait_for(
            lambda: flow.query("SELECT id FROM diagnoses WHERE posted_at IS NOT NULL") or None, timeout=30
        )
        assert flow.buttons(flow.thread_ts()) == []
        run_id = flow.query("SELECT id FROM diagnoses")[0]["id"]
        payload = _click(
            flow, None, ALICE, "nsstuck_request_remedy:1", value=f"{run_id}:{flow.remedy_id('remove_finalizer')}"
        )
        assert flow.bot.driver.interactive(payload).status == 200
        assert "switched off" in flow.ephemeral(ALICE, "switched off")
        assert flow.requests() == []
        assert flow.audit() == []


def test_forged_and_malformed_clicks_change_nothing(flow: Flow) -> None:
    request_id = _filed(flow)
    forged = flow.bot.driver.interactive(_click(flow, request_id, BOB, "nsstuck_approve"), signing="forged")
    assert forged.status == 401
    assert flow.bot.driver.interactive(_click(flow, None, BOB, "nsstuck_approve", value="'; DROP TABLE")).status == 200
    assert "not one of nsstuck's" in flow.ephemeral(BOB, "not one of")
    assert flow.bot.driver.interactive(_click(flow, None, BOB, "nsstuck_approve", value="99999")).status == 200
    assert "not on record" in flow.ephemeral(BOB, "not on record")
    time.sleep(0.5)
    assert flow.request_row(request_id)["status"] == "pending"
    assert flow.audit(request_id) == ["requested"]


def _click(
    flow: Flow, request_id: int | None, user: str, action_id: str, *, value: str | None = None
) -> dict[str, Any]:
    """A block_actions payload as Slack sends it for a click on a button in the incident's thread."""
    thread = flow.thread_ts()
    state = flow.slack.state
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T111"},
        "api_app_id": state.identity.app_id,
        "token": state.identity.verification_token,
        "container": {"type": "message", "message_ts": thread, "channel_id": OPS_CHANNEL, "is_ephemeral": False},
        "trigger_id": state.issue_trigger(user),
        "team": {"id": state.identity.team_id, "domain": "emu"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": OPS_CHANNEL, "name": "nsstuck-ops"},
        "message": {"type": "message", "ts": thread, "text": "", "blocks": []},
        "state": {"values": {}},
        "response_url": state.issue_response_url("actions", OPS_CHANNEL, user, message_ts=thread, thread_ts=thread),
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "forged",
                "value": value if value is not None else str(request_id),
                "text": {"type": "plain_text", "text": "Approve"},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def _denying_webhook(kube: Emulator, name: str, message: str) -> None:
    """A reachable validating webhook that denies every configmap update."""
    admin = _admin(kube)
    admin.post(
        "/api/v1/namespaces/default/services", {"metadata": {"name": "policy"}, "spec": {"ports": [{"port": 443}]}}
    )
    admin.post(
        "/api/v1/namespaces/default/endpoints",
        {
            "metadata": {"name": "policy"},
            "subsets": [{"addresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 443}]}],
        },
    )
    admin.post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "metadata": {"name": "policy"},
            "webhooks": [
                {
                    "name": name,
                    "rules": [
                        {
                            "operations": ["UPDATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "clientConfig": {"service": {"namespace": "default", "name": "policy"}},
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )
    kube.knobs.webhook_verdict[name] = f"deny:{message}"


def test_a_user_group_answer_of_the_wrong_shape_approves_nobody(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    """usergroups.users.list answering `"users": {"U0BBBBBBB": true}` (an object, not a list of ids):
    nobody counts as a member (not the object's keys), the click is refused with a clear word, and
    nothing changes."""
    slack_emulator.add_usergroup("S0GROUP01", "approvers", [BOB])
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, approvers=("S0GROUP01",)) as flow:
        request_id = _filed(flow)
        before = _the_configmap(kube_emulator)["metadata"]["resourceVersion"]
        slack_emulator.inject("usergroups.users.list", body={"ok": True, "users": {BOB: True}}, times=None)
        assert flow.vote(request_id, BOB).status == 200
        assert "not an approver" in flow.ephemeral(BOB, "not an approver")
        assert flow.request_row(request_id)["status"] == "pending"
        assert flow.audit(request_id) == ["requested", "refused"]
        assert _the_configmap(kube_emulator)["metadata"]["resourceVersion"] == before
        log = flow.bot.log.read_text()
        assert "users is not a list" in log
        assert "Traceback" not in log
