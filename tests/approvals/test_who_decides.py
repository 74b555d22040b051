"""These people (issue 19, items 1 and 2): who may request and approve a change is decided on what
Slack says at the click, never on a kept answer.

- an approver group's members are read for the decision itself: someone removed from the group a
  moment ago cannot approve (they could for up to a minute); when Slack does not answer, the click is
  refused with "try again" (closed, not open);
- guests (`is_restricted`, `is_ultra_restricted`) and people from outside the workspace (`is_stranger`,
  or another `team_id` and not of our organisation) can neither request nor approve unless the
  cluster says `allow_external_users: true`; they can still diagnose; each refusal is a short word to
  them only, and a refused approval is in the audit trail;
- when `users.info` fails, a request or an approval by that person is refused with "try again", and a
  diagnosis is not affected.

Through the running bot, over HTTP and Socket Mode. The tests over HTTP of the default configuration,
or of two required approvals, share the module's bot of it (`flow`, `lane`: tests/approvals/conftest.py),
each with its own workspace and cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.approvals._flow import Flow, remediation_bot
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery
from tests.fakes.slackapi.pytest_plugin import ALICE, APPROVERS, BOB, CAROL, OPS_CHANNEL

GUEST = "U0GUEST01"  # a multi-channel guest
SINGLE = "U0SINGLE1"  # a single-channel guest
PARTNER = "U0PARTNER"  # of another organisation, in our Slack Connect channel
STRANGER = "U0STRANGE"  # is_stranger
SISTER = "U0SISTER1"  # of another workspace of our own organisation (Enterprise Grid)


def _outsiders(slack: SlackEmulator) -> None:
    slack.add_user(GUEST, "guest", is_restricted=True)
    slack.add_user(SINGLE, "single", is_restricted=True, is_ultra_restricted=True)
    slack.add_user(PARTNER, "partner", team_id="T0PARTNER", enterprise_id="E0PARTNER")
    slack.add_user(STRANGER, "stranger", is_stranger=True)
    slack.channel(OPS_CHANNEL).members.extend([GUEST, SINGLE, PARTNER, STRANGER])


def _filed(flow: Flow, *, socket: bool = False) -> int:
    """The scenario diagnosed and a request filed by alice (over Socket Mode if `socket`)."""
    flow.scenario("seed002-configmap-finalizer")
    if not socket:
        flow.diagnose()
        flow.request("remove_finalizer")
        return int(flow.requests()[-1]["id"])
    ack = flow.slack.socket_mode.slash_command("/nsstuck", f"prod-eu {flow.namespace}", user=ALICE, channel=OPS_CHANNEL)
    assert "On it" in str(ack.payload)
    flow.slack.wait_for(
        lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL") or None, timeout=30
    )
    flow.slack.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=30, message="no request buttons")
    _click_request(flow, ALICE, socket=True)
    flow.slack.wait_for(lambda: flow.requests() or None, timeout=10, message="no request filed")
    request_id = int(flow.requests()[-1]["id"])
    flow.request_message(request_id)
    return request_id


def _vote(flow: Flow, request_id: int, user: str, *, socket: bool, approve: bool = True) -> None:
    if not socket:
        assert flow.vote(request_id, user, approve=approve).status == 200
        return
    message = flow.request_message(request_id)
    action = "nsstuck_approve" if approve else "nsstuck_reject"
    flow.slack.socket_mode.click(OPS_CHANNEL, str(message["ts"]), action, user=user)


def _click_request(flow: Flow, user: str, *, socket: bool) -> None:
    if not socket:
        delivery: Delivery = flow.click_request("remove_finalizer", user=user)
        assert delivery.status == 200
        return
    remedy = flow.remedy_id("remove_finalizer")
    for ts, button in flow.buttons(flow.thread_ts()):
        if str(button["value"]).endswith(f":{remedy}"):
            flow.slack.socket_mode.click(OPS_CHANNEL, ts, button["action_id"], user=user, value=button["value"])
            return
    raise AssertionError("no request button")


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_someone_removed_from_the_approver_group_cannot_approve_a_moment_later(
    lane: Callable[..., Flow], slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, transport: str
) -> None:
    """Over HTTP on the module's bot of two required approvals; over Socket Mode on a bot of its own."""
    socket = transport == "socket"
    with ExitStack() as stack:
        if socket:
            flow = stack.enter_context(
                remediation_bot(slack_emulator, kube_emulator, tmp_path, required=2, socket_mode=True)
            )
        else:
            flow = lane(required=2)
            slack_emulator = flow.slack
        request_id = _filed(flow, socket=socket)
        _vote(flow, request_id, CAROL, socket=socket)  # the group is read: bob and carol
        slack_emulator.wait_for(lambda: flow.audit(request_id) == ["requested", "approved"] or None, timeout=10)
        slack_emulator.state.usergroups[APPROVERS].users.remove(BOB)
        _vote(flow, request_id, BOB, socket=socket)
        assert "not an approver" in flow.ephemeral(BOB, "not an approver")
        assert flow.request_row(request_id)["status"] == "pending"
        assert flow.audit(request_id) == ["requested", "approved", "refused"]
        reads = slack_emulator.calls("usergroups.users.list")
        assert len(reads) == 2  # one per decision, none kept


