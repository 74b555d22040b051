"""PostgreSQL restarted under the running bot: it recovers without a restart of its own and loses
nothing it acknowledged.

The bot runs on a PostgreSQL server of this test's own (scripts/pg-test-server), which is stopped
(connections cut, as in a restart or a fail-over) while commands arrive, and started again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._rows import rows
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.slack._bot import running_bot

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "pg-test-server"
RETRYING = re.compile(r"the database is unavailable \([^)]*\); retrying")


def _pg_available() -> bool:
    return shutil.which("pg_config") is not None or any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


@pytest.fixture
def own_postgres() -> Iterator[tuple[str, dict[str, str]]]:
    """A PostgreSQL server for this test alone: (URL, the environment for `pg-test-server down/up`)."""
    if not _pg_available():
        if os.environ.get("NSSTUCK_REQUIRE_POSTGRES") == "1":
            pytest.fail("NSSTUCK_REQUIRE_POSTGRES=1 but the PostgreSQL binaries are missing")
        pytest.skip("no PostgreSQL binaries")
    out = subprocess.run([str(SCRIPT), "start"], check=True, capture_output=True, text=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        for assignment in line.removeprefix("export ").split():
            key, _, value = assignment.partition("=")
            env[key] = value
    try:
        yield env["NSSTUCK_TEST_POSTGRES_URL"], env
    finally:
        subprocess.run([str(SCRIPT), "stop", env["PG_TEST_DIR"]], check=False, env=env)


def _pg(env: dict[str, str], what: str) -> None:
    subprocess.run([str(SCRIPT), what, env["PG_TEST_DIR"]], check=True, env=env)


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
        return int(response.status) == 200


def _readiness(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return int(e.code), e.read().decode()


def _waiting_for_the_database(log: Path) -> int:
    """How many recordings of a diagnosis the bot has said wait for the database (each says it once,
    bot/services/answering.py `record_durably`)."""
    return len(RETRYING.findall(log.read_text(errors="replace")))


def test_the_bot_rides_out_a_database_restart(
    own_postgres: tuple[str, dict[str, str]],
    slack_emulator: SlackEmulator,
    kube_emulator: Emulator,
    tmp_path: Path,
) -> None:
    url, env = own_postgres
    for name in ("before", "during-1", "during-2", "after"):
        _namespace(kube_emulator, name, delete=True)
    with running_bot(slack_emulator, kube_emulator, tmp_path, database=url) as bot:
        bot.driver.slash_command("/nsstuck", "prod-eu before", user=ALICE, channel=OPS_CHANNEL)
        slack_emulator.wait_for_message(OPS_CHANNEL, "before", timeout=20)

        _pg(env, "down")
        try:
            for name in ("during-1", "during-2"):
                acked = bot.driver.slash_command("/nsstuck", f"prod-eu {name}", user=ALICE, channel=OPS_CHANNEL)
                assert acked.status == 200
                assert "On it" in acked.body
            # the diagnoses are done; their recording waits for the database (each says so once)
            slack_emulator.wait_for(lambda: _waiting_for_the_database(bot.log) >= 2 or None, timeout=20)
            assert _healthy(bot.url)  # alive: nothing to restart
            code, said = _readiness(bot.url)  # but not ready: the database does not answer
            assert (code, said.split(" (")[0]) == (503, "not ready: the database is unavailable"), said
        finally:
            _pg(env, "up")

        for name in ("during-1", "during-2"):
            slack_emulator.wait_for_message(OPS_CHANNEL, name, timeout=30)
        bot.driver.slash_command("/nsstuck", "prod-eu after", user=ALICE, channel=OPS_CHANNEL)
        slack_emulator.wait_for_message(OPS_CHANNEL, "after", timeout=20)
        assert _healthy(bot.url)
        assert _readiness(bot.url) == (200, "ready\n")

    recorded = sorted(row["namespace"] for row in rows(url, "SELECT namespace FROM diagnoses"))
    assert recorded == ["after", "before", "during-1", "during-2"]
    assert "database is unavailable" in bot.log.read_text()


def test_an_outage_longer_than_the_bot_waits_is_told_to_the_user(
    own_postgres: tuple[str, dict[str, str]],
    slack_emulator: SlackEmulator,
    kube_emulator: Emulator,
    tmp_path: Path,
) -> None:
    url, env = own_postgres
    _namespace(kube_emulator, "waiting", delete=True)
    extra = {"NSSTUCK_DB_OUTAGE_SECONDS": "2"}
    with running_bot(slack_emulator, kube_emulator, tmp_path, database=url, extra_env=extra) as bot:
        _pg(env, "down")
        try:
            acked = bot.driver.slash_command("/nsstuck", "prod-eu waiting", user=ALICE, channel=OPS_CHANNEL)
            assert "On it" in acked.body
            told = slack_emulator.wait_for_ephemeral(OPS_CHANNEL, ALICE, "could not be saved", timeout=20)
            assert "`waiting`" in slack_emulator.render(told)
            assert "the database has been unavailable for too long" in slack_emulator.render(told)
            assert _healthy(bot.url)
        finally:
            _pg(env, "up")
        # and the bot works again once the database is back, without a restart
        bot.driver.slash_command("/nsstuck", "prod-eu waiting", user=ALICE, channel=OPS_CHANNEL)
        slack_emulator.wait_for_message(OPS_CHANNEL, "waiting", timeout=20)
    assert "recording the diagnosis of waiting failed" in bot.log.read_text()
