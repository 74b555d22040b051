"""The channel hears a delete once, whatever happens around it (issue 38 §4): the real bot with its
namespace-delete webhook, the emulator calling it over TLS, the real kubectl, the Slack Web API emulator.

One bot per database backend, then a second one on the same database (the restart):
- a review sent twice (the same review UID) and a second review of the same namespace (another UID), then
  the real delete: one post, one incident, and one audit entry per review (three: the UID sent twice
  writes one);
- another webhook refuses the delete nsstuck allowed: nsstuck's entry is written (it let it through), but
  the namespace never gets a deletionTimestamp, so nothing is posted and no incident is opened;
- the deleting user is a kubeconfig user of its own: the post and the entry name that user;
- Slack fails when the post is due (every chat.postMessage refused), then comes back: posted once;
- Slack fails again, the bot is killed with the incident recorded and its post not made, and started
  again: the new bot posts it once, and nothing else again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests._migrated import migrated
from tests._rows import audit_of, rows
from tests.admission._endpoint import KUBECTL, VWC, Endpoint, configure, kubectl, post, review, write_pair
from tests.admission.test_standalone import deleting, http, with_orphaned_kiali
from tests.emulator.test_admission_delete_webhooks import deny, webhook_server
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import APPROVERS, OPS_CHANNEL
from tests.slack._bot import Running, _free_port, serve_process

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

# the outbox passes every second; the follow-up stays out of the way
FAST = {
    "NSSTUCK_SLACK_POST_INTERVAL": "0.1",
    "NSSTUCK_SLACK_SETTLE_SECONDS": "1",
    "NSSTUCK_REPOST_SECONDS": "1",
    "NSSTUCK_FOLLOW_UP_SECONDS": "3600",
}
ALICE = "alice@example.com"
RETRIER = {"username": "ci-pipeline", "groups": ["system:authenticated"]}


class Cluster:
    def __init__(self, emu: Emulator, tmp_path: Path, url: str) -> None:
        self.emu = emu
        self.tmp_path = tmp_path
        self.url = url
        self.ca = trustme.CA()
        self.cert, self.key = write_pair(self.ca, tmp_path)
        self.config = tmp_path / "nsstuck.yaml"
        emu.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
        self.config.write_text(
            "clusters:\n"
            f"  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n    channels: [{OPS_CHANNEL}]\n"
            f"    approvers: [{APPROVERS}]\n    admission: {{budget_seconds: 8}}\n"
        )
        self.kubeconfig = emu.write_kubeconfig(tmp_path / "admin" / "kubeconfig")
        self.alice = emu.write_kubeconfig(tmp_path / "alice" / "kubeconfig", token=emu.add_token(ALICE))

    @contextlib.contextmanager
    def bot(self, slack: SlackEmulator, name: str) -> Iterator[tuple[Running, Endpoint]]:
        """`nsstuck serve` with the webhook on a port of its own, the emulator's configuration pointing at it."""
        port = _free_port()
        env = {
            **FAST,
            "NSSTUCK_ADMISSION_PORT": str(port),
            "NSSTUCK_ADMISSION_CERT": str(self.cert),
            "NSSTUCK_ADMISSION_KEY": str(self.key),
        }
        workdir = self.tmp_path / name
        workdir.mkdir()
        with serve_process(slack, self.config, self.url, workdir, extra_env=env) as running:
            served = Endpoint(running.process, port, running.log, self.ca, self.cert, self.key)  # type: ignore[arg-type]
            configure(self.emu, "nsstuck", f"https://127.0.0.1:{port}/admission/namespaces/prod-eu", served.ca_bundle)
            yield running, served

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        return rows(self.url, sql, **params)

    def audit(self, namespace: str) -> list[dict[str, Any]]:
        return audit_of(self.url, namespace)

    def incidents(self, namespace: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM incidents WHERE namespace = :ns", ns=namespace)

    def runs(self, namespace: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM diagnoses WHERE namespace = :ns ORDER BY id", ns=namespace)


@pytest.fixture
def cluster(database_url: str, tmp_path: Path) -> Iterator[Cluster]:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        Api(emu).crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
        emu.settle()
        migrated(database_url)
        yield Cluster(emu, tmp_path, database_url)


def told(slack: SlackEmulator, namespace: str) -> list[dict[str, Any]]:
    return [m for m in slack.channel_messages(OPS_CHANNEL) if f"*{namespace}*" in slack.render(m)]


def at_least(count: int, found: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return found if len(found) >= count else None


def uid_of(emu: Emulator, name: str) -> str:
    return str(http(emu).get(f"/api/v1/namespaces/{name}")["metadata"]["uid"])


def test_retries_refusals_outages_and_a_restart_tell_the_channel_once(
    slack_emulator: SlackEmulator, cluster: Cluster
) -> None:
    emu, slack = cluster.emu, slack_emulator
    for name in ("team-retry", "team-refused", "team-alice", "team-outage", "team-restart"):
        with_orphaned_kiali(emu, name)

    with cluster.bot(slack, "first") as (running, served):
        # -- a retried review and a second review of the same namespace, then the delete itself
        uid = uid_of(emu, "team-retry")
        old = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-retry", "uid": uid}}
        path = "/admission/namespaces/prod-eu"
        for review_uid in ("retry-1", "retry-1", "retry-2"):
            status, data, _ = post(served, review("team-retry", uid=review_uid, oldObject=old, userInfo=RETRIER), path)
            assert status == 200, data
            assert json.loads(data)["response"]["allowed"] is True
        result = kubectl(cluster.kubeconfig, "delete", "ns", "team-retry", "--wait=false")
        assert result.returncode == 0, result.stderr
        posted = slack.wait_for(lambda: told(slack, "team-retry") or None, timeout=30)
        entries = slack.wait_for(lambda: at_least(3, cluster.audit("team-retry")), timeout=20)
        reviews = sorted(e["details"]["review_uid"] for e in entries)
        assert len(reviews) == 3, reviews
        assert reviews.count("retry-1") == reviews.count("retry-2") == 1, reviews  # and the API server's review
        assert {e["event"] for e in entries} == {"admission_allowed"}
        assert {e["details"]["namespace_uid"] for e in entries} == {uid}
        assert "was heard before: no second audit entry" in running.log.read_text()

        # -- another webhook refuses what nsstuck allowed: the delete never happens, nothing is told
        with webhook_server() as hooks:
            hooks.answers["/no"] = deny({"code": 403, "reason": "Forbidden", "message": "frozen by change control"})
            http(emu).post(
                VWC,
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "change-control"},
                    "webhooks": [
                        {
                            "name": "freeze.example.com",
                            "clientConfig": {"url": hooks.url("/no"), "caBundle": hooks.ca_bundle},
                            "rules": [
                                {
                                    "operations": ["DELETE"],
                                    "apiGroups": [""],
                                    "apiVersions": ["v1"],
                                    "resources": ["namespaces"],
                                }
                            ],
                            # it refuses by answering; failing open, nsstuck's prediction does not count it as a
                            # webhook that may fail closed (it would be evidence nsstuck cannot complete)
                            "failurePolicy": "Ignore",
                            "sideEffects": "None",
                            "admissionReviewVersions": ["v1"],
                            "matchConditions": [{"name": "frozen", "expression": "request.name == 'team-refused'"}],
                        }
                    ],
                },
            )
            refused = kubectl(cluster.kubeconfig, "delete", "ns", "team-refused", "--wait=false")
            assert refused.returncode != 0
            assert "frozen by change control" in refused.stderr
            assert "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it" in refused.stderr
            assert len(hooks.reviews("/no")) == 1
            http(emu).delete(f"{VWC}/change-control")
        slack.wait_for(
            lambda: "team-refused was let through but is not being deleted" in running.log.read_text() or None,
            timeout=20,
            message="\n".join(line for line in running.log.read_text().splitlines() if "admission" in line)[-4000:],
        )
        assert not deleting(emu, "team-refused")
        assert [e["event"] for e in cluster.audit("team-refused")] == ["admission_allowed"]  # nsstuck let it through
        assert cluster.incidents("team-refused") == []
        assert told(slack, "team-refused") == []

        # -- the deleting user, a kubeconfig user of its own, is named
        alice = kubectl(cluster.alice, "delete", "ns", "team-alice", "--wait=false")
        assert alice.returncode == 0, alice.stderr
        line = slack.render(slack.wait_for(lambda: told(slack, "team-alice") or None, timeout=30)[0])
        assert f"deleted by `{ALICE}`" in line, line
        assert [(e["actor"], e["details"]["user"]) for e in cluster.audit("team-alice")] == [(ALICE, ALICE)]

        # -- Slack fails when the post is due, then comes back: posted once
        down = slack.inject("chat.postMessage", http_status=500, times=None)
        result = kubectl(cluster.kubeconfig, "delete", "ns", "team-outage", "--wait=false")
        assert result.returncode == 0, result.stderr
        slack.wait_for(lambda: [r for r in cluster.runs("team-outage") if r["last_post_error"]] or None, timeout=30)
        assert [i["status"] for i in cluster.incidents("team-outage")] == ["open"]  # open before any post
        assert told(slack, "team-outage") == []
        down.times = down.hits  # Slack is back
        slack.wait_for(lambda: told(slack, "team-outage") or None, timeout=30)
        slack.wait_for(lambda: all(r["posted_at"] for r in cluster.runs("team-outage")) or None, timeout=20)

        # -- Slack fails again; the bot dies with the incident recorded and its post not made
        down = slack.inject("chat.postMessage", http_status=500, times=None)
        result = kubectl(cluster.kubeconfig, "delete", "ns", "team-restart", "--wait=false")
        assert result.returncode == 0, result.stderr
        slack.wait_for(lambda: [r for r in cluster.runs("team-restart") if r["last_post_error"]] or None, timeout=30)
        running.kill()
    down.times = down.hits  # Slack is back while no bot runs
    assert [i["status"] for i in cluster.incidents("team-restart")] == ["open"]
    assert told(slack, "team-restart") == []

    with cluster.bot(slack, "second"):
        slack.wait_for(lambda: told(slack, "team-restart") or None, timeout=30)
        slack.wait_for(lambda: all(r["posted_at"] for r in cluster.runs("team-restart")) or None, timeout=20)
        runs = cluster.rows("SELECT namespace, posted_at FROM diagnoses ORDER BY id")
        assert all(r["posted_at"] for r in runs), runs

    # each delete told once, with its incident; the refused one never
    for name in ("team-retry", "team-alice", "team-outage", "team-restart"):
        assert len(told(slack, name)) == 1, name
        assert len(cluster.incidents(name)) == 1, name
        assert len(cluster.runs(name)) == 1, name
    assert len(posted) == 1