def test_an_unreadable_approver_group_refuses_with_try_again_and_the_requester_may_still_withdraw(
    lane: Callable[..., Flow],
) -> None:
    flow = lane(required=2)
    slack_emulator = flow.slack
    request_id = _filed(flow)
    _vote(flow, request_id, CAROL, socket=False)
    slack_emulator.wait_for(lambda: flow.audit(request_id) == ["requested", "approved"] or None, timeout=10)
    slack_emulator.inject("usergroups.users.list", "internal_error", http_status=500, times=None)
    _vote(flow, request_id, BOB, socket=False)
    assert "try again" in flow.ephemeral(BOB, "Could not check who may approve")
    assert flow.request_row(request_id)["status"] == "pending"
    assert flow.audit(request_id) == ["requested", "approved"]
    # alice asked for it: she may withdraw it without the group
    _vote(flow, request_id, ALICE, socket=False, approve=False)
    flow.wait_status(request_id, "rejected")


def test_guests_and_outsiders_cannot_request_a_change_but_can_diagnose(flow: Flow) -> None:
    slack_emulator = flow.slack
    _outsiders(slack_emulator)
    flow.scenario("seed002-configmap-finalizer")
    flow.diagnose(user=GUEST)  # a diagnosis is open to them
    posted = len(slack_emulator.calls("chat.postMessage"))
    for user, who in ((GUEST, "Guests"), (SINGLE, "Guests"), (PARTNER, "People outside"), (STRANGER, "People")):
        _click_request(flow, user, socket=False)
        told = flow.ephemeral(user, "cannot request changes")
        assert told.startswith(who), told
        assert "`prod-eu`" in told
        assert len(told) < 120, told
    assert flow.requests() == []
    assert len(slack_emulator.calls("chat.postMessage")) == posted  # nothing said in the channel
    infos = [str(c.params.get("user")) for c in slack_emulator.calls("users.info")]
    assert infos == [GUEST, SINGLE, PARTNER, STRANGER]  # asked at each click
    # a member still can
    flow.request("remove_finalizer", user=ALICE)
    assert len(flow.requests()) == 1


def test_a_guest_or_outsider_named_as_approver_cannot_approve(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _outsiders(slack_emulator)
    approvers = (APPROVERS, GUEST, PARTNER)
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, approvers=approvers) as flow:
        request_id = _filed(flow)
        for user, who in ((GUEST, "Guests cannot approve"), (PARTNER, "People outside this workspace cannot approve")):
            _vote(flow, request_id, user, socket=False)
            assert who in flow.ephemeral(user, "cannot approve")
        assert flow.request_row(request_id)["status"] == "pending"
        assert flow.audit(request_id) == ["requested", "refused", "refused"]
        reasons = flow.query("SELECT details FROM audit_entries WHERE event = 'refused' ORDER BY seq")
        assert "Guests cannot approve" in str(reasons[0])
        assert "outside this workspace" in str(reasons[1])
        _vote(flow, request_id, BOB, socket=False)
        assert flow.wait_status(request_id, "applied", "failed", "stale")["status"] == "applied"


