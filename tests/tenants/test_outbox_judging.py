"""The outbox's judging of what a person may be shown (`diagnose_as: requester`, issue 39 §1): when it fails
(the cluster does not answer the SubjectAccessReviews), nothing is posted unjudged; the run stays in the
outbox with its error, to be tried again, and a run already claimed by another is not posted twice. The
real outbox, on a run the recording service stored from a real diagnosis of the emulator; the judge is the
callable the bot hands it (bot.services.tenancy's), here one that fails as a cluster that does not answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.domain.findings import Diagnosis
from bot.domain.refs import ClusterName
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from bot.services.outbox import Outbox
from bot.services.recording import claim_post, pending_post, record
from bot.store.database import Database
from tests._migrated import migrated
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP


class Publisher:
    """Slack's side: nothing may reach it on these paths."""

    def attempt(self, pending: object) -> object:
        raise AssertionError("posted although nothing may be posted")


def _judge_fails(diagnosis: Diagnosis, slack_user: str) -> Diagnosis:
    raise ConnectionResetError("the cluster did not answer the SubjectAccessReview")


def test_a_failed_judging_posts_nothing_and_keeps_the_run_for_later(
    tmp_path: Path, kube_emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    http = KubeHTTP(kube_emulator.url, kube_emulator.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    http.post("/api/v1/namespaces/team-a/configmaps", {"metadata": {"name": "kept", "finalizers": ["example.com/x"]}})
    http.delete("/api/v1/namespaces/team-a")
    kube_emulator.settle()
    target = ClusterTarget(name=ClusterName("prod"), kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kc"))
    url = f"sqlite:///{tmp_path / 'nsstuck.db'}"
    migrated(url)
    db = Database(url)
    try:
        run = record(
            db, diagnose_namespace(target, "team-a"), trigger="slack", requested_by="U0TENANT", post_channel="C1"
        )
        outbox = Outbox(db, Publisher(), remediable=lambda cluster, channel: False, shown=_judge_fails)  # type: ignore[arg-type]
        assert outbox.deliver(run.run_id) is False
        pending = pending_post(db, run.run_id)
        assert pending is not None  # still to be posted
        assert pending.attempts == 1
        assert any(
            "judging what run" in r.getMessage() and "it will be retried" in r.getMessage() for r in caplog.records
        )
        # claimed by another worker or replica meanwhile: this one posts nothing
        assert claim_post(db, run.run_id, pending.attempts)
        assert outbox.deliver(run.run_id) is False
    finally:
        db.dispose()
