"""What the diagnosis workers of the running bot leave behind, and how long the bot waits for their
answers (issue 36, findings 5 and 8).

Finding 5: the kubernetes client writes a kubeconfig's inline credentials (`certificate-authority-data`,
`client-key-data`) to temporary files and deletes them only in an `atexit` handler, which a worker
(a multiprocessing child, ending through `os._exit`) never runs. The bot runs with `TMPDIR` pointed at a
directory of the test's own and a kubeconfig with an inline client key; its workers are killed, hung
and replaced for their memory; once the bot is stopped, no file is left there, the key in none.

Finding 8: the bot read a worker's answer with `pipe.recv()`, no size cap, no timeout: a worker that
stopped in the middle of sending held its supervising thread for ever, and its asker never heard. The
worker is made to stop mid-send for real: the bot is stopped (SIGSTOP) while the worker diagnoses a
namespace whose answer (some 0.5 MB) is larger than the socket's buffer, so the worker blocks in
`write`; it is stopped there, and the bot continued.
"""

from __future__ import annotations

import base64
import os
import platform
import random
import re
import shutil
import signal
import string
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import pytest
import yaml

from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, CAROL, OPS_CHANNEL
from tests.slack._bot import Running, running_bot
from tests.slack.test_worker_processes import DEBUG, _alive, _healthy, _told, _verdict, _worker_of


def _client_certificate_kubeconfig(emu: Emulator, path: Path) -> str:
    """Rewrite the bot's kubeconfig so that it authenticates with an inline client certificate and key
    (and trusts the emulator's CA, inline too); the key's PEM."""
    cert, key = emu.issue_client_certificate("nsstuck-bot")
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert.encode()).decode(),
        "client-key-data": base64.b64encode(key.encode()).decode(),
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return key


def _holding(directory: Path, secrets: list[bytes]) -> list[Path]:
    """The files under `directory` that hold any of `secrets`."""
    found = []
    for path in directory.rglob("*"):
        with suppress(OSError):  # a worker's directory removed meanwhile
            if path.is_file() and any(secret in path.read_bytes() for secret in secrets):
                found.append(path)
    return found


def test_no_credential_file_is_left_by_workers_killed_hung_or_replaced(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # short: the fork server's socket goes there too, and an AF_UNIX path has at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="nsstuck-t-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    env = {
        **DEBUG,
        "TMPDIR": str(tmp),
        # every worker holds more than 1 MB: each is replaced for its memory after its job
        "NSSTUCK_WORKER_MAX_RSS_MB": "1",
        # a worker still at a diagnosis after 1 + 2 + 2 + 5 s is taken for hung
        "NSSTUCK_DIAGNOSIS_DEADLINE_SECONDS": "2",
        "NSSTUCK_CREDENTIAL_TIMEOUT_SECONDS": "1",
    }
    for name in ("victim", "frozen"):
        KubeHTTP(kube_emulator.url, kube_emulator.admin_token).post("/api/v1/namespaces", {"metadata": {"name": name}})
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        key = _client_certificate_kubeconfig(kube_emulator, tmp_path / "prod.kubeconfig")
        body = [line.encode() for line in key.splitlines() if not line.startswith("-----")]
        secrets = [key.encode(), max(body, key=len)]

        # killed (SIGKILL) in the middle of a diagnosis, once it has written the key where it may
        kube_emulator.knobs.latency(1800, match=r"^GET /api/v1/namespaces/victim$")
        bot.driver.slash_command("/nsstuck", "prod-eu victim", user=ALICE, channel=OPS_CHANNEL)
        victim = _worker_of(bot, "victim")
        bot.slack.wait_for(lambda: _holding(tmp, secrets), timeout=20, message="no worker wrote the client key")
        os.kill(victim, signal.SIGKILL)
        assert "was killed by SIGKILL before it finished" in _told(bot, "victim")

        # hung (SIGSTOP) past its job's limit: killed and replaced
        kube_emulator.knobs.latency(1500, match=r"^GET /api/v1/namespaces/frozen$")
        bot.driver.slash_command("/nsstuck", "prod-eu frozen", user=BOB, channel=OPS_CHANNEL)
        frozen = _worker_of(bot, "frozen")
        os.kill(frozen, signal.SIGSTOP)
        try:
            assert "did not finish within 10s and was stopped" in _told(bot, "frozen", timeout=40)
        finally:
            with suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGCONT)

        # replaced for its memory after a diagnosis that ended well
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=CAROL, channel=OPS_CHANNEL)
        assert "stuck" in _verdict(bot, "ddd")
        ddd = _worker_of(bot, "ddd")
        bot.slack.wait_for(lambda: not _alive(ddd), timeout=20, message="the worker was not replaced")
        log = bot.log.read_text()
        assert f"worker pid {victim} was killed by SIGKILL during diagnosis of prod-eu/victim" in log
        assert f"worker pid {frozen} was still at diagnosis of prod-eu/frozen" in log
        assert re.search(rf"worker pid {ddd} holds [0-9]+ MB after the diagnosis of prod-eu/ddd", log)
        # the key is only in the directories of the two workers running now
        assert {p.parent.name.rsplit("-", 1)[0] for p in _holding(tmp, secrets)} <= {
            "nsstuck-worker-0",
            "nsstuck-worker-1",
        }
    # the bot stopped: nothing is left of any worker, nor of the bot itself
    assert not _holding(tmp, secrets)
    assert sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")) == []


