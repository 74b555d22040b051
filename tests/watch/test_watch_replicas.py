"""Two `nsstuck serve` replicas watching one cluster on one PostgreSQL database, each logged in as the
runtime role that `db upgrade` granted its share (README "Database roles"): each round of the cluster
is claimed by one of them, which lists its namespaces once; the stuck namespace is posted once and its
resolution said once; both replicas' /metrics say the same of it (issue 25 §1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.store import migrating
from tests.conftest import _postgres_admin_url
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL
from tests.pgdatabase import Roles, database_with_roles
from tests.slack._bot import serve_process
from tests.watch.test_watch_bot import (
    Store,
    metrics,
    named,
    remove_finalizer,
    top_level,
    wait,
    wait_rounds,
    watch_env,
    watched_config,
)

NAMESPACE_LIST = "GET /api/v1/namespaces"  # the watch's one list per round (a diagnosis reads /namespaces/NAME)


@pytest.fixture
def roles() -> Iterator[Roles]:
    admin = _postgres_admin_url()
    assert admin is not None
    with database_with_roles(admin) as made:
        yield made


@pytest.mark.postgres
def test_two_replicas_scan_each_round_once_and_post_once(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path, roles: Roles
) -> None:
    slack = slack_emulator
    _namespace(kube_emulator, "ddd", delete=True)
    config = watched_config(tmp_path, kube_emulator)
    clock = tmp_path / "now"
    clock.write_text("2026-11-20T08:20:00Z\n")  # Terminating for 20 minutes, watched after 15
    migrating.upgrade(roles.migration, variable=migrating.MIGRATION_URL, runtime_role=roles.runtime_role)
    store = Store(roles.admin)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kube_emulator.journal.clear()
    with (
        serve_process(slack, config, roles.runtime, tmp_path / "a", extra_env=watch_env(clock)) as first,
        serve_process(slack, config, roles.runtime, tmp_path / "b", extra_env=watch_env(clock)) as second,
    ):
        [verdict] = wait(slack, lambda: top_level(slack, OPS_CHANNEL, "ddd"))
        assert "found by nsstuck's watch, unasked" in verdict
        wait_rounds(slack, store, datetime.now(UTC), 8)
        assert len(top_level(slack, OPS_CHANNEL, "ddd")) == 1
        [run] = store.rows("SELECT post_channel, posted_at FROM diagnoses WHERE post_channel IS NOT NULL")
        assert run["posted_at"] is not None

        # one claim per cluster and round, and one list of the namespaces per claimed round
        rounds = store.rounds()
        starts = [r["round_start"] for r in rounds]
        assert len(starts) == len(set(starts)) >= 8
        pids = {str(first.process.pid), str(second.process.pid)}
        assert {r["claimed_by"].rsplit(":", 1)[1] for r in rounds} <= pids  # host:pid of the replica
        finished = [r for r in rounds if r["finished_at"] is not None]
        assert all(r["outcome"] == "listed" for r in finished)
        lists = kube_emulator.journal.lines().count(NAMESPACE_LIST)
        # a round claimed but still listing when we looked may have asked already
        assert len(finished) <= lists <= len(rounds), (lists, len(finished), len(rounds))

        # both replicas read the incident from the database: the same line on each
        seen = [named(metrics(bot), "nsstuck_namespace_terminating_seconds") for bot in (first, second)]
        assert (
            seen[0]
            == seen[1]
            == {(("cause", "orphaned_finalizer"), ("cluster", "prod-eu"), ("namespace", "ddd")): 1200.0}
        )

        remove_finalizer(kube_emulator)
        thread = next(m for m in slack.channel_messages(OPS_CHANNEL) if "ddd" in slack.render(m))["ts"]

        def resolutions() -> list[str]:
            return [n for n in (slack.render(m) for m in slack.thread(OPS_CHANNEL, thread)) if "is gone: resolved" in n]

        wait(slack, resolutions)
        wait_rounds(slack, store, datetime.now(UTC), 6)
        assert len(resolutions()) == 1
        assert all(named(metrics(bot), "nsstuck_namespace_terminating_seconds") == {} for bot in (first, second))
        log = first.log.read_text() + second.log.read_text()
    assert not re.search(r"permission denied|InsufficientPrivilege", log), log[-3000:]
