"""`Answering` with a diagnoser that fails in a way it does not expect (a defect, not an `NsstuckError`):
the asker is told in words (the door drops the future it holds: before, the asker was left with
"On it..." and nothing after), the defect is logged with its traceback, and the namespace is free to be
asked again. The bot's end-to-end tests reach this path only when a crash happens to fall there (issue
35's coverage rule)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError
from bot.kube.connecting import ClusterTarget
from bot.services.answering import Answering
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from bot.services.metrics import Metrics
from bot.services.outbox import Outbox
from bot.store.database import Database
from tests._migrated import migrated
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP


class Told:
    """The asker: what it was told."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def could_not_diagnose(self, cluster: ClusterName, namespace: str, error: NsstuckError) -> None:
        self.said.append(f"could not diagnose {namespace}: {error}")

    def could_not_save(self, namespace: str, why: str) -> None:
        self.said.append(f"could not save {namespace}: {why}")


def test_a_defect_in_the_diagnosis_is_told_to_the_asker_and_frees_the_namespace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    second = threading.Event()

    def diagnose(cluster: ClusterName, namespace: str) -> DiagnosisResult:
        calls.append(namespace)
        if len(calls) == 2:
            second.set()
        raise KeyError("a rule's defect")

    db = Database(f"sqlite:///{tmp_path / 'unused.db'}")  # never reached on this path
    answering = Answering(
        db,
        diagnose=diagnose,
        outbox=Outbox.__new__(Outbox),  # never reached on this path: nothing is recorded
        metrics=Metrics(),
        outage_seconds=1,
        workers=1,
    )
    try:
        told = Told()
        done = answering.submit(ClusterName("prod"), "shop", channel="C1", user="U1", asker=told)
        assert done.result(timeout=10) is None
        assert told.said == [
            "could not diagnose shop: nsstuck failed while diagnosing (KeyError); the bot's log has the details"
        ]
        logged = [r for r in caplog.records if r.getMessage() == "the diagnosis failed on a defect"]
        assert logged
        assert logged[0].exc_info is not None  # with its traceback, for whoever reads the log
        # the failed diagnosis is no longer in flight: the next ask diagnoses again, not joins a dead one
        again = answering.submit(ClusterName("prod"), "shop", channel="C1", user="U1", asker=told)
        assert second.wait(10)
        assert again.result(timeout=10) is None
        assert calls == ["shop", "shop"]
        assert len(told.said) == 2
        assert answering.problems() == []  # the pools survived it
    finally:
        answering.close()
        db.engine.dispose()


def test_a_diagnosis_the_database_refuses_is_told_to_the_asker_as_refused(
    tmp_path: Path, kube_emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal (not an outage) is not waited out, and the asker hears what happened, not "unavailable"."""
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": "shop"}})
    http.post("/api/v1/namespaces/shop/configmaps", {"metadata": {"name": "kept", "finalizers": ["example.com/x"]}})
    http.delete("/api/v1/namespaces/shop")
    kube_emulator.settle()
    target = ClusterTarget(name=ClusterName("prod"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))
    path = tmp_path / "nsstuck.db"
    url = f"sqlite:///{path}"
    migrated(url)
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute("CREATE TRIGGER refuse BEFORE INSERT ON diagnoses BEGIN SELECT RAISE(ABORT, 'refused'); END")
    db = Database(url)
    answering = Answering(
        db,
        diagnose=lambda cluster, namespace: diagnose_namespace(target, namespace),
        outbox=Outbox.__new__(Outbox),  # never reached: nothing is recorded
        metrics=Metrics(),
        outage_seconds=30,  # a refusal is not an outage: told at once, not after this
        workers=1,
    )
    try:
        told = Told()
        done = answering.submit(ClusterName("prod"), "shop", channel="C1", user="U1", asker=told)
        assert done.result(timeout=20) is None
        assert told.said == ["could not save shop: the database refused it (the bot's log has the details)"]
        assert any(r.getMessage() == "recording the diagnosis of shop failed" for r in caplog.records)
        with db.unit_of_work() as uow:
            assert uow.incidents.open_incidents() == []  # nothing half-recorded
    finally:
        answering.close()
        db.dispose()
