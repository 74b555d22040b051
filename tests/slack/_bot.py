"""Starting the real bot process against the Slack and Kubernetes emulators."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests._migrated import migrated
from tests._python import PYTHON, assert_no_resource_warning
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import HttpDriver
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str
    driver: HttpDriver
    slack: SlackEmulator
    log: Path
    metrics_url: str = ""  # GET /metrics: its own port (NSSTUCK_METRICS_PORT), not the Slack one
    killed: bool = False

    def kill(self) -> None:
        """SIGKILL: the process dies on the spot, as in a crash or an OOM kill."""
        self.process.kill()
        self.process.wait(timeout=10)
        self.killed = True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_bot(
    slack_emulator: SlackEmulator,
    kube_emulator: Emulator,
    tmp_path: Path,
    *,
    socket_mode: bool = False,
    extra_env: dict[str, str] | None = None,
    database: str | None = None,
) -> Iterator[Running]:
    """`nsstuck serve` as a child process against the two emulators, stopped with SIGTERM (must exit 0);
    on a SQLite file in `tmp_path` unless a `database` URL is given."""
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
    database = database or f"sqlite:///{tmp_path / 'bot.db'}"
    migrated(database)
    with serve_process(
        slack_emulator, tmp_path / "nsstuck.yaml", database, tmp_path, socket_mode=socket_mode, extra_env=extra_env
    ) as running:
        yield running


@contextmanager
def serve_process(
    slack_emulator: SlackEmulator,
    config: Path,
    database: str,
    workdir: Path,
    *,
    socket_mode: bool = False,
    extra_env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> Iterator[Running]:
    """`nsstuck serve` as a child process (HTTP mode unless `socket_mode`), ready when /healthz answers;
    `options` go before the command (`--log-level DEBUG`)."""
    port = _free_port()
    metrics_port = _free_port()
    while metrics_port == port:  # pragma: no cover - the kernel gave the same free port twice
        metrics_port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    env.update(
        {
            "NSSTUCK_CONFIG": str(config),
            "NSSTUCK_DATABASE_URL": database,
            "NSSTUCK_HTTP_PORT": str(port),
            "NSSTUCK_METRICS_PORT": str(metrics_port),
            "NSSTUCK_SLACK_API_URL": slack_emulator.api_url,
            "SLACK_BOT_TOKEN": slack_emulator.bot_token,
            "SLACK_SIGNING_SECRET": slack_emulator.signing_secret,
            # tests send bursts from one user on purpose; the limits are tested where they are the point
            # (tests/hostile/test_bounded_work.py sets its own)
            "NSSTUCK_USER_COMMANDS_PER_MINUTE": "100000",
            "NSSTUCK_CHANNEL_COMMANDS_PER_MINUTE": "100000",
            # the fewest diagnosis workers a default ever starts (2: README's NSSTUCK_DIAGNOSIS_WORKERS),
            # not one per core and one more: a worker costs a second of CPU to start; the tests about the
            # pool set their own (tests/slack/test_worker_processes.py)
            "NSSTUCK_DIAGNOSIS_WORKERS": "2",
        }
    )
    if socket_mode:
        env["SLACK_APP_TOKEN"] = slack_emulator.app_token
    env.update(extra_env or {})
    log = workdir / "bot.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*PYTHON, "-m", "bot", *options, "serve"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    url = f"http://127.0.0.1:{port}"
    # a guard against a bot that hangs, not a figure: at nice 10 beside a busy timing group one took over 20 s
    deadline = time.monotonic() + 45
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=10)
                raise RuntimeError(f"the bot did not start:\n{log.read_text()}") from None
            time.sleep(0.1)
    running = Running(
        process,
        url,
        slack_emulator.http_driver(f"{url}/slack/events"),
        slack_emulator,
        log,
        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
    )
    try:
        yield running
    finally:
        if not running.killed:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=20)
            assert code == 0, f"serve exited {code} on SIGTERM:\n{log.read_text()}"
        assert_no_resource_warning(log.read_text(), "nsstuck serve")
