"""The scheduler's job list is built from the use cases and a notifier, without the Slack door: in a
fresh interpreter that never imports `bot.slack`, every job is built with its interval and run once,
and what the jobs have to say reaches the notifier it was given (issue 17; the watch, issue 25)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from datetime import UTC, datetime
from pathlib import Path

from bot.kube.registry import ClusterRegistry
from bot.scheduler.jobs import job_list
from bot.services.diagnosing import diagnose_registered
from bot.services.outbox import Outbox
from bot.services.remediating import Remediation, remediation_open
from bot.settings import load_config, load_settings
from bot.store import migrating
from bot.store.database import Database

work = Path(sys.argv[1])
url = f"sqlite:///{work / 'jobs.db'}"
migrating.upgrade(url)
(work / "gone.kubeconfig").write_text(
    "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
    "clusters: [{name: gone, cluster: {server: 'http://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\n"
    "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
)
(work / "nsstuck.yaml").write_text(
    "clusters:\n  - {name: gone, kubeconfig: gone.kubeconfig, watch: {after: 15m, channel: C0123ABCD}}\n"
    "digests:\n  - channel: C0123ABCD\n    schedule: '* * * * *'\n"
)
settings = load_settings({
    "NSSTUCK_DATABASE_URL": url, "NSSTUCK_REPOST_SECONDS": "7", "NSSTUCK_FOLLOW_UP_SECONDS": "11",
    "NSSTUCK_DIGEST_TICK_SECONDS": "13", "NSSTUCK_WATCH_SECONDS": "17",
})
config = load_config(work / "nsstuck.yaml")
db = Database(url)
clusters = ClusterRegistry.from_config(config, work / "nsstuck.yaml")


class Told:
    # the notifier of every protocol the jobs and the use cases use, recording what it is told
    def __init__(self):
        self.said = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.said.append(name)
            return {"retry_kept": 0, "post_digest": "1700000000.000100"}.get(name)
        return record


told = Told()
diagnoser = lambda cluster, namespace: diagnose_registered(clusters, cluster, namespace)
outbox = Outbox(db, told, remediable=lambda cluster, channel: remediation_open(config, cluster, channel))
remediation = Remediation(
    db, config=config, settings=settings, clusters=clusters, notifier=told
)
jobs = job_list(
    settings, config=config, db=db, clusters=clusters, diagnoser=diagnoser, outbox=outbox,
    remediation=remediation, notifier=told, clock=lambda: datetime(2026, 11, 24, 9, 0, 30, tzinfo=UTC),
)
for job in jobs:
    job.func()
print(json.dumps({
    "jobs": [[job.id, str(job.trigger), job.run_at_start] for job in jobs],
    "slack_imported": sorted(m for m in sys.modules if m == "bot.slack" or m.startswith(("bot.slack.", "slack_"))),
    "said": told.said,
}))
"""


def test_the_job_list_is_built_and_run_without_the_slack_door(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", SCRIPT, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["slack_imported"] == []
    assert result["jobs"] == [
        ["repost-unposted-reports", "interval[0:00:07]", False],
        ["follow-up-open-incidents", "interval[0:00:11]", False],
        ["prune-old-snapshots", "interval[1:00:00]", False],
        ["digests", "interval[0:00:13]", True],
        ["watch", "interval[0:00:08.500000]", True],
        ["remediation-chores", "interval[0:00:07]", True],
    ]
    # the outbox asked its publisher for the kept work, the digest that was due went to the notifier, and
    # so did the watch's word that its cluster does not answer
    assert result["said"] == ["retry_kept", "post_digest", "cluster_unreachable"]
