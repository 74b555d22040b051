"""The secrets sweep over HTTP, split by surface (issue 35): one run of every scenario through the bot
over HTTP (with a remediation and a digest) and through the command line, every failure path, then
Slack revoking the bot token (`sweep`, module-scoped: built once, then only read); each test searches
one group of surfaces for the canaries of `tests/reliability/test_secrets_sweep.py`, or checks that the
run went as it must (so that the search is not vacuous).

Before the split this was one test, `test_secrets_sweep.py::test_no_secret_reaches_what_anyone_can_see`;
every check it made is one of the tests here. The run is shared, so the module runs in one process
(tests/_scheduling.py): the split costs no CPU, and a leak names the surface in the test's id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests._migrated import migrated
from tests.fakes.kubeapi.scenarios import SCENARIOS
from tests.fakes.slackapi.pytest_plugin import ALICE, BOB, ENV_TO_CLEAR, OPS_CHANNEL
from tests.reliability.test_secrets_sweep import (
    AUTH_KINDS,
    DIGEST_CHANNEL,
    FAST,
    SWEEP_CHANNELS,
    Canaries,
    Outcome,
    Run,
    Surfaces,
    _base_env,
    _changed_objects,
    _command_lines,
    _delivery,
    _diagnose_everything,
    _drive_the_bot,
    _dump_database,
    _planted,
    _processes,
    _slack,
    _slack_surfaces,
    _values_were_there,
    _wait,
    build_world,
)
from tests.slack._bot import serve_process

# every scenario of the suite in one run: about 40 s on a quiet machine, 135 s seen on one whose host took
# half its time; the suite's 120 s is a guard against hangs, not a budget for this run (built in the first
# test's setup, so that test's timeout holds it)
pytestmark = pytest.mark.timeout(600)


@dataclass
class Sweep:
    canaries: Canaries
    surfaces: Surfaces = field(default_factory=Surfaces)
    problems: list[str] = field(default_factory=list)
    outcomes: list[tuple[Run, Outcome]] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    expected_states: dict[str, str] = field(default_factory=dict)
    auth_kinds: set[str] = field(default_factory=set)
    exec_plugin_calls: str = ""
    bot_posts: int = 0
    planted: dict[str, Any] = field(default_factory=dict)

    def only(self, belongs: Callable[[str], bool]) -> Surfaces:
        """The surfaces whose name `belongs` says are of a group."""
        return Surfaces({name: text for name, text in self.surfaces.texts.items() if belongs(name)})


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """Every scenario through the bot over HTTP (with a remediation and a digest) and through the command
    line, every failure path, then Slack revokes the bot token; what anyone can see is collected."""
    tmp_path = tmp_path_factory.mktemp("sweep")
    canaries = Canaries()
    result = Sweep(canaries)
    surfaces = result.surfaces
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ENV_TO_CLEAR:  # as the `slack_env` fixture does
            monkeypatch.delenv(name, raising=False)
        with build_world(tmp_path / "world", sorted(SCENARIOS), canaries) as world, _slack(canaries) as slack:
            config = world.config(digest=True)
            clock = tmp_path / "now"
            clock.write_text("2026-11-23T09:00:30Z\n")  # 30 s after the digest's time: made up at start-up
            database = f"sqlite:///{tmp_path / 'bot.db'}"
            migrated(database)
            env = _base_env(world, slack, database, config, clock)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            (tmp_path / "bot").mkdir()
            # every cluster asked at once: three diagnosis workers, as the default on two cores
            bot_env = {**FAST, "NSSTUCK_CLOCK_FILE": str(clock), "NSSTUCK_DIAGNOSIS_WORKERS": "3"}
            debug = ("--log-level", "DEBUG")
            with serve_process(slack, config, database, tmp_path / "bot", extra_env=bot_env, options=debug) as bot:
                result.problems += _drive_the_bot(bot, slack, world, database, surfaces)

                # the command line, while the bot runs: every cluster in process, each command as a process
                result.states, failed = _diagnose_everything(surfaces, world)
                result.problems += failed
                result.outcomes = _processes(surfaces, _command_lines(world, env, tmp_path))

                # Slack revokes the bot token: the bot's posts fail, so do a digest and a start
                slack.revoke_token(slack.bot_token)
                first = world.scenarios[0]
                ack = bot.driver.slash_command(
                    "/nsstuck", f"{first.name} {first.namespace}", user=ALICE, channel=SWEEP_CHANNELS[0]
                )
                _delivery(surfaces, "/nsstuck after the token was revoked", ack)
                clock.write_text("2026-11-23T09:05:00Z\n")  # a digest of its own, not the one made at 09:00:30
                digest_run = ("digest", "run", "--channel", DIGEST_CHANNEL)
                no_port = {**env, "NSSTUCK_HTTP_PORT": "1"}  # it must stop at auth.test, never get as far as serving
                refused = [
                    Run(digest_run, env, {0, 1}, "token_revoked"),
                    Run(("serve",), no_port, {2}, "token_revoked"),
                ]
                result.outcomes += _processes(surfaces, refused)

                def refusals() -> int:
                    calls = slack.calls("chat.postMessage")
                    return sum((e.response or {}).get("error") == "token_revoked" for e in calls)

                _wait(lambda: refusals() >= 1, 20, "the bot's post to be refused")
                time.sleep(1.5)  # the outbox tries again (NSSTUCK_REPOST_SECONDS) and says so in the log
            surfaces.add("bot log", bot.log.read_text())
            _slack_surfaces(slack, surfaces, [OPS_CHANNEL, *SWEEP_CHANNELS, DIGEST_CHANNEL], [ALICE, BOB])
            surfaces.add("database dump (SQLite)", _dump_database(database))
            for file in tmp_path.glob("bot.db*"):
                surfaces.add(f"database file {file.name}", file.read_bytes())
            prod = world.cluster("prod-eu").emulator
            surfaces.add("objects of the cluster nsstuck changed", _changed_objects(prod))
            result.planted = _planted(prod)
            result.bot_posts = len([e for e in slack.calls("chat.postMessage") if e.ok and e.token_kind == "bot"])
            result.auth_kinds = {c.auth for c in world.scenarios}
            result.expected_states = {c.name: c.state for c in world.scenarios}
            result.exec_plugin_calls = world.exec_marker.read_text()
    return result


# the groups of surfaces, by the names `Surfaces.add` gave them
def _audit(name: str) -> bool:
    return name.startswith("nsstuck audit")


def _stored(name: str) -> bool:
    return name.startswith(("database ", "nsstuck backup", "objects of the cluster"))


def _command_line(name: str) -> bool:
    return name.startswith(("nsstuck ", "in-process commands' logs")) and not _audit(name) and not _stored(name)


def _bot_and_slack(name: str) -> bool:
    return not (_audit(name) or _stored(name) or _command_line(name))


def _assert_clean(surfaces: Surfaces, canaries: Canaries, *, at_least: int) -> None:
    assert len(surfaces.texts) >= at_least, sorted(surfaces.texts)  # something was collected
    leaks = surfaces.leaks(canaries.all())
    assert not leaks, "secrets leaked:\n" + "\n".join(leaks)


def test_no_secret_in_what_the_command_line_printed(sweep: Sweep) -> None:
    """Every command's stdout and stderr, in process (with every logger at DEBUG) and as processes (at
    DEBUG): diagnoses of every cluster and every failure, history, digests, config and clusters checks,
    bad database URLs, malformed configs, `serve` with a token Slack does not know."""
    surfaces = sweep.only(_command_line)
    _assert_clean(surfaces, sweep.canaries, at_least=100)
    assert sum(map(len, surfaces.texts.values())) > 10_000


def test_no_secret_in_the_bot_log_slack_or_the_bots_answers(sweep: Sweep) -> None:
    """The bot's log at DEBUG, every request the Slack emulator received and every message, ephemeral,
    response_url post, update, file and Home view it holds, and the bot's HTTP answers (to Slack,
    forged requests among them, and on /healthz, /readyz, /metrics)."""
    surfaces = sweep.only(_bot_and_slack)
    _assert_clean(surfaces, sweep.canaries, at_least=50)
    assert "bot log" in surfaces.texts
    assert any(name.startswith("slack request") for name in surfaces.texts)
    assert any(name.startswith("message in") for name in surfaces.texts)
    assert any(name.startswith("GET ") and name.endswith("/metrics") for name in surfaces.texts)


def test_no_secret_in_the_database_the_backups_or_the_cluster(sweep: Sweep) -> None:
    """The whole database as text (snapshots decompressed) and the SQLite file's bytes, every backup as
    `nsstuck backup show` prints it (with --raw too), and the objects of the cluster nsstuck changed."""
    surfaces = sweep.only(_stored)
    _assert_clean(surfaces, sweep.canaries, at_least=5)
    assert "database dump (SQLite)" in surfaces.texts
    assert any(name.startswith("nsstuck backup show 1 --raw") for name in surfaces.texts)
    assert "objects of the cluster nsstuck changed" in surfaces.texts


def test_no_secret_in_the_audit_export(sweep: Sweep) -> None:
    """`nsstuck audit export` (JSON and CSV) and `nsstuck audit verify`."""
    surfaces = sweep.only(_audit)
    _assert_clean(surfaces, sweep.canaries, at_least=6)
    assert any("execution_started" in text for text in surfaces.texts.values())


def test_every_surface_was_searched(sweep: Sweep) -> None:
    """Each surface belongs to one of the groups above, and the whole is what the sweep was before."""
    groups = (_command_line, _bot_and_slack, _stored, _audit)
    for name in sweep.surfaces.texts:
        assert sum(group(name) for group in groups) == 1, name
    sweep.surfaces.assert_clean([])  # more than 10 surfaces, more than 10,000 characters


def test_every_command_ended_as_it_must(sweep: Sweep) -> None:
    """Every answer came, every command exited with its code, said what it must, printed no traceback,
    and ended with one line saying why when it failed."""
    problems = [*sweep.problems, *(p for run, outcome in sweep.outcomes for p in run.problems(outcome))]
    assert not problems, "\n\n".join(problems)


def test_the_credentials_and_values_were_in_use(sweep: Sweep) -> None:
    """Not vacuous: a report from every cluster, each holding one kind of credential; the exec plugin saw
    its environment; the bot token posted; the values were in the cluster, in a namespace diagnosed."""
    _values_were_there(sweep.planted, sweep.canaries, sweep.surfaces)
    assert sweep.auth_kinds == set(AUTH_KINDS)
    assert sweep.states == sweep.expected_states
    assert "token issued" in sweep.exec_plugin_calls  # the plugin saw its environment
    assert sweep.bot_posts  # the bot token, the only one the Slack emulator knows, was used
