"""A cut tail in the audit trail is shown by a hash kept outside the database (issue 18, item 3).

The chain's hash has no key: someone who owns the tables can delete the last entries (the change
that was applied, how the namespace fared) and move `audit_head` back to the entry before them, and
`nsstuck audit verify` then walks an unbroken chain to an agreeing head: "intact". That is the
documented limit of the chain alone. What they cannot rewrite is the Slack thread: each outcome
message there quotes its own audit entry (seq and the first 12 hex digits of its hash), and
`nsstuck audit verify --expect-head <that hash>` exits 1 because no entry of the chain has it any
more. The change is made through the running bot (HTTP, and Socket Mode), on SQLite and PostgreSQL,
and the CLI runs as a real process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from tests._cli import run_nsstuck
from tests.approvals._flow import Flow, remediation_bot
from tests.audit.test_audit_chain import attacker
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import run_for
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, OPS_CHANNEL

FOLLOW = {"NSSTUCK_REMEDIATION_FOLLOW_SECONDS": "600"}


def _approved_change(flow: Flow, *, socket_mode: bool) -> int:
    """/nsstuck, Request, Approve through the door in use; the request's id once it is applied."""
    flow.scenario("seed002-configmap-finalizer")
    if socket_mode:
        socket = flow.slack.socket_mode
        socket.slash_command("/nsstuck", f"prod-eu {flow.namespace}", user=ALICE, channel=OPS_CHANNEL)
        flow.slack.wait_for(
            lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL"), timeout=30
        )
        flow.slack.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=20)
        remedy = flow.remedy_id("remove_finalizer")
        [(ts, button)] = [(t, b) for t, b in flow.buttons(flow.thread_ts()) if b["value"].endswith(f":{remedy}")]
        socket.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"])
        flow.slack.wait_for(lambda: flow.requests() or None, timeout=10)
        [request] = flow.requests()
        message = flow.request_message(int(request["id"]))
        socket.click(OPS_CHANNEL, str(message["ts"]), "nsstuck_approve", user=BOB)
    else:
        flow.diagnose()
        flow.request("remove_finalizer")
        [request] = flow.requests()
        assert flow.vote(int(request["id"]), BOB).status == 200
    request_id = int(request["id"])
    row = flow.wait_status(request_id, "applied", "failed", "stale", timeout=60)
    assert row["status"] == "applied", row["status_reason"]
    return request_id


def _verify(database: str, *args: str) -> tuple[int, list[str]]:
    result = run_nsstuck("audit", "verify", *args, env={"NSSTUCK_DATABASE_URL": database})
    assert result.stderr == "", result.stderr
    return result.returncode, result.stdout.splitlines()


def _cut_tail_shown_by_the_thread(flow: Flow, *, socket_mode: bool) -> None:
    request_id = _approved_change(flow, socket_mode=socket_mode)
    # each message quotes the entry written with it: the applied outcome, then the verification
    applied = flow.quoted_entry(f"Remediation #{request_id}: Done", request_id, "applied")
    run_for(flow.kube, 60)  # the namespace controller finishes; the bot follows and says so
    verified = flow.quoted_entry(f"is gone after remediation #{request_id}", request_id, "verified")
    [last] = flow.query("SELECT max(seq) AS seq FROM audit_entries")
    assert verified[0] == last["seq"] == applied[0] + 1
    [head] = flow.query("SELECT seq, hash FROM audit_head")
    assert (head["seq"], str(head["hash"])[:12]) == verified

    # an export taken now keeps the head elsewhere too (the full hash)
    exported = run_nsstuck("audit", "export", env={"NSSTUCK_DATABASE_URL": flow.database})
    assert exported.returncode == 0, exported.stderr
    pinned = json.loads(exported.stdout)["head"]
    assert pinned == {"seq": verified[0], "hash": str(head["hash"])}

    assert _verify(flow.database, "--expect-head", verified[1]) == (
        0,
        [
            f"audit trail intact: {verified[0]} entries, head {verified[1]}",
            f"expected entry {verified[0]} ({verified[1]}) is in the chain, unbroken up to it",
        ],
    )

    # the attacker, owning the tables: the append-only triggers out of the way, the change's outcome
    # and everything after it deleted, the head moved back to the entry before them
    cut = applied[0]
    with attacker(flow.database, "audit_entries") as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE seq >= :cut"), {"cut": cut})
        conn.execute(
            text("UPDATE audit_head SET seq = :seq, hash = (SELECT hash FROM audit_entries WHERE seq = :seq)"),
            {"seq": cut - 1},
        )
    events = [str(r["event"]) for r in flow.query("SELECT event FROM audit_entries ORDER BY seq")]
    assert events[-1] == "execution_started"

    # the chain alone: intact (the documented limit)
    code, lines = _verify(flow.database)
    assert code == 0, lines
    assert lines[0].startswith(f"audit trail intact: {cut - 1} entries, head ")
    # the hashes kept outside the database: the thread's two, and the export's full head
    for kept in (applied[1], verified[1], pinned["hash"], pinned["hash"].upper()):
        code, lines = _verify(flow.database, "--expect-head", kept)
        assert code == 1, (kept, lines)
        assert lines == [
            "audit trail TAMPERED: 1 problem",
            f"  no entry of the chain has the expected hash {kept[:12].lower()}: entries were removed from its end "
            "(and the head moved back) or the chain was rewritten, or the hash is not from this trail",
        ]


@pytest.mark.slow
def test_a_cut_tail_is_caught_by_the_hash_in_the_thread(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, database_url: str
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, database=database_url, extra_env=FOLLOW) as flow:
        _cut_tail_shown_by_the_thread(flow, socket_mode=False)


@pytest.mark.slow
def test_a_cut_tail_is_caught_by_the_hash_in_the_thread_over_socket_mode(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    with remediation_bot(slack_emulator, kube_emulator, tmp_path, extra_env=FOLLOW, socket_mode=True) as flow:
        _cut_tail_shown_by_the_thread(flow, socket_mode=True)
