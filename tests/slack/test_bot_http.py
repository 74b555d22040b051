"""The real bot process (`nsstuck serve`, HTTP mode) driven end to end.

Slack is the emulator in tests/fakes/slackapi (signed requests in, Web API calls out over HTTP), the
cluster is the Kubernetes emulator; the assertions read what a person sees in the channel.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, running_bot


@pytest.fixture
def bot(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Running]:
    with running_bot(slack_emulator, kube_emulator, tmp_path) as running:
        yield running


def test_a_diagnosis_posts_the_verdict_and_the_report_in_its_thread(bot: Running) -> None:
    delivery = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    assert delivery.elapsed < 3.0
    assert "On it: diagnosing `ddd` on `prod-eu`" in delivery.body

    verdict = bot.slack.wait_for_message(OPS_CHANNEL, "stuck", timeout=20)
    text = bot.slack.render(verdict)
    assert "prod-eu" in text
    assert "`orphaned_finalizer`" in text
    assert f"<@{ALICE}>" in text
    replies = bot.slack.wait_for(lambda: bot.slack.thread(OPS_CHANNEL, verdict["ts"]) or None, timeout=10)
    report = "\n".join(bot.slack.render(m) for m in replies)
    assert "configmaps/mymap" in report
    assert "kubectl patch configmaps mymap -n ddd --type=json" in report
    assert "Remedies, safest first" in report

    # asked again while the incident is open: the answer goes to the same thread
    bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
    bot.slack.wait_for(lambda: len(bot.slack.thread(OPS_CHANNEL, verdict["ts"])) > len(replies) + 1 or None, timeout=20)
    second = bot.slack.thread(OPS_CHANNEL, verdict["ts"])[len(replies)]
    assert "stuck" in bot.slack.render(second)
    top_level = [m for m in bot.slack.channel_messages(OPS_CHANNEL) if "stuck" in bot.slack.render(m)]
    assert len(top_level) == 1


def test_forged_stale_and_unsigned_requests_get_401_and_nothing_is_posted(bot: Running) -> None:
    for signing in ("forged", "stale", "future", "unsigned", "tampered"):
        delivery = bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL, signing=signing)
        assert delivery.status == 401, signing
    time.sleep(1.0)
    assert bot.slack.channel_messages(OPS_CHANNEL) == []
    assert bot.slack.calls("chat.postMessage") == []


def test_a_namespace_named_payload_svc_works_in_http_mode(bot: Running) -> None:
    delivery = bot.driver.slash_command("/nsstuck", "prod-eu payload-svc", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    assert "On it: diagnosing `payload-svc`" in delivery.body
    message = bot.slack.wait_for_message(OPS_CHANNEL, "payload-svc", timeout=20)
    assert "no such namespace" in bot.slack.render(message)


@pytest.mark.parametrize(
    ("text", "channel", "expected"),
    [
        ("prod-ue ddd", OPS_CHANNEL, "Did you mean `prod-eu`?"),
        ("prod-eu Bad_Name", OPS_CHANNEL, "is not a valid namespace name"),
        ("prod-eu ddd", SECOND_CHANNEL, "Unknown cluster `prod-eu`"),
        ("frobnicate", OPS_CHANNEL, "Usage:"),
        ("clusters", OPS_CHANNEL, "`prod-eu`"),
        ("help", OPS_CHANNEL, "/nsstuck <cluster> <namespace>"),
    ],
)
def test_bad_input_and_small_commands_answer_only_the_caller(
    bot: Running, text: str, channel: str, expected: str
) -> None:
    delivery = bot.driver.slash_command("/nsstuck", text, user=ALICE, channel=channel)
    assert delivery.status == 200
    assert expected in delivery.body
    assert bot.slack.calls("chat.postMessage") == []


def test_an_unreachable_cluster_is_reported_to_the_caller_without_secrets(bot: Running) -> None:
    delivery = bot.driver.slash_command("/nsstuck", "unreachable ddd", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    post = bot.slack.wait_for(lambda: next(iter(bot.slack.webhook_posts()), None), timeout=30)
    assert "is unreachable" in post.raw
    assert "kube-secret-token-777" not in post.raw
    assert bot.slack.calls("chat.postMessage") == []


def test_health_readiness_and_metrics(bot: Running) -> None:
    for path, expected in (("/healthz", b"ok"), ("/readyz", b"ready")):
        with urllib.request.urlopen(bot.url + path, timeout=5) as response:
            assert response.status == 200
            assert response.read().startswith(expected)
    helped = bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
    # the acknowledgement says where its time went (bench/slack.py splits it so)
    assert re.fullmatch(r"replay;dur=[0-9.]+, handle;dur=[0-9.]+", helped.headers.get("Server-Timing", ""))
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        text = response.read().decode()
        # the text format 0.0.4, said as prometheus-client says it (Prometheus 2 and 3 both scrape it)
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert 'nsstuck_slash_commands_total{kind="help"} 1.0' in text


def test_metrics_are_served_on_their_own_port_and_not_on_the_slack_one(bot: Running) -> None:
    """Issue 36, finding 6: /metrics names stuck namespaces by cluster and namespace, whatever a channel
    may see; it is served on NSSTUCK_METRICS_PORT only, so the Slack port (behind the ingress) says
    nothing of it, and the metrics port serves nothing else."""
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(bot.url + "/metrics", timeout=5)
    with caught.value as refused:
        assert refused.code == 404
        assert b"nsstuck_" not in refused.read()
    with urllib.request.urlopen(bot.metrics_url, timeout=5) as response:
        assert response.status == 200
        assert b"nsstuck_slash_commands_total" in response.read()
    base = bot.metrics_url.removesuffix("/metrics")
    for path in ("/slack/events", "/healthz", "/"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(base + path, timeout=5)
        with caught.value as refused:
            assert refused.code == 404, path
    signed = bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
    assert signed.status == 200  # the Slack port still serves Slack


def test_a_long_report_is_cut_and_the_full_one_is_attached_as_a_file(bot: Running, kube_emulator: Emulator) -> None:
    from tests.fakes.kubeapi.controllers._http import KubeHTTP

    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": "big"}})
    for i in range(25):
        http.post("/api/v1/namespaces/big/configmaps", {"metadata": {"name": f"cm-{i:02d}", "finalizers": ["x.io/y"]}})
    http.delete("/api/v1/namespaces/big")
    kube_emulator.settle()
    kube_emulator.clock.advance(60)  # type: ignore[attr-defined]
    kube_emulator.settle()

    bot.driver.slash_command("/nsstuck", "prod-eu big", user=ALICE, channel=OPS_CHANNEL)
    verdict = bot.slack.wait_for_message(OPS_CHANNEL, "big", timeout=20)
    files = bot.slack.wait_for(lambda: [f for f in bot.slack.files() if f.completed] or None, timeout=20)
    thread = "\n".join(bot.slack.render(m) for m in bot.slack.thread(OPS_CHANNEL, verdict["ts"]))
    assert "…and 10 more (the full report is attached)" in thread
    assert "configmaps/cm-24" not in thread.split("Remedies")[0]
    content = files[0].text
    for i in range(25):
        assert f"configmaps/cm-{i:02d}" in content


def test_history_lists_the_incident_only_to_the_caller(bot: Running) -> None:
    bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=ALICE, channel=OPS_CHANNEL)
    verdict = bot.slack.wait_for_message(OPS_CHANNEL, "stuck", timeout=20)
    bot.slack.wait_for(lambda: bot.slack.thread(OPS_CHANNEL, verdict["ts"]) or None, timeout=10)
    posts_before = len(bot.slack.calls("chat.postMessage"))
    delivery = bot.driver.slash_command("/nsstuck", "history prod-eu", user=ALICE, channel=OPS_CHANNEL)
    assert delivery.status == 200
    assert "ddd" in delivery.body
    assert "orphaned_finalizer" in delivery.body
    assert len(bot.slack.calls("chat.postMessage")) == posts_before  # an answer for the caller only
    # its links to the incidents' threads are not unfurled, nor are those of the bot's posts
    answer = json.loads(delivery.body)
    assert (answer.get("unfurl_links"), answer.get("unfurl_media")) == (False, False)
    posts = bot.slack.calls("chat.postMessage")
    assert posts
    assert all((p.params.get("unfurl_links"), p.params.get("unfurl_media")) == (False, False) for p in posts)
    refused = bot.driver.slash_command("/nsstuck", "history prod-eu", user=ALICE, channel=SECOND_CHANNEL)
    assert "Unknown cluster `prod-eu`" in refused.body  # as a name nobody registered (issue 36)
