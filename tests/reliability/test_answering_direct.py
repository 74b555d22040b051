"""`Answering` with a diagnoser that fails in a way it does not expect (a defect, not an `NsstuckError`):
the failure reaches the future the door holds, and the namespace is free to be asked again. The bot's
end-to-end tests reach this path only when a crash happens to fall there (issue 35's coverage rule)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bot.domain.refs import ClusterName
from bot.errors import NsstuckError
from bot.services.answering import Answering
from bot.services.diagnosing import DiagnosisResult
from bot.services.metrics import Metrics
from bot.services.outbox import Outbox
from bot.store.database import Database


class Told:
    """The asker: what it was told (nothing, on this path)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def could_not_diagnose(self, cluster: ClusterName, namespace: str, error: NsstuckError) -> None:
        self.said.append(f"could not diagnose {namespace}: {error}")

    def could_not_save(self, namespace: str) -> None:
        self.said.append(f"could not save {namespace}")


def test_a_defect_in_the_diagnosis_reaches_the_door_and_frees_the_namespace(tmp_path: Path) -> None:
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
        with pytest.raises(KeyError, match="a rule's defect"):
            done.result(timeout=10)
        assert told.said == []  # not an NsstuckError: nothing to tell the asker in words
        # the failed diagnosis is no longer in flight: the next ask diagnoses again, not joins a dead one
        again = answering.submit(ClusterName("prod"), "shop", channel="C1", user="U1", asker=told)
        assert second.wait(10)
        with pytest.raises(KeyError):
            again.result(timeout=10)
        assert calls == ["shop", "shop"]
        assert answering.problems() == []  # the pools survived it
    finally:
        answering.close()
        db.engine.dispose()