def test_the_cli_leaves_no_credential_file(kube_emulator: Emulator, tmp_path: Path) -> None:
    from tests._cli import run_nsstuck

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig", context="prod")
    key = _client_certificate_kubeconfig(kube_emulator, kubeconfig)
    done = run_nsstuck("diagnose", "default", "--kubeconfig", str(kubeconfig), env={"TMPDIR": str(tmp)}, process=True)
    assert done.returncode == 0, done.stderr
    assert "default" in done.stdout
    assert not _holding(tmp, [key.encode()])
    assert list(tmp.rglob("*")) == []


# -- finding 8 -------------------------------------------------------------------------------------

# the number of the `write` system call, as /proc/PID/syscall shows it
WRITE = {"x86_64": 1, "aarch64": 64}.get(platform.machine())


def _large_namespace(emu: Emulator, name: str) -> None:
    """A terminating namespace whose diagnosis comes to some 0.5 MB (more than a socket's buffer): 80
    ConfigMaps held by a finalizer, each with 100 labels of random values (the snapshot keeps them, and
    they do not compress)."""
    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": name}})
    draw = random.Random(36)
    for i in range(80):
        labels = {f"l{j}.example.com/k": "".join(draw.choices(string.ascii_letters, k=63)) for j in range(100)}
        metadata = {"name": f"map-{i}", "finalizers": ["example.com/keep"], "labels": labels}
        http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": metadata})
    http.delete(f"/api/v1/namespaces/{name}")
    emu.settle()


def _blocked_writing(pid: int) -> bool:
    """Whether the process is blocked in `write` (its answer larger than the socket takes, unread)."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()[0] == str(WRITE)
    except (OSError, IndexError):
        return False


def _stop_mid_send(bot: Running, namespace: str) -> int:
    """Ask for the diagnosis of `namespace`, and stop its worker in the middle of sending the answer:
    the bot is stopped until the worker blocks in `write`, then the worker is stopped and the bot
    continued. The worker's pid."""
    bot.driver.slash_command("/nsstuck", f"prod-eu {namespace}", user=ALICE, channel=OPS_CHANNEL)
    worker = _worker_of(bot, namespace)
    bot.process.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60
        blocked = 0  # looks in a row that found it blocked in `write`
        while blocked < 3:
            assert time.monotonic() < deadline, "the worker never blocked sending its answer"
            blocked = blocked + 1 if _blocked_writing(worker) else 0
            time.sleep(0.1)
        os.kill(worker, signal.SIGSTOP)
    finally:
        bot.process.send_signal(signal.SIGCONT)
    return worker


@pytest.mark.skipif(WRITE is None or not Path("/proc/self/syscall").exists(), reason="needs /proc/PID/syscall")
def test_a_worker_stopped_in_the_middle_of_its_answer_is_replaced_and_its_asker_told(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _large_namespace(kube_emulator, "large")
    env = {**DEBUG, "NSSTUCK_DIAGNOSIS_WORKERS": "1", "NSSTUCK_WORKER_ANSWER_SECONDS": "2"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        worker = _stop_mid_send(bot, "large")
        try:
            told = _told(bot, "large", timeout=30)
            assert "Could not diagnose `large` on `prod-eu`" in told
            stalled = re.search(
                r"the process doing it was stopped: its answer stopped arriving: ([\d.]+) MB of ([\d.]+) MB", told
            )
            assert stalled, told
            assert float(stalled[1]) < float(stalled[2]), told  # cut off in the middle
            assert "try again" in told
            bot.slack.wait_for(lambda: not _alive(worker), timeout=10, message="the stalled worker was not killed")
        finally:
            with suppress(ProcessLookupError):
                os.kill(worker, signal.SIGCONT)
        assert (
            f"worker pid {worker} after diagnosis of prod-eu/large: its answer stopped arriving" in bot.log.read_text()
        )
        # the thread is free and the worker replaced: the next command is answered, the bot healthy
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=BOB, channel=OPS_CHANNEL)
        assert "stuck" in _verdict(bot, "ddd")
        assert _healthy(bot)


def test_a_diagnosis_larger_than_a_worker_may_send_is_refused_in_words(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _large_namespace(kube_emulator, "large")
    env = {**DEBUG, "NSSTUCK_DIAGNOSIS_WORKERS": "1", "NSSTUCK_WORKER_MAX_ANSWER_MB": "0.2"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, extra_env=env) as bot:
        bot.driver.slash_command("/nsstuck", "prod-eu large", user=ALICE, channel=OPS_CHANNEL)
        told = _told(bot, "large")
        refused = re.search(
            r"the diagnosis came to ([\d.]+) MB, more than the 0\.2 MB a diagnosis worker may send to the bot "
            r"\(NSSTUCK_WORKER_MAX_ANSWER_MB\); nothing was recorded",
            told,
        )
        assert refused, told
        assert float(refused[1]) > 0.2, told
        # the worker is still the same one, and answers the next command
        worker = _worker_of(bot, "large")
        bot.driver.slash_command("/nsstuck", "prod-eu ddd", user=BOB, channel=OPS_CHANNEL)
        assert "stuck" in _verdict(bot, "ddd")
        assert _worker_of(bot, "ddd") == worker