def test_allow_external_users_lets_guests_and_outsiders_request_and_approve(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _outsiders(slack_emulator)
    with remediation_bot(
        slack_emulator, kube_emulator, tmp_path, approvers=(PARTNER,), allow_external_users=True
    ) as flow:
        flow.scenario("seed002-configmap-finalizer")
        flow.diagnose(user=GUEST)
        flow.request("remove_finalizer", user=GUEST)
        [request] = flow.requests()
        _vote(flow, int(request["id"]), PARTNER, socket=False)
        assert flow.wait_status(int(request["id"]), "applied", "failed", "stale")["status"] == "applied"
        assert slack_emulator.calls("users.info") == []  # nothing to check


def test_when_slack_cannot_say_who_someone_is_they_cannot_request_or_approve_but_can_diagnose(flow: Flow) -> None:
    slack_emulator = flow.slack
    request_id = _filed(flow)  # alice's, while Slack answers
    slack_emulator.inject("users.info", "internal_error", http_status=500, times=None)
    # a diagnosis is not affected (asked again, it is answered in the incident's thread)
    replies = len(slack_emulator.thread(OPS_CHANNEL, flow.thread_ts()))
    asked = flow.bot.driver.slash_command("/nsstuck", f"prod-eu {flow.namespace}", user=CAROL, channel=OPS_CHANNEL)
    assert "On it" in asked.body
    slack_emulator.wait_for(
        lambda: len(slack_emulator.thread(OPS_CHANNEL, flow.thread_ts())) > replies or None, timeout=30
    )
    assert f"<@{CAROL}>" in flow.thread_text()
    # a request: refused, try again
    _click_request(flow, CAROL, socket=False)
    assert "try again" in flow.ephemeral(CAROL, "Could not check who you are")
    # an approval: refused, try again (and recorded as refused)
    _vote(flow, request_id, BOB, socket=False)
    assert "try again" in flow.ephemeral(BOB, "Could not check who you are")
    assert flow.request_row(request_id)["status"] == "pending"
    assert flow.audit(request_id) == ["requested", "refused"]
    assert len(flow.requests()) == 1
    # a user Slack does not know: the same
    slack_emulator.faults.clear()
    slack_emulator.state.users.pop(CAROL)
    _vote(flow, request_id, CAROL, socket=False)
    assert "try again" in flow.ephemeral(CAROL, "Could not check who you are")
    assert flow.request_row(request_id)["status"] == "pending"
    # Slack back: bob approves
    _vote(flow, request_id, BOB, socket=False)
    assert flow.wait_status(request_id, "applied", "failed", "stale")["status"] == "applied"


def test_on_enterprise_grid_our_organisation_is_ours_and_another_is_not(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    slack_emulator.identity.enterprise_id = "E0ORG"  # installed in one workspace of organisation E0ORG
    slack_emulator.add_user(SISTER, "sister", team_id="T0SISTER")  # of E0ORG (the emulator's organisation)
    slack_emulator.add_user(PARTNER, "partner", team_id="T0PARTNER", enterprise_id="E0PARTNER")
    slack_emulator.channel(OPS_CHANNEL).members.extend([SISTER, PARTNER])
    with remediation_bot(slack_emulator, kube_emulator, tmp_path) as flow:
        flow.scenario("seed002-configmap-finalizer")
        flow.diagnose()
        _click_request(flow, PARTNER, socket=False)
        assert "People outside this workspace" in flow.ephemeral(PARTNER, "cannot request")
        flow.request("remove_finalizer", user=SISTER)
        assert [r["requested_by"] for r in flow.requests()] == [SISTER]


def test_socket_mode_refuses_outsiders_too(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _outsiders(slack_emulator)
    with remediation_bot(
        slack_emulator, kube_emulator, tmp_path, approvers=(APPROVERS, PARTNER), socket_mode=True
    ) as flow:
        flow.scenario("seed002-configmap-finalizer")
        ack = slack_emulator.socket_mode.slash_command(
            "/nsstuck", f"prod-eu {flow.namespace}", user=GUEST, channel=OPS_CHANNEL
        )
        assert "On it" in str(ack.payload)  # a guest may diagnose
        slack_emulator.wait_for(
            lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL") or None, timeout=30
        )
        slack_emulator.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=30)
        _click_request(flow, GUEST, socket=True)
        assert "Guests cannot request" in flow.ephemeral(GUEST, "cannot request")
        assert flow.requests() == []
        _click_request(flow, ALICE, socket=True)
        slack_emulator.wait_for(lambda: flow.requests() or None, timeout=10)
        request_id = int(flow.requests()[0]["id"])
        _vote(flow, request_id, PARTNER, socket=True)
        assert "outside this workspace" in flow.ephemeral(PARTNER, "cannot approve")
        time.sleep(0.3)
        assert flow.request_row(request_id)["status"] == "pending"
        assert flow.audit(request_id) == ["requested", "refused"]
