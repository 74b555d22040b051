"""The real bot process (`nsstuck serve`, HTTP mode) driven end to end.

Slack is the emulator in tests/fakes/slackapi (signed requests in, Web API calls out over HTTP), the
cluster is the Kubernetes emulator; the assertions read what a person sees in the channel.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.store import migrating
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import HttpDriver
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, SECOND_CHANNEL

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str
    driver: HttpDriver
    slack: SlackEmulator
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bot(slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path) -> Iterator[Running]:
    _namespace(kube_emulator, "ddd", delete=True)
    kube_emulator.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    (tmp_path / "nsstuck.yaml").write_text(
        "clusters:\n"
        f"  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n    channels: [{OPS_CHANNEL}]\n"
        "  - name: unreachable\n    kubeconfig: gone.kubeconfig\n"
    )
    (tmp_path / "gone.kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: kube-secret-token-777}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    database = f"sqlite:///{tmp_path / 'bot.db'}"
    migrating.upgrade(database)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    env.update(
        {
            "NSSTUCK_CONFIG": str(tmp_path / "nsstuck.yaml"),
            "NSSTUCK_DATABASE_URL": database,
            "NSSTUCK_HTTP_PORT": str(port),
            "NSSTUCK_SLACK_API_URL": slack_emulator.api_url,
            "SLACK_BOT_TOKEN": slack_emulator.bot_token,
            "SLACK_SIGNING_SECRET": slack_emulator.signing_secret,
        }
    )
    log = tmp_path / "bot.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bot did not start:\n{log.read_text()}") from None
            time.sleep(0.1)
    running = Running(process, url, slack_emulator.http_driver(f"{url}/slack/events"), slack_emulator, log)
    try:
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        assert code == 0, f"serve exited {code} on SIGTERM:\n{log.read_text()}"


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
        ("prod-eu ddd", SECOND_CHANNEL, "cannot be diagnosed from this channel"),
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
    bot.driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL)
    with urllib.request.urlopen(bot.url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    assert 'nsstuck_slash_commands_total{kind="help"} 1.0' in text
