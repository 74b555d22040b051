"""`nsstuck digest run` through the real entry point: a dry run prints and writes nothing; a real run
posts to Slack (the emulator) and is remembered by the next digest."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import run_nsstuck
from tests._migrated import migrated
from tests._rows import rows
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import OPS_CHANNEL

CONFIG = (
    "clusters:\n  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n"
    f"digests:\n  - channel: {OPS_CHANNEL}\n    schedule: '0 9 * * *'\n    stuck_after: 30m\n"
)


def setup_digest(tmp_path: Path, kube: Emulator, config: str = CONFIG) -> dict[str, str]:
    """A stuck namespace `ddd`, `config` (its clusters' kubeconfig `prod.kubeconfig`), a migrated database
    and a clock file: the environment of `nsstuck digest run`."""
    _namespace(kube, "ddd", delete=True)
    kube.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
    (tmp_path / "nsstuck.yaml").write_text(config)
    (tmp_path / "now").write_text("2026-11-23T10:00:00Z")
    database = f"sqlite:///{tmp_path / 'n.db'}"
    migrated(database)
    return {
        "NSSTUCK_CONFIG": str(tmp_path / "nsstuck.yaml"),
        "NSSTUCK_DATABASE_URL": database,
        "NSSTUCK_CLOCK_FILE": str(tmp_path / "now"),
    }


def _count(database: str, table: str) -> int:
    [row] = rows(database, f"SELECT count(*) AS n FROM {table}")
    return int(row["n"])


def test_a_dry_run_prints_the_digest_and_writes_nothing(kube_emulator: Emulator, tmp_path: Path) -> None:
    env = setup_digest(tmp_path, kube_emulator)
    result = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Stuck namespaces (Mon 2026-11-23 10:00 UTC): 1 stuck longer than 30m")
    assert "ddd: stuck 3d 2h, orphaned_finalizer" in result.stdout
    # -o json: the same digest as data (schema nsstuck.digest/v1)
    as_json = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, "--dry-run", "-o", "json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["schema"] == "nsstuck.digest/v1"
    assert data["channel"] == OPS_CHANNEL
    assert _count(env["NSSTUCK_DATABASE_URL"], "digest_runs") == 0
    assert _count(env["NSSTUCK_DATABASE_URL"], "incidents") == 0


def test_a_run_posts_to_slack_and_the_next_one_remembers_it(
    slack_emulator: SlackEmulator, kube_emulator: Emulator, tmp_path: Path
) -> None:
    env = setup_digest(tmp_path, kube_emulator)
    env.update({"SLACK_BOT_TOKEN": slack_emulator.bot_token, "NSSTUCK_SLACK_API_URL": slack_emulator.api_url})
    result = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, env=env)
    assert result.returncode == 0, result.stderr
    assert "digest posted to C0123ABCD: 1 stuck" in result.stdout
    [message] = slack_emulator.channel_messages(OPS_CHANNEL)
    assert "Newly stuck since the last digest" in slack_emulator.render(message)
    # its links to the incidents' threads are not unfurled (the request as the emulator received it)
    [post] = slack_emulator.calls("chat.postMessage")
    assert (post.params.get("unfurl_links"), post.params.get("unfurl_media")) == (False, False)
    (tmp_path / "now").write_text("2026-11-23T11:00:00Z")
    run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, env=env)
    latest = slack_emulator.channel_messages(OPS_CHANNEL)[-1]
    assert "Still stuck" in slack_emulator.render(latest)
    assert _count(env["NSSTUCK_DATABASE_URL"], "digest_runs") == 2


def test_bad_input_is_one_line(tmp_path: Path, kube_emulator: Emulator) -> None:
    env = setup_digest(tmp_path, kube_emulator)
    result = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, env=env)  # no Slack token
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN" in result.stderr
    assert result.stderr.count("\n") == 1


def test_nothing_to_digest_is_said_plainly(tmp_path: Path) -> None:
    (tmp_path / "nsstuck.yaml").write_text("clusters: []\n")
    database = f"sqlite:///{tmp_path / 'n.db'}"
    migrated(database)
    env = {"NSSTUCK_CONFIG": str(tmp_path / "nsstuck.yaml"), "NSSTUCK_DATABASE_URL": database}
    result = run_nsstuck("digest", "run", "--dry-run", env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip() == (
        "nsstuck: no digest is configured (digests: in the config file); name one with --channel ID"
    )
    result = run_nsstuck("digest", "run", "--channel", OPS_CHANNEL, "--dry-run", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == "nsstuck: no cluster is registered (clusters: in the config file)"
