"""The namespace-delete webhook inside `nsstuck serve` (issue 38 §1, §3, §4): the real bot with
NSSTUCK_ADMISSION_PORT set (a trustme certificate), the emulator's webhook configurations pointing at
`/admission/namespaces/CLUSTER`, and the real kubectl deleting.

One bot per database backend serves two registered clusters on the same emulator: `prod-eu` (warn, the
default, told in its first channel) and `prod-guard` (`admission: {mode: deny, channel: ...}`), each webhook
configuration matching its own namespaces. What is shown, in order, on one bot:
- a delete that will get stuck prints the warning and goes ahead; after the answer, the cluster's channel
  gets one line (who deleted it, the cause) with the report in its thread (the remedies, a Request button),
  an incident is open, and an `admission_allowed` audit entry names the user;
- deleting it again posts nothing more;
- `--dry-run=server` prints the warning and posts, opens and audits nothing;
- deny mode refuses with the reason and writes an `admission_denied` entry; the annotated namespace is
  let through and told in `admission.channel`;
- a cluster nsstuck does not know is allowed with no warnings.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests._migrated import migrated
from tests._rows import audit_of, rows
from tests.admission._endpoint import KUBECTL, Endpoint, configure, kubectl, post, review, write_pair
from tests.admission.test_standalone import deleting, with_orphaned_kiali
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.scenarios import Api, apply_scenario
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import APPROVERS, OPS_CHANNEL, SECOND_CHANNEL
from tests.slack._bot import Running, _free_port, serve_process

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="/usr/bin/kubectl is not installed"),
]

GUARDED = ("guard-kiali", "guard-anyway")


class Bot:
    def __init__(
        self, running: Running, emu: Emulator, *, url: str, port: int, ca: trustme.CA, kubeconfig: Path
    ) -> None:
        self.running = running
        self.emu = emu
        self.url = url
        self.port = port
        self.ca = ca
        self.kubeconfig = kubeconfig

    @property
    def slack(self) -> SlackEmulator:
        return self.running.slack

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        return rows(self.url, sql, **params)

    def audit(self, namespace: str) -> list[dict[str, Any]]:
        return audit_of(self.url, namespace)

    def log(self) -> str:
        return self.running.log.read_text(errors="replace")

    def told(self, channel: str, namespace: str) -> list[dict[str, Any]]:
        return [m for m in self.slack.channel_messages(channel) if f"*{namespace}*" in self.slack.render(m)]


@pytest.fixture
def bot(slack_emulator: SlackEmulator, database_url: str, tmp_path: Path) -> Iterator[Bot]:
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        Api(emu).crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
        emu.settle()
        emu.write_kubeconfig(tmp_path / "prod.kubeconfig", context="prod")
        kubeconfig = emu.write_kubeconfig(tmp_path / "admin" / "kubeconfig")
        ca = trustme.CA()
        cert, key = write_pair(ca, tmp_path)
        config = tmp_path / "nsstuck.yaml"
        config.write_text(
            "clusters:\n"
            f"  - name: prod-eu\n    kubeconfig: prod.kubeconfig\n    channels: [{OPS_CHANNEL}]\n"
            f"    approvers: [{APPROVERS}]\n    admission: {{budget_seconds: 8}}\n"
            "  - name: prod-guard\n    kubeconfig: prod.kubeconfig\n"
            f"    admission: {{mode: deny, budget_seconds: 8, channel: {SECOND_CHANNEL}}}\n"
        )
        migrated(database_url)
        port = _free_port()
        env = {
            "NSSTUCK_ADMISSION_PORT": str(port),
            "NSSTUCK_ADMISSION_CERT": str(cert),
            "NSSTUCK_ADMISSION_KEY": str(key),
            "NSSTUCK_REPOST_SECONDS": "60",
        }
        with serve_process(slack_emulator, config, database_url, tmp_path, extra_env=env) as running:
            base = f"https://127.0.0.1:{port}/admission/namespaces"
            bundle = Endpoint(running.process, port, running.log, ca, cert, key).ca_bundle  # type: ignore[arg-type]
            guarded = ", ".join(f"'{n}'" for n in GUARDED)
            configure(emu, "nsstuck", f"{base}/prod-eu", bundle, condition=f"!(request.name in [{guarded}])")
            configure(emu, "nsstuck-guard", f"{base}/prod-guard", bundle, condition=f"request.name in [{guarded}]")
            yield Bot(running, emu, url=database_url, port=port, ca=ca, kubeconfig=kubeconfig)


def warnings(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


def test_the_channel_hears_a_delete_once_and_deny_mode_refuses(bot: Bot) -> None:
    emu = bot.emu
    with_orphaned_kiali(emu, "team-kiali")

    result = kubectl(bot.kubeconfig, "delete", "ns", "team-kiali", "--wait=false")

    assert result.returncode == 0, result.stderr
    assert warnings(result) == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-kiali`"
    ]
    assert deleting(emu, "team-kiali")
    # posted at once with the prediction (the emulator's clock stands still: the engine itself would still
    # see a fresh delete, content being deleted)
    posted = bot.slack.wait_for(lambda: bot.told(OPS_CHANNEL, "team-kiali") or None, timeout=30)
    assert len(posted) == 1
    line = bot.slack.render(posted[0])
    user = bot.audit("team-kiali")[0]["actor"]
    assert f"deleted by `{user}`" in line, line
    thread = bot.slack.wait_for(lambda: bot.slack.thread(OPS_CHANNEL, posted[0]["ts"]) or None, timeout=20)
    text = "\n".join(bot.slack.render(m) for m in thread)
    assert "orphaned_finalizer" in line, line + "\n----\n" + text
    assert "kiali" in text
    assert "Request" in json.dumps(thread), text  # the ranked remedies with their Request buttons
    assert "predicted by nsstuck's admission webhook when the namespace was deleted" in text, text
    assert "admission webhook predicted at the delete" in bot.slack.render(posted[0])
    incidents = bot.rows("SELECT * FROM incidents WHERE namespace = 'team-kiali'")
    assert [(i["cluster"], i["status"]) for i in incidents] == [("prod-eu", "open")]
    entries = bot.audit("team-kiali")
    assert [(e["event"], e["cluster"]) for e in entries] == [("admission_allowed", "prod-eu")]
    assert entries[0]["details"]["prediction"]["cause"] == "orphaned_finalizer"
    assert entries[0]["details"]["namespace_uid"] == incidents[0]["namespace_uid"]

    # deleting it again (Terminating now: nothing more is predicted); checked again at the end, after the
    # seconds the steps below take, in which a second post would have shown
    again = kubectl(bot.kubeconfig, "delete", "ns", "team-kiali", "--wait=false")
    assert again.returncode == 0, again.stderr

    # a server dry run: the same warning; nothing posted, opened or audited
    with_orphaned_kiali(emu, "team-dry")
    dry = kubectl(bot.kubeconfig, "delete", "ns", "team-dry", "--wait=false", "--dry-run=server")
    assert dry.returncode == 0, dry.stderr
    assert warnings(dry) == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck team-dry`"
    ]
    assert re.search(r'"dry_run": true.*"namespace": "team-dry"', bot.log())
    assert not deleting(emu, "team-dry")
    assert bot.audit("team-dry") == []
    assert bot.rows("SELECT * FROM incidents WHERE namespace = 'team-dry'") == []
    assert bot.told(OPS_CHANNEL, "team-dry") == []

    # deny mode: refused with the reason, audited; the annotated namespace goes through and is told
    with_orphaned_kiali(emu, "guard-kiali")
    refused = kubectl(bot.kubeconfig, "delete", "ns", "guard-kiali", "--wait=false")
    assert refused.returncode != 0
    assert "deleting guard-kiali now would get stuck: orphaned_finalizer: kiali/kiali" in refused.stderr
    assert not deleting(emu, "guard-kiali")
    denied = bot.slack.wait_for(lambda: bot.audit("guard-kiali") or None, timeout=20)
    assert [(e["event"], e["cluster"], e["actor"]) for e in denied] == [("admission_denied", "prod-guard", user)]
    assert denied[0]["details"]["mode"] == "deny"

    with_orphaned_kiali(emu, "guard-anyway", annotations={"nsstuck.io/delete-anyway": "true"})
    anyway = kubectl(bot.kubeconfig, "delete", "ns", "guard-anyway", "--wait=false")
    assert anyway.returncode == 0, anyway.stderr
    assert len(warnings(anyway)) == 1
    told = bot.slack.wait_for(lambda: bot.told(SECOND_CHANNEL, "guard-anyway") or None, timeout=30)
    assert f"deleted by `{user}`" in bot.slack.render(told[0])
    assert [e["event"] for e in bot.audit("guard-anyway")] == ["admission_allowed"]
    assert bot.audit("guard-anyway")[0]["details"]["anyway"] is True

    # team-kiali was told once, one incident, one entry
    assert len(bot.told(OPS_CHANNEL, "team-kiali")) == 1
    assert len(bot.rows("SELECT * FROM incidents WHERE namespace = 'team-kiali'")) == 1
    assert len(bot.audit("team-kiali")) == 1

    # the chain is intact after the entries the webhook wrote
    entries = bot.rows("SELECT seq, prev_hash, hash FROM audit_entries ORDER BY seq")
    assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(entries))

    # a cluster nsstuck does not know: allowed, no warnings, logged
    served = Endpoint(bot.running.process, bot.port, bot.running.log, bot.ca, Path(), Path())  # type: ignore[arg-type]
    status, data, _ = post(served, review("team-x"), "/admission/namespaces/nowhere")
    assert status == 200
    assert json.loads(data)["response"] == {"uid": "uid-team-x-DELETE", "allowed": True}
    assert "cluster 'nowhere', which is not registered" in bot.log()
