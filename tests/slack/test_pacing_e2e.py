"""Twenty diagnoses started at once in one channel, against Slack's per-channel rate limit.

The emulator enforces chat.postMessage's limit (here 5 per second per channel, no burst) and adds
429s of its own; every verdict and every report must still arrive, each thread in order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import running_bot

COUNT = 20


def _stuck_namespaces(emu: Emulator) -> list[str]:
    http = KubeHTTP(emu.url, emu.admin_token)
    names = [f"team-{i:02d}" for i in range(COUNT)]
    for name in names:
        http.post("/api/v1/namespaces", {"metadata": {"name": name}})
        http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "held", "finalizers": ["x.io/y"]}})
        http.delete(f"/api/v1/namespaces/{name}")
    emu.settle()
    emu.clock.advance(60)  # type: ignore[attr-defined]
    emu.settle()
    return names


def test_twenty_diagnoses_at_once_all_arrive_in_order(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    slack_emulator.set_rate_limit("chat.postMessage", per_second=5, burst=1)
    slack_emulator.inject("chat.postMessage", http_status=429, retry_after=1, times=3)
    names = _stuck_namespaces(kube_emulator)
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env={"NSSTUCK_SLACK_POST_INTERVAL": "0.2"}) as bot:
        with ThreadPoolExecutor(max_workers=COUNT) as pool:
            acks = list(
                pool.map(
                    lambda ns: bot.driver.slash_command("/nsstuck", f"prod-eu {ns}", user=ALICE, channel=OPS_CHANNEL),
                    names,
                )
            )
        assert all(a.status == 200 for a in acks)
        assert max(a.elapsed for a in acks) < 3.0

        def verdicts() -> list[dict[str, object]] | None:
            found = [m for m in slack_emulator.channel_messages(OPS_CHANNEL) if "is *stuck*" in str(m.get("text", ""))
                     or "stuck" in slack_emulator.render(m)]  # fmt: skip
            return found if len(found) == COUNT else None

        top = slack_emulator.wait_for(verdicts, timeout=60, message="not every verdict arrived")
        for name in names:
            verdict = next(m for m in top if f"/ *{name}*" in slack_emulator.render(m))
            thread = slack_emulator.wait_for(
                lambda v=verdict: slack_emulator.thread(OPS_CHANNEL, str(v["ts"])) or None, timeout=60
            )
            text = slack_emulator.render(thread[0])
            assert "1. `orphaned_finalizer`" in text, text
            assert f"-n {name}" in text
        statuses = [c.status for c in slack_emulator.calls("chat.postMessage")]
        assert statuses.count(429) >= 3  # the limit was hit and waited out
        assert statuses.count(200) == 2 * COUNT  # and nothing was posted twice
