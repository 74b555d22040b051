"""Issue 36, finding 7: a vote counts only if it still qualifies when the quorum is judged.

- When an approval would complete the quorum, every earlier approval is judged again: someone removed
  from the approver group, or a guest (or outsider) now, after they voted no longer counts. Their vote
  is dropped from the count, with a line in the thread and a `vote_dropped` audit entry (quoted under
  it) saying whose and why; below the quorum the request stays `pending`, nothing is changed, and the
  request's message shows the approvals that count. A later qualifying approval completes it.
- Reject from a guest or an outsider is refused like Approve (and recorded).

Through the running bot, against the Slack and Kubernetes emulators, on SQLite and PostgreSQL; the
tests share the module's bot of two required approvals on each backend (`lane`,
tests/approvals/conftest.py), each with its own workspace and cluster (the guest's rejection too: a
rejection does not wait for a quorum, and the guest is an approver through the approvers' group).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.approvals._flow import Flow
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import APPROVERS, BOB, CAROL, OPS_CHANNEL

DAVE = "U0DDDDDDD"
GUEST = "U0GUEST01"


def _finalizers(kube: Emulator, namespace: str) -> list[Any]:
    maps = KubeHTTP(kube.url, kube.admin_token).list_items(f"/api/v1/namespaces/{namespace}/configmaps")
    return [m["metadata"].get("finalizers") for m in maps]


def _filed(flow: Flow) -> int:
    return flow.requested("seed002-configmap-finalizer", "remove_finalizer")


def _dropped_then_completed(
    flow: Flow, slack: SlackEmulator, kube: Emulator, request_id: int, *, why: str, restore: Callable[[], None]
) -> None:
    """Bob's approval would make two, but carol's no longer counts: the request waits; dave completes it."""
    assert flow.vote(request_id, BOB).status == 200
    seq, _ = flow.quoted_entry(f"the approval of <@{CAROL}> no longer counts: {why}", request_id, "vote_dropped")
    said = flow.thread_text()
    assert "(1 of 2 approvals; it waits for more)" in said
    assert flow.audit(request_id) == ["requested", "approved", "vote_dropped", "approved"]
    [dropped] = flow.query("SELECT actor, details FROM audit_entries WHERE seq = :seq", seq=seq)
    assert dropped["actor"] == "nsstuck"
    assert CAROL in str(dropped["details"])
    assert why in str(dropped["details"])
    row = flow.request_row(request_id)
    assert row["status"] == "pending"
    assert row["execution_id"] is None
    assert any(_finalizers(kube, flow.namespace))  # nothing was changed
    # the request's message shows the approval that counts: bob's, 1 of 2
    slack.wait_for(
        lambda: f"approved by <@{BOB}> (1 of 2)" in json.dumps(flow.request_message(request_id)) or None,
        timeout=10,
        message="the request message still counts the dropped vote",
    )
    # carol qualifies again and clicks again: her vote stays set aside, and she is told so
    restore()
    assert flow.vote(request_id, CAROL).status == 200
    assert "ask for the change again" in flow.ephemeral(CAROL, "no longer counted")
    assert flow.request_row(request_id)["status"] == "pending"
    # a second approval that qualifies completes it
    slack.add_user(DAVE, "dave")
    slack.channel(OPS_CHANNEL).members.append(DAVE)
    slack.state.usergroups[APPROVERS].users.append(DAVE)
    assert flow.vote(request_id, DAVE).status == 200
    assert flow.wait_status(request_id, "applied", "failed", "stale")["status"] == "applied"
    [approved] = flow.query(
        "SELECT details FROM audit_entries WHERE request_id = :id AND event = 'approved' ORDER BY seq DESC LIMIT 1",
        id=request_id,
    )
    assert f"{BOB!r}, {DAVE!r}" in str(approved["details"]) or f'"{BOB}", "{DAVE}"' in str(approved["details"])
    assert CAROL not in str(approved["details"])


def test_an_approver_removed_from_the_group_after_voting_no_longer_counts(
    lane: Callable[..., Flow], database_url: str
) -> None:
    flow = lane(required=2, postgres=database_url.startswith("postgresql"))
    slack_emulator, kube_emulator = flow.slack, flow.kube
    request_id = _filed(flow)
    assert flow.vote(request_id, CAROL).status == 200
    slack_emulator.wait_for(lambda: flow.audit(request_id) == ["requested", "approved"] or None, timeout=10)
    group = slack_emulator.state.usergroups[APPROVERS].users
    group.remove(CAROL)
    _dropped_then_completed(
        flow,
        slack_emulator,
        kube_emulator,
        request_id,
        why="they are no longer an approver for this cluster",
        restore=lambda: group.append(CAROL),
    )


def test_an_approver_who_became_a_guest_after_voting_no_longer_counts(
    lane: Callable[..., Flow], database_url: str
) -> None:
    flow = lane(required=2, postgres=database_url.startswith("postgresql"))
    slack_emulator, kube_emulator = flow.slack, flow.kube
    request_id = _filed(flow)
    assert flow.vote(request_id, CAROL).status == 200
    slack_emulator.wait_for(lambda: flow.audit(request_id) == ["requested", "approved"] or None, timeout=10)
    carol = slack_emulator.state.users[CAROL]
    carol.is_restricted = True  # made a multi-channel guest

    def member_again() -> None:
        carol.is_restricted = False

    _dropped_then_completed(
        flow, slack_emulator, kube_emulator, request_id, why="they are a guest now", restore=member_again
    )


def test_when_slack_cannot_say_who_an_earlier_approver_is_the_quorum_waits(lane: Callable[..., Flow]) -> None:
    flow = lane(required=2)
    slack_emulator = flow.slack
    request_id = _filed(flow)
    assert flow.vote(request_id, CAROL).status == 200
    slack_emulator.wait_for(lambda: flow.audit(request_id) == ["requested", "approved"] or None, timeout=10)
    # bob is asked about and answered; carol, asked about again for bob's decision, is not
    slack_emulator.inject(
        "users.info", "internal_error", http_status=500, times=None, when=lambda p: p.get("user") == CAROL
    )
    assert flow.vote(request_id, BOB).status == 200
    assert "try again" in flow.ephemeral(BOB, "earlier approvals still count")
    assert flow.request_row(request_id)["status"] == "pending"
    assert flow.audit(request_id) == ["requested", "approved", "refused"]
    slack_emulator.faults.clear()
    assert flow.vote(request_id, BOB).status == 200
    assert flow.wait_status(request_id, "applied", "failed", "stale")["status"] == "applied"


def test_a_guest_or_outsider_cannot_reject(lane: Callable[..., Flow], database_url: str) -> None:
    """On the module's bot of two required approvals: the guest is an approver (a member of the approvers'
    group), and a single rejection ends a request whatever the quorum."""
    flow = lane(required=2, postgres=database_url.startswith("postgresql"))
    slack_emulator = flow.slack
    slack_emulator.add_user(GUEST, "guest", is_restricted=True)
    slack_emulator.channel(OPS_CHANNEL).members.append(GUEST)
    slack_emulator.state.usergroups[APPROVERS].users.append(GUEST)
    request_id = _filed(flow)
    assert flow.vote(request_id, GUEST, approve=False).status == 200
    assert "Guests cannot reject changes on cluster `prod-eu`." in flow.ephemeral(GUEST, "cannot reject")
    assert flow.request_row(request_id)["status"] == "pending"
    assert flow.audit(request_id) == ["requested", "refused"]
    # an approver who is a member still can
    assert flow.vote(request_id, BOB, approve=False).status == 200
    assert flow.wait_status(request_id, "rejected")["status"] == "rejected"
