"""Digests built against emulated clusters with a moved clock: on schedule, once, made up after a
down time, unreachable clusters said, and new / still / resolved right across consecutive digests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.kube.registry import ClusterRegistry
from bot.services.digest_text import render_text
from bot.services.digesting import Digest, run_due, run_now
from bot.settings import AppConfig
from bot.store.database import Database
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import run_for

CHANNEL = "C0123ABCD"


def _config(tmp_path: Path, kube: Emulator, *, schedule: str = "0 9 * * *", unreachable: bool = False) -> AppConfig:
    kube.write_kubeconfig(tmp_path / "prod.kubeconfig")
    clusters: list[dict[str, Any]] = [{"name": "prod-eu", "kubeconfig": str(tmp_path / "prod.kubeconfig")}]
    if unreachable:
        (tmp_path / "gone.kubeconfig").write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
            "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
            "users: [{name: u, user: {token: digest-secret-token-42}}]\n"
            "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
        )
        clusters.append({"name": "gone", "kubeconfig": str(tmp_path / "gone.kubeconfig")})
    return AppConfig.model_validate(
        {
            "clusters": clusters,
            "digests": [{"channel": CHANNEL, "schedule": schedule, "timezone": "Europe/Berlin", "stuck_after": "30m"}],
        }
    )


class Posted:
    """Collects what would go to Slack (the Slack side is tested against the Slack emulator)."""

    def __init__(self) -> None:
        self.digests: list[Digest] = []

    def __call__(self, digest: Digest) -> str:
        self.digests.append(digest)
        return f"{1_800_000_000 + len(self.digests)}.000100"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _tick_every_minute(
    db: Database, config: AppConfig, path: Path, posted: Posted, *, start: str, minutes: int
) -> None:
    now = _at(start)
    for _ in range(minutes):
        run_due(db, config, ClusterRegistry.from_config(config, path), now=now, poster=posted, by="test")
        now += timedelta(minutes=1)


def test_a_digest_comes_on_schedule_in_berlin_time_across_the_spring_change(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    config = _config(tmp_path, kube_emulator)
    posted = Posted()
    # (the emulated namespace was deleted on 2026-11-20; Berlin's clocks go forward on 2027-03-28)
    # a tick every minute from 07:30 to 08:30 UTC on the 27th (09:00 CET = 08:00 UTC) ...
    _tick_every_minute(database, config, tmp_path / "c.yaml", posted, start="2027-03-27T07:30:00", minutes=60)
    assert [d.scheduled_for for d in posted.digests] == [_at("2027-03-27T08:00:00")]
    # ... and on the 28th, after the clocks went forward (09:00 CEST = 07:00 UTC)
    _tick_every_minute(database, config, tmp_path / "c.yaml", posted, start="2027-03-28T06:30:00", minutes=60)
    assert [d.scheduled_for for d in posted.digests] == [_at("2027-03-27T08:00:00"), _at("2027-03-28T07:00:00")]
    [section] = posted.digests[0].sections
    assert [e.namespace for e in section.new] == ["ddd"]
    assert section.new[0].cause == "orphaned_finalizer"
    assert [e.namespace for e in posted.digests[1].sections[0].still] == ["ddd"]


def test_a_missed_run_is_made_up_once_within_the_grace_and_not_after(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    config = _config(tmp_path, kube_emulator)
    posted = Posted()
    # down at 09:00 Berlin (08:00 UTC); back at 08:40 UTC: made up at start-up, then never again
    _tick_every_minute(database, config, tmp_path / "c.yaml", posted, start="2026-11-23T08:40:00", minutes=30)
    assert [d.scheduled_for for d in posted.digests] == [_at("2026-11-23T08:00:00")]
    # another replica starting later the same hour finds it claimed
    run_due(
        database,
        config,
        ClusterRegistry.from_config(config, tmp_path / "c.yaml"),
        now=_at("2026-11-23T08:55:00"),
        poster=posted,
        by="other",
    )
    assert len(posted.digests) == 1
    # down the next morning until 09:30 UTC (more than the hour of grace late): nothing is made up
    _tick_every_minute(database, config, tmp_path / "c.yaml", posted, start="2026-11-24T09:30:00", minutes=5)
    assert len(posted.digests) == 1
    with database.unit_of_work() as uow:
        runs = uow.digests.for_key(config.digests[0].key)
        assert [(r.status, r.claimed_by) for r in runs] == [("posted", "test")]


def test_an_unreachable_cluster_is_said_never_skipped(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    config = _config(tmp_path, kube_emulator, unreachable=True)
    posted = Posted()
    run_due(
        database,
        config,
        ClusterRegistry.from_config(config, tmp_path / "c.yaml"),
        now=_at("2026-11-23T08:00:10"),
        poster=posted,
    )
    [digest] = posted.digests
    gone = next(s for s in digest.sections if s.cluster == "gone")
    assert not gone.reachable
    assert gone.error
    assert "digest-secret-token-42" not in gone.error
    text = render_text(digest)
    assert "gone: UNREACHABLE" in text
    assert "1 cluster unreachable" in text
    assert not digest.all_clear


def test_new_still_and_resolved_across_three_digests(
    database: Database, kube_emulator: Emulator, tmp_path: Path
) -> None:
    _namespace(kube_emulator, "alpha", delete=True)
    config = _config(tmp_path, kube_emulator)
    posted = Posted()
    path = tmp_path / "c.yaml"

    run_due(database, config, ClusterRegistry.from_config(config, path), now=_at("2026-11-23T08:00:30"), poster=posted)
    first = posted.digests[-1].sections[0]
    assert ([e.namespace for e in first.new], first.still, first.resolved) == (["alpha"], (), ())

    _namespace(kube_emulator, "beta", delete=True)
    run_due(database, config, ClusterRegistry.from_config(config, path), now=_at("2026-11-24T08:00:30"), poster=posted)
    second = posted.digests[-1].sections[0]
    assert [e.namespace for e in second.new] == ["beta"]
    assert [e.namespace for e in second.still] == ["alpha"]
    assert second.resolved == ()

    # alpha's finalizer goes; the namespace controller finishes it
    KubeHTTP(kube_emulator.url, kube_emulator.admin_token).patch(
        "/api/v1/namespaces/alpha/configmaps/mymap", {"metadata": {"finalizers": None}}
    )
    run_for(kube_emulator, 60)
    run_due(database, config, ClusterRegistry.from_config(config, path), now=_at("2026-11-25T08:00:30"), poster=posted)
    third = posted.digests[-1].sections[0]
    assert third.new == ()
    assert [e.namespace for e in third.still] == ["beta"]
    assert [e.namespace for e in third.resolved] == ["alpha"]
    assert posted.digests[-1].previous == _at("2026-11-24T08:00:00")
    # each stuck namespace is an incident, and the digest links it
    assert all(e.incident_id for e in (*second.new, *second.still))


def test_all_clear_is_one_line(database: Database, kube_emulator: Emulator, tmp_path: Path) -> None:
    config = _config(tmp_path, kube_emulator)
    posted = Posted()
    run_due(
        database,
        config,
        ClusterRegistry.from_config(config, tmp_path / "c.yaml"),
        now=_at("2026-11-23T08:00:30"),
        poster=posted,
    )
    [digest] = posted.digests
    assert digest.all_clear
    assert render_text(digest).startswith("All clear (Mon 2026-11-23 09:00 Europe/Berlin): no namespace stuck")
    assert render_text(digest).count("\n") == 1


def test_a_dry_run_writes_nothing(database: Database, kube_emulator: Emulator, tmp_path: Path) -> None:
    _namespace(kube_emulator, "ddd", delete=True)
    config = _config(tmp_path, kube_emulator)
    digest = run_now(
        database,
        config,
        ClusterRegistry.from_config(config, tmp_path / "c.yaml"),
        channel=CHANNEL,
        now=_at("2026-11-23T10:00:00"),
        poster=None,
    )
    assert [e.namespace for e in digest.sections[0].new] == ["ddd"]
    with database.unit_of_work() as uow:
        assert uow.digests.for_key(config.digests[0].key) == []
        assert uow.incidents.open_incidents() == []


def test_all_clear_can_be_silent(database: Database, kube_emulator: Emulator, tmp_path: Path) -> None:
    config = _config(tmp_path, kube_emulator)
    quiet = config.model_copy(update={"digests": (config.digests[0].model_copy(update={"all_clear": False}),)})
    posted = Posted()
    run_due(
        database,
        quiet,
        ClusterRegistry.from_config(quiet, tmp_path / "c.yaml"),
        now=_at("2026-11-23T08:00:30"),
        poster=posted,
    )
    assert posted.digests == []
    with database.unit_of_work() as uow:
        [run] = uow.digests.for_key(quiet.digests[0].key)
        assert run.status == "skipped"
    # the silent run still counts as "the last digest" for the next one
    _namespace(kube_emulator, "ddd", delete=True)
    run_due(
        database,
        quiet,
        ClusterRegistry.from_config(quiet, tmp_path / "c.yaml"),
        now=_at("2026-11-24T08:00:30"),
        poster=posted,
    )
    [digest] = posted.digests
    assert digest.previous == _at("2026-11-23T08:00:00")
    assert [e.namespace for e in digest.sections[0].new] == ["ddd"]
