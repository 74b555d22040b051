"""Seen before through the running bot (issue 39 §3): `/nsstuck prod-eu <namespace>` posts a verdict whose
report and Slack message name the earlier incident of the same cluster, cause and APIService, with its thread's
link, on SQLite and PostgreSQL. The earlier incident is the same namespace deleted before under another UID,
written into the bot's database by the store's own repositories."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from bot.store.database import Database
from tests.approvals._flow import Flow
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL

SCENARIO = "seed000-metrics-missing-endpoints"
EARLIER_TS = "1764000000.000100"


def _earlier(url: str, namespace: str) -> int:
    started = datetime.now(UTC) - timedelta(days=3)
    db = Database(url)
    try:
        with db.unit_of_work() as uow:
            incident = uow.incidents.open_for(
                cluster="prod-eu",
                namespace=namespace,
                namespace_uid="uid-deleted-before",
                terminating_since=started,
                cause="apiservice_unavailable",
                blocker="apiservice:v1beta1.metrics.k8s.io",
            )
            uow.incidents.claim_thread(incident.id, OPS_CHANNEL, EARLIER_TS)
            uow.incidents.resolve(incident.id, started + timedelta(minutes=45))
            return incident.id
    finally:
        db.dispose()


@pytest.mark.parametrize(
    "postgres", [False, pytest.param(True, marks=pytest.mark.postgres)], ids=["sqlite", "postgresql"]
)
def test_the_posted_verdict_names_the_earlier_incident(lane: Callable[..., Flow], postgres: bool) -> None:
    flow = lane(postgres=postgres)
    namespace = flow.scenario(SCENARIO)
    earlier = _earlier(flow.database, namespace)
    ts = flow.diagnose()

    [seen] = flow.latest_report()["seen_before"]
    assert seen["incident"] == earlier
    assert seen["stuck_for_seconds"] == 45 * 60
    assert seen["ended_by"] == {"what": "resolved_by_itself", "said": "resolved by itself"}
    link = f"https://slack.com/app_redirect?channel={OPS_CHANNEL}&message_ts={EARLIER_TS}"
    assert seen["thread"] == {"channel": OPS_CHANNEL, "ts": EARLIER_TS, "permalink": link}
    [verdict] = [m for m in flow.slack.channel_messages(OPS_CHANNEL) if m["ts"] == ts]
    section = verdict["blocks"][1]["text"]["text"]
    assert section.splitlines()[0] == "*Seen before* (same cluster, cause and blocking object):"
    assert section.splitlines()[1].startswith(f"• <{link}|incident {earlier}>, ")
    assert section.splitlines()[1].endswith("stuck 45m, resolved by itself")
