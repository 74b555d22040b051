"""The secrets sweep (issue 10): recognisable fake credentials for every secret nsstuck holds, the
scenarios of the emulator's library through the command line and the running bot, the failure paths,
and then everything an operator or a user can see is searched for them.

Secrets: the Slack bot token, app token and signing secret; the database passwords (the runtime role's
and the migration role's, NSSTUCK_MIGRATION_DATABASE_URL); in kubeconfigs a
bearer token, a token file, an exec plugin's environment and the token it prints, a client certificate
and its key, basic-auth username and password, credentials in the server URL and in `proxy-url`, and
the token of a cluster that refuses it; and values in a cluster, which nsstuck must never read or keep
(tests/reliability/_values.py): a Secret's data and stringData, a ConfigMap's data and binaryData (in
a namespace the digests diagnose, and in the ConfigMap whose finalizer is removed through Slack, so in
its backup), pods' environment values and the last-applied annotations that repeat them. Each is a
canary: unique, with 24 random hex digits, searched as itself, as fragments (each half of its random
part) and encoded (base64, and for the client key and certificate, windows of their base64, PEM and
DER forms).

Surfaces: the bot's log (at DEBUG; as text over HTTP, as JSON lines in Socket Mode), every command's
stdout and stderr (in-process and as processes, also at DEBUG), every request the Slack emulator
received and every message, ephemeral, response_url post, view and file it holds, the bot's HTTP
answers (to Slack and on /healthz, /readyz, /metrics), the whole database as text (every table, every
column, snapshots decompressed; the SQLite file's bytes too), the backups, and the objects of the
cluster nsstuck changed.

The sweep over HTTP (every scenario, the command line, the failure paths) runs once in
`test_secrets_sweep_http.py`, searched there by one test per group of surfaces; this module holds the
canaries, the world, the helpers, and the sweep in Socket Mode on SQLite and PostgreSQL.

The sweep cannot pass vacuously: it also checks that every credential was in use (a report came from
each cluster whose kubeconfig holds only that credential, the exec plugin saw its environment, the
Slack emulator saw the bot and app tokens, the signing secret let signed requests in and kept forged
ones out, PostgreSQL refused a wrong password and accepted the canary).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import re
import secrets
import subprocess
import threading
import time
import traceback
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
import yaml
from sqlalchemy import create_engine, inspect, make_url, text

from bot.cli import main
from tests._cli import run_nsstuck
from tests._python import PYTHON, assert_no_resource_warning
from tests.approvals._flow import Flow
from tests.conftest import REPO
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import (
    CLEANUP_FAILING_OPERATOR,
    apply_scenario_once,
    cleanup_failing_log,
    operator_pod,
    snapshot,
)
from tests.fakes.kubeapi.tls import serving_cert
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.driver import Delivery
from tests.fakes.slackapi.pytest_plugin import ALICE, APPROVERS, BOB, OPS_CHANNEL, populate_workspace
from tests.pgdatabase import temporary_database
from tests.reliability._values import BACKEND_NAMESPACE, OTHER_NAMESPACE, ValueCanaries, build_vault
from tests.reliability._values import NAMESPACE as VALUES_NAMESPACE
from tests.slack._bot import Running, serve_process

JSON = dict[str, Any]
RUN = secrets.token_hex(2)
SCENARIO_TIME = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
DIGEST_CHANNEL = "C0SWEEPDG"
SWEEP_CHANNELS = tuple(f"C0SWEEP{i:02d}" for i in range(8))
IDENTITY = "nsstuck-sweep"  # who every canary credential authenticates as (names are not secrets)
AUTH_KINDS = ("token", "tokenFile", "exec", "certificate", "basic")
LOGGED = "cleanup-failing-live-operator"  # its operator's log gets a canary credential (issue 37)
REMEDIATED = "seed002-configmap-finalizer"  # also requested, approved and applied through Slack
FAST = {
    "NSSTUCK_REPOST_SECONDS": "1",
    "NSSTUCK_FOLLOW_UP_SECONDS": "3600",
    "NSSTUCK_SLACK_POST_INTERVAL": "0.02",
    "NSSTUCK_DIGEST_TICK_SECONDS": "0.5",
    "NSSTUCK_REMEDIATION_FOLLOW_SECONDS": "2",
}


# ---------------------------------------------------------------------------------------------
# Canaries


def _b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def _windows(text: str, size: int = 24, step: int = 12) -> list[str]:
    """Overlapping pieces of a long secret: any of them found means a recognisable fragment leaked."""
    return [text[i : i + size] for i in range(0, max(1, len(text) - size + 1), step)]


@dataclass(frozen=True)
class Canary:
    name: str
    value: str
    needles: tuple[str, ...]


def _canary(name: str, value: str, *extra: str) -> Canary:
    """The value, each half of its random part (what a partial redaction leaves), base64 and URL forms."""
    tail = re.findall(r"[0-9a-f]{24}", value)
    fragments = [piece for t in tail for piece in (t[:12], t[12:])]
    needles = [value, *fragments, _b64(value), quote(value, safe=""), *extra]
    return Canary(name, value, tuple(dict.fromkeys(n for n in needles if len(n) >= 8)))


def _secret(kind: str) -> str:
    return f"canary-{kind}-{RUN}-{secrets.token_hex(12)}"


def _pem_forms(pem: str) -> list[str]:
    """A PEM document as it may travel: base64 of the whole (a kubeconfig's `-data` value), its body (base64
    of the DER, as one string and line by line), and the DER in hex."""
    lines = [line for line in pem.strip().splitlines() if not line.startswith("-----")]
    body = "".join(lines)
    return [_b64(pem), body, *lines, base64.b64decode(body).hex()]


def _pem_needles(pem: str, reference: str) -> list[str]:
    """Windows of each form of `pem`, except those that another document of the same kind (`reference`,
    issued by the same CA at the same moment) holds too: headers, ASN.1 framing, issuer, dates."""
    common = "\n".join(_pem_forms(reference))
    return [w for form in _pem_forms(pem) for w in [form, *_windows(form)] if len(w) >= 16 and w not in common]


@dataclass
class Canaries:
    """One canary per secret nsstuck holds, plus those it must refuse or never use."""

    bot_token: str = field(default_factory=lambda: f"xoxb-7777-8888-{_secret('bot')}")
    app_token: str = field(default_factory=lambda: f"xapp-1-A111-9999-{_secret('app')}")
    signing_secret: str = field(default_factory=lambda: _secret("signing"))
    bad_bot_token: str = field(default_factory=lambda: f"xoxb-7777-6666-{_secret('badbot')}")
    db_password: str = field(default_factory=lambda: _secret("dbpw"))
    migration_db_password: str = field(default_factory=lambda: _secret("migrationdbpw"))
    wrong_db_password: str = field(default_factory=lambda: _secret("wrongdbpw"))
    kube_token: str = field(default_factory=lambda: _secret("kubetoken"))
    file_token: str = field(default_factory=lambda: _secret("tokenfile"))
    exec_env: str = field(default_factory=lambda: _secret("execenv"))
    exec_token: str = field(default_factory=lambda: _secret("exectoken"))
    basic_user: str = field(default_factory=lambda: _secret("basicuser"))
    basic_password: str = field(default_factory=lambda: _secret("basicpw"))
    url_password: str = field(default_factory=lambda: _secret("serverurlpw"))
    proxy_password: str = field(default_factory=lambda: _secret("proxypw"))
    expired_token: str = field(default_factory=lambda: _secret("expired"))
    malformed_token: str = field(default_factory=lambda: _secret("malformed"))
    client_cert: str = ""
    client_key: str = ""
    reference: tuple[str, str] = ("", "")  # another certificate and key of the same CA: not secrets
    # values in the cluster: a Secret's data, a ConfigMap's data, pods' environment values (_values.py)
    values: ValueCanaries = field(default_factory=ValueCanaries)

    def all(self) -> list[Canary]:
        skipped = ("client_cert", "client_key", "basic_user", "basic_password", "reference", "values")
        out = [_canary(name, value) for name, value in vars(self).items() if name not in skipped and value]
        out += [_canary(name, value) for name, value in self.values.values().items()]
        basic = _b64(f"{self.basic_user}:{self.basic_password}")  # the Authorization header's value
        out.append(_canary("basic_user", self.basic_user, basic))
        out.append(_canary("basic_password", self.basic_password, basic))
        for name, pem, reference in (
            ("client_key", self.client_key, self.reference[1]),
            ("client_cert", self.client_cert, self.reference[0]),
        ):
            if pem:
                out.append(Canary(name, pem, tuple(dict.fromkeys([pem, *_pem_needles(pem, reference)]))))
        return out


# ---------------------------------------------------------------------------------------------
# What an operator or a user can see


GRAM = 12  # occurring(): needles this long or longer are found through an index of their pieces
_SEPARATOR = "\x00"


def occurring(needles: list[str], texts: Iterable[str]) -> set[str]:
    """The needles found in any of `texts`. The same as `{n for n in needles if any(n in t for t in
    texts)}` (tests/reliability/test_leak_search.py holds it to that), without searching every text for
    each of a few thousand needles, most of them windows of a key or a certificate: that took most of
    the secrets sweep's time.

    The texts are joined by a character no needle holds. A needle shorter than 2 * GRAM is looked for
    whole (str's own search). A longer one holds every GRAM-character piece of it; an occurrence of it
    in the text covers at least GRAM + 1 consecutive starting positions of such a piece, so one of them is
    a multiple of GRAM + 1: only the pieces of the text starting there are looked up, in an index of every
    piece of every long needle, and a needle whose piece is found is then checked where it would be."""
    assert all(_SEPARATOR not in n for n in needles)
    text = _SEPARATOR.join(texts)
    present = {n for n in needles if len(n) < 2 * GRAM and n in text}
    pieces: dict[str, set[str]] = {}
    for needle in needles:
        if len(needle) >= 2 * GRAM:
            for at in range(len(needle) - GRAM + 1):
                pieces.setdefault(needle[at : at + GRAM], set()).add(needle)
    for at in range(0, len(text), GRAM + 1):
        candidates = pieces.get(text[at : at + GRAM])
        if candidates:
            for needle in candidates - present:
                if needle in text[max(0, at - len(needle)) : at + len(needle) + GRAM]:
                    present.add(needle)
    return present


@dataclass
class Surfaces:
    texts: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, content: object) -> None:
        if isinstance(content, bytes):
            value = content.decode("utf-8", "replace") + "\n" + content.decode("latin-1")
        elif isinstance(content, str):
            value = content
        else:
            value = json.dumps(content, default=repr, sort_keys=True)
        name = name if name not in self.texts else f"{name} #{len(self.texts)}"
        self.texts[name] = value

    def leaks(self, canaries: list[Canary]) -> list[str]:
        """Per canary, the first of its needles found in any surface (in the order of both), with where.
        Which needles occur at all is found in one pass over every surface (`occurring`); only those are
        looked for surface by surface, to say where."""
        found = []
        present = occurring([needle for canary in canaries for needle in canary.needles], self.texts.values())
        for canary in canaries:
            needle = next((n for n in canary.needles if n in present), None)
            if needle is None:
                continue
            for name, content in self.texts.items():
                at = content.find(needle)
                if at >= 0:
                    excerpt = content[max(0, at - 80) : at + len(needle) + 40].replace("\n", "\\n")
                    found.append(f"{canary.name} ({needle[:30]}…) in {name}: …{excerpt}…")
                    break
        return found

    def assert_clean(self, canaries: list[Canary]) -> None:
        assert len(self.texts) > 10  # something was collected
        assert sum(map(len, self.texts.values())) > 10_000
        leaks = self.leaks(canaries)
        assert not leaks, "secrets leaked:\n" + "\n".join(leaks)


def _dump_database(url: str) -> str:
    """Every table, every row, every column, as text; compressed columns (snapshots) decompressed."""
    engine = create_engine(url)
    lines: list[str] = []
    try:
        with engine.connect() as connection:
            for table in sorted(inspect(connection).get_table_names()):
                rows = connection.execute(text(f'SELECT * FROM "{table}"')).mappings().all()
                lines.append(f"== {table} ({len(rows)} rows)")
                for row in rows:
                    lines.append(json.dumps({k: _cell(v) for k, v in row.items()}, sort_keys=True, default=str))
    finally:
        engine.dispose()
    return "\n".join(lines)


def _cell(value: Any) -> Any:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes):
        with contextlib.suppress(zlib.error):
            value = zlib.decompress(value)
        return value.decode("utf-8", "replace")
    return value


def _slack_surfaces(slack: SlackEmulator, surfaces: Surfaces, channels: list[str], users: list[str]) -> None:
    for entry in slack.calls():
        surfaces.add(f"slack request {entry.method}", [entry.path, entry.headers, entry.params, entry.raw_body])
        surfaces.add(f"slack answer {entry.method}", entry.response)
    for channel in channels:
        for message in slack.channel_messages(channel):
            surfaces.add(f"message in {channel}", message)
            for reply in slack.thread(channel, str(message["ts"])):
                surfaces.add(f"thread reply in {channel}", reply)
        for user in users:
            for ephemeral in slack.ephemerals(channel, user):
                surfaces.add(f"ephemeral for {user} in {channel}", ephemeral)
    for post in slack.webhook_posts():
        surfaces.add("response_url post", [post.path, post.raw, post.answer])
    for update in slack.updates():
        surfaces.add("message update", repr(update))
    for upload in slack.files():
        surfaces.add(f"file {upload.filename}", [upload.title, upload.filename, upload.alt_txt])
        surfaces.add(f"file {upload.filename} content", upload.content or b"")
    for user in users:
        surfaces.add(f"home view of {user}", slack.home_view(user))
    surfaces.add("slack emulator errors", slack.server_errors)


def _delivery(surfaces: Surfaces, what: str, delivery: Delivery) -> Delivery:
    surfaces.add(f"bot's answer to {what}", [delivery.status, dict(delivery.headers or {}), delivery.body])
    return delivery


def _http_get(surfaces: Surfaces, url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            surfaces.add(f"GET {url}", [response.status, dict(response.headers), response.read()])
            return int(response.status)
    except urllib.error.HTTPError as e:
        surfaces.add(f"GET {url}", [e.code, dict(e.headers), e.read()])
        return int(e.code)


# ---------------------------------------------------------------------------------------------
# Clusters: one emulator per scenario, each reached with one kind of credential


# the exec credential plugin: a shell script, not Python. An interpreter's start (with coverage's, in
# `make test`) on a loaded machine once took longer than the 3 s an in-process `diagnose --timeout 3`
# gives a plugin ("did not answer within 3s"); a shell and two small tools start in milliseconds.
# It checks that it saw the secret in its environment (by its SHA-256, given as its first argument, so
# that the secret is in no command line), notes the call, and prints the token.
EXEC_PLUGIN = """\
if [ "$1" = fail ]; then
    # a plugin that says too much when it fails (it is not ours; what it prints must not pass through)
    echo "identity provider refused SWEEP_EXEC_SECRET=$SWEEP_EXEC_SECRET" >&2
    exit 1
fi
if [ "$(printf '%s' "$SWEEP_EXEC_SECRET" | sha256sum | cut -d ' ' -f 1)" != "$1" ]; then
    echo "SWEEP_EXEC_SECRET is wrong or missing" >&2
    exit 1
fi
echo "token issued" >> "$2"
printf '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", '
printf '"status": {"token": "%s"}}\\n' "$SWEEP_EXEC_TOKEN"
"""


@dataclass
class Cluster:
    name: str
    kubeconfig: Path
    auth: str  # one of AUTH_KINDS; for the failure clusters, their name
    namespace: str = ""
    state: str = ""  # the scenario's expected state; "" for the failure clusters
    emulator: Emulator | None = None
    scenario: str = ""  # the emulator's scenario; "" for the failure clusters


@dataclass
class World:
    canaries: Canaries
    root: Path
    clusters: list[Cluster]
    emulators: list[Emulator]
    exec_marker: Path
    built: dict[Emulator, int] = field(default_factory=dict)  # each emulator's store version once built

    def cluster(self, name: str) -> Cluster:
        return next(c for c in self.clusters if c.name == name)

    def renew(self, name: str) -> None:
        """The scenario cluster `name` built again, as `build_world` built it (a new emulator, the same
        kubeconfig, credential and canaries), for a test after one that changed it."""
        at, old = next((i, c) for i, c in enumerate(self.clusters) if c.name == name)
        assert old.scenario
        assert old.emulator is not None
        new = _scenario_cluster(self, old.scenario, old.auth)
        assert new.emulator is not None
        self.clusters[at] = new
        self.emulators[self.emulators.index(old.emulator)] = new.emulator
        self.built[new.emulator] = new.emulator.cluster.store.rv
        self.built.pop(old.emulator, None)
        old.emulator.stop()

    def renew_changed(self) -> list[str]:
        """Each scenario cluster written to since it was built (its store's version moved), built again,
        for a test that shares the world with one before it; their names. The failure clusters' emulators
        cannot be built again alone: none may have been written to."""
        changed = [
            c.name for c in self.scenarios if c.emulator and c.emulator.cluster.store.rv != self.built[c.emulator]
        ]
        for name in changed:
            self.renew(name)
        written = [e.url for e in self.emulators if e.cluster.store.rv != self.built[e]]
        assert not written, f"written to, and shared: {written}"
        return changed

    @property
    def scenarios(self) -> list[Cluster]:
        return [c for c in self.clusters if c.state]

    @property
    def failures(self) -> list[Cluster]:
        return [c for c in self.clusters if not c.state]

    def config(self, *, digest: bool) -> Path:
        lines = ["clusters:"]
        for cluster in self.clusters:
            lines.append(f"  - name: {cluster.name}")
            lines.append(f"    kubeconfig: {cluster.kubeconfig.relative_to(self.root)}")
            if cluster.name == "prod-eu":  # the remediation flow's cluster (tests/approvals/_flow.py)
                # and the digest's channel: a digest covers only the clusters its channel may use (issue 36)
                lines.append(f"    channels: [{OPS_CHANNEL}, {DIGEST_CHANNEL}]")
                lines.append(f"    approvers: [{APPROVERS}]")
        if digest:
            lines += ["digests:", f"  - channel: {DIGEST_CHANNEL}", "    schedule: '0 9 * * *'", "    stuck_after: 1m"]
        path = self.root / "nsstuck.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path


def _kubeconfig(path: Path, server: str, user: JSON, *, proxy: str | None = None) -> Path:
    cluster: JSON = {"server": server}
    if server.startswith("https://"):
        cluster["certificate-authority-data"] = _b64(serving_cert()[0].read_bytes())
    if proxy:
        cluster["proxy-url"] = proxy  # the kubernetes Python client ignores it; nothing may show it either
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": path.stem,
        "clusters": [{"name": path.stem, "cluster": cluster}],
        "users": [{"name": "sweep", "user": user}],
        "contexts": [{"name": path.stem, "context": {"cluster": path.stem, "user": "sweep"}}],
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _user(kind: str, world_root: Path, canaries: Canaries, marker: Path) -> JSON:
    if kind == "token":
        return {"token": canaries.kube_token}
    if kind == "tokenFile":
        token_file = world_root / "token"
        token_file.write_text(canaries.file_token + "\n")
        return {"tokenFile": str(token_file)}
    if kind == "exec":
        digest = hashlib.sha256(canaries.exec_env.encode()).hexdigest()
        return {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "/bin/sh",
                "args": [str(world_root / "plugin.sh"), digest, str(marker)],
                "env": [
                    {"name": "SWEEP_EXEC_SECRET", "value": canaries.exec_env},
                    {"name": "SWEEP_EXEC_TOKEN", "value": canaries.exec_token},
                ],
                "interactiveMode": "Never",
            }
        }
    if kind == "certificate":
        return {"client-certificate-data": _b64(canaries.client_cert), "client-key-data": _b64(canaries.client_key)}
    assert kind == "basic"
    return {"username": canaries.basic_user, "password": canaries.basic_password}


def _emulator() -> Emulator:
    return Emulator(clock=FakeClock(SCENARIO_TIME), seed=0).start()


def _admit(emu: Emulator, canaries: Canaries) -> None:
    """The emulator accepts every canary credential: the tokens and the client certificate as one
    identity; basic auth as its username, as the API server's basic-auth file had it (so a 403 quotes it)."""
    for token in (canaries.kube_token, canaries.file_token, canaries.exec_token):
        emu.add_token(IDENTITY, token)
    emu.add_basic_auth(canaries.basic_user, canaries.basic_user, canaries.basic_password)


def _stuck_namespace(emu: Emulator, name: str) -> None:
    http = KubeHTTP(emu.url, emu.admin_token)
    http.post("/api/v1/namespaces", {"metadata": {"name": name}})
    http.post(f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "m", "finalizers": ["example.com/k"]}})
    http.delete(f"/api/v1/namespaces/{name}")
    emu.settle()


def _changed_objects(emu: Emulator | None) -> dict[str, Any]:
    """The cluster's objects, for what nsstuck wrote into them; less those that hold the values planted
    by `_values_in` (they are the cluster's own: what matters is that nsstuck never read or kept them)."""
    assert emu is not None
    planted = (VALUES_NAMESPACE, BACKEND_NAMESPACE, OTHER_NAMESPACE)

    def theirs(key: str) -> bool:  # in one of those namespaces, or one of those Namespace objects
        parts = key.split("/")
        return parts[2] in planted or (parts[1] == "namespaces" and parts[2] == "" and parts[-1] in planted)

    return {k: v for k, v in snapshot(emu).items() if not theirs(k)}


def _planted(emu: Emulator | None) -> JSON:
    """The Secret of `vault` as the cluster holds it: its data is there for nsstuck to leak."""
    assert emu is not None
    return KubeHTTP(emu.url, emu.admin_token).get(f"/api/v1/namespaces/{VALUES_NAMESPACE}/secrets/db-password")


def _values_were_there(planted: JSON, canaries: Canaries, surfaces: Surfaces) -> None:
    """Not vacuous: the values were in the cluster, and the namespace holding them was diagnosed, its
    snapshot keeping the objects that held the new canaries (issue 36) by their flag names."""
    assert base64.b64decode(planted["data"]["password"]).decode() == canaries.values.secret_data
    dump = next(text for name, text in surfaces.texts.items() if name.startswith("database dump"))
    assert f'"namespace": "{VALUES_NAMESPACE}"' in dump  # a digest diagnosed it and recorded its snapshot
    assert "--stripe-key=<redacted>" in dump  # the pod's, the template's, payments/billing's, the backend's


def _values_in(emu: Emulator, values: ValueCanaries) -> None:
    """The remediated cluster gets values nsstuck must never read or keep: the ConfigMap whose finalizer
    is removed through Slack holds a canary in its data (so its backup would too, were it read whole);
    the namespace `vault` (a Secret and a ConfigMap with canaries in their data, a pod with canary
    environment values) is diagnosed by the digests; a webhook's backend pods have one as well."""
    KubeHTTP(emu.url, emu.admin_token).patch(
        "/api/v1/namespaces/finalizer-demo/configmaps/mymap",
        {
            "data": {"dsn": f"postgres://app:{values.configmap_data}@db/app"},
            "binaryData": {"blob": _b64(values.configmap_binary)},
        },
    )
    build_vault(emu, values, nodes=False)


def _log_holds_a_credential(emu: Emulator, namespace: str, values: ValueCanaries) -> None:
    """Issue 37: the live operator's log lines about the blocking Kiali carry a canary as a bearer token; the
    diagnosis quotes those lines (redacted), so the canary must be in no report, post or row."""
    ns = KubeHTTP(emu.url, emu.admin_token).get(f"/api/v1/namespaces/{namespace}")
    deleted = datetime.fromisoformat(ns["metadata"]["deletionTimestamp"].replace("Z", "+00:00"))
    operator_ns, _ = CLEANUP_FAILING_OPERATOR
    lines = cleanup_failing_log(namespace, deleted, values.controller_log)
    emu.pod_logs.set(operator_ns, operator_pod(emu, operator_ns), lines)


def _scenario_cluster(world: World, name: str, kind: str) -> Cluster:
    """The scenario `name` in an emulator of its own, reached with the credential `kind` (one of
    AUTH_KINDS); the remediated one is "prod-eu", with values in it, the logged one has a credential in
    its operator's log."""
    canaries, root = world.canaries, world.root
    emu = _emulator()
    try:
        if not canaries.client_cert:  # one client certificate, trusted by every emulator of this process
            canaries.client_cert, canaries.client_key = emu.issue_client_certificate(IDENTITY)
            canaries.reference = emu.issue_client_certificate("reference")
        scenario = apply_scenario_once(emu, name)  # built once per run, then its state restored
        if name == REMEDIATED:
            _values_in(emu, canaries.values)
        if name == LOGGED:
            _log_holds_a_credential(emu, scenario.expected.namespace, canaries.values)
        _admit(emu, canaries)
        cluster_name = "prod-eu" if name == REMEDIATED else name
        proxy = f"http://sweep:{canaries.proxy_password}@127.0.0.1:9/"
        kubeconfig = _kubeconfig(
            root / "kubeconfigs" / f"{cluster_name}.yaml",
            emu.https_url,
            _user(kind, root, canaries, world.exec_marker),
            proxy=proxy,
        )
    except BaseException:
        emu.stop()
        raise
    expected = scenario.expected
    return Cluster(cluster_name, kubeconfig, kind, expected.namespace, expected.state, emu, name)


@contextlib.contextmanager
def build_world(root: Path, scenario_names: list[str], canaries: Canaries) -> Iterator[World]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kubeconfigs").mkdir()
    (root / "plugin.sh").write_text(EXEC_PLUGIN)
    marker = root / "exec-plugin-calls"
    world = World(canaries, root, [], [], marker)
    try:
        for index, name in enumerate(scenario_names):
            cluster = _scenario_cluster(world, name, AUTH_KINDS[index % len(AUTH_KINDS)])
            assert cluster.emulator is not None
            world.emulators.append(cluster.emulator)
            world.clusters.append(cluster)
        # the failure paths: a cluster that refuses a token, one that forbids us (a 403 quoting the user),
        # one that is not there (credentials in its URL), kubeconfigs that cannot be used
        refusing = _emulator()
        world.emulators.append(refusing)
        _stuck_namespace(refusing, "refused-ns")
        _admit(refusing, canaries)
        refusing.add_token(IDENTITY, canaries.expired_token)
        refusing.knobs.expired_tokens.add(canaries.expired_token)
        forbidding = _emulator()
        world.emulators.append(forbidding)
        _stuck_namespace(forbidding, "forbidden-ns")
        _admit(forbidding, canaries)
        forbidding.knobs.forbid("namespaces", verbs=("get", "list"))
        kc = root / "kubeconfigs"
        exec_fails = {
            "exec": {**_user("exec", root, canaries, marker)["exec"], "args": [str(root / "plugin.sh"), "fail"]}
        }
        bad_key = {
            "client-certificate-data": _b64(canaries.client_cert),
            "client-key-data": canaries.malformed_token + "!",
        }
        newline = {"token": f"{canaries.malformed_token}\n{canaries.kube_token}"}  # a line break inside
        for name, server, user, namespace in (
            ("expired", refusing.https_url, {"token": canaries.expired_token}, "refused-ns"),
            ("forbidden", forbidding.https_url, {"token": canaries.kube_token}, "forbidden-ns"),
            ("basic-forbidden", forbidding.https_url, _user("basic", root, canaries, marker), "forbidden-ns"),
            (
                "unreachable",
                f"https://sweep:{canaries.url_password}@127.0.0.1:1",
                {"token": canaries.kube_token},
                "anything",
            ),
            ("exec-fails", refusing.https_url, exec_fails, "refused-ns"),
            ("malformed-key", refusing.https_url, bad_key, "refused-ns"),
            ("token-newline", refusing.https_url, newline, "refused-ns"),
        ):
            world.clusters.append(Cluster(name, _kubeconfig(kc / f"{name}.yaml", server, user), name, namespace))
        broken = _kubeconfig(kc / "malformed-yaml.yaml", refusing.https_url, {"token": canaries.malformed_token})
        unclosed = broken.read_text().replace(
            f"token: {canaries.malformed_token}", f'token: "{canaries.malformed_token}'
        )
        broken.write_text(unclosed)  # a quote that never closes: not YAML
        world.clusters.append(Cluster("malformed-yaml", broken, "malformed-yaml", "refused-ns"))
        world.built = {emu: emu.cluster.store.rv for emu in world.emulators}
        yield world
    finally:
        for emu in world.emulators:
            emu.stop()


# ---------------------------------------------------------------------------------------------
# Running the command line


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def _base_env(world: World, slack: SlackEmulator, database: str, config: Path, clock: Path) -> dict[str, str]:
    """What a command sees: every secret nsstuck holds is set, whether or not the command needs it."""
    return {
        "NSSTUCK_CONFIG": str(config),
        "NSSTUCK_DATABASE_URL": database,
        "NSSTUCK_SLACK_API_URL": slack.api_url,
        "NSSTUCK_CLOCK_FILE": str(clock),
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_APP_TOKEN": slack.app_token,
    }


@dataclass(frozen=True)
class Run:
    """A command to run as a process (or, with `process` False, in this process through the console
    script's entry point: tests/_cli.py), the exit codes it may end with and a piece of what it must say."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(repr=False)
    codes: set[int]
    says: str | None = None
    process: bool = True

    def problems(self, outcome: Outcome) -> list[str]:
        where = "" if self.process else " (in process)"
        label = f"nsstuck {' '.join(self.argv)}{where} (NSSTUCK_DATABASE_URL={self.env.get('NSSTUCK_DATABASE_URL')})"
        said = outcome.out + outcome.err
        found = []
        if outcome.code not in self.codes:
            found.append(f"{label} exited {outcome.code}, not {self.codes}")
        if "Traceback" in outcome.err:
            found.append(f"{label} printed a traceback")
        if self.says is not None and self.says.lower() not in said.lower():
            found.append(f"{label} did not say {self.says!r}")
        if outcome.code != 0 and not (outcome.err.strip().splitlines() or [""])[-1].startswith("nsstuck: "):
            found.append(f"{label} did not end with one line saying why")  # contract §1
        return [f"{problem}:\n{said[-3000:]}" for problem in found]


def _process(surfaces: Surfaces, env: dict[str, str], *argv: str) -> Outcome:
    """`nsstuck --log-level DEBUG ARGV` as a process, as an operator runs it."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    full.update(env)
    result = subprocess.run(
        [*PYTHON, "-m", "bot", "--log-level", "DEBUG", *argv],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=180,  # a hang guard: `clusters check` of every cluster took over 60 s beside the parallel run
        check=False,
    )
    label = "nsstuck " + " ".join(argv)
    assert_no_resource_warning(result.stderr, label)
    surfaces.add(f"{label}: stdout", result.stdout)
    surfaces.add(f"{label}: stderr", result.stderr)
    return Outcome(result.returncode, result.stdout, result.stderr)


def _in_a_fresh_process(surfaces: Surfaces, env: dict[str, str], *argv: str) -> Outcome:
    """`nsstuck --log-level DEBUG ARGV` in this process as in a fresh one (tests/_cli.py: the environment
    `env` alone, the logging set-up a new process gets, stdout and stderr captured, argparse's exits and
    uncaught exceptions as the interpreter ends them): what it prints and logs at DEBUG is searched as a
    process's is, at a few milliseconds of CPU instead of a second."""
    done = run_nsstuck("--log-level", "DEBUG", *argv, env=env)
    label = "nsstuck " + " ".join(argv) + " (in process)"
    surfaces.add(f"{label}: stdout", done.stdout)
    surfaces.add(f"{label}: stderr", done.stderr)
    return Outcome(done.returncode, done.stdout, done.stderr)


def _processes(surfaces: Surfaces, runs: list[Run]) -> list[tuple[Run, Outcome]]:
    """Each run, as a process (three at a time) or in this process (one at a time, after the processes:
    it sets the environment and the root logger of this process while it runs), in the order given."""
    children = [run for run in runs if run.process]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = pool.map(lambda run: _process(surfaces, run.env, *run.argv), children)
        done = dict(zip(map(id, children), outcomes, strict=True))
    for run in runs:
        if not run.process:
            done[id(run)] = _in_a_fresh_process(surfaces, run.env, *run.argv)
    return [(run, done[id(run)]) for run in runs]


@contextlib.contextmanager
def _logs_at_debug(surfaces: Surfaces, label: str) -> Iterator[None]:
    """Everything any logger says at DEBUG while in-process commands run."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        surfaces.add(label, stream.getvalue())


def _in_process(surfaces: Surfaces, *argv: str) -> Outcome:
    """`nsstuck ARGV` through the console script's own entry point, in this process (fast)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv), out=out, err=err)
        except Exception:  # what the process would print before it dies (a traceback quotes values)
            err.write(traceback.format_exc())
            code = 1
    label = "nsstuck " + " ".join(argv) + " (in process)"
    surfaces.add(f"{label}: stdout", out.getvalue())
    surfaces.add(f"{label}: stderr", err.getvalue())
    return Outcome(code, out.getvalue(), err.getvalue())


def _diagnose_everything(surfaces: Surfaces, world: World) -> tuple[dict[str, str], list[str]]:
    """Every cluster, text by --cluster and JSON by --kubeconfig: the state of each JSON report, and what
    went otherwise than it should."""
    states: dict[str, str] = {}
    problems: list[str] = []
    with _logs_at_debug(surfaces, "in-process commands' logs"):
        for cluster in world.clusters:
            text_run = _in_process(surfaces, "diagnose", cluster.namespace, "--cluster", cluster.name, "--timeout", "3")
            path = str(cluster.kubeconfig)
            json_run = _in_process(
                surfaces, "diagnose", cluster.namespace, "--kubeconfig", path, "--json", "--timeout", "3"
            )
            codes = {0} if cluster.state else {FAILURES[cluster.name][0]}
            for run in (text_run, json_run):
                if run.code not in codes or "Traceback" in run.err:
                    problems.append(f"diagnose {cluster.name} (in process) exited {run.code}: {run.err[-2000:]}")
            if cluster.state and json_run.code == 0:
                states[cluster.name] = json.loads(json_run.out)["state"]
    return states, problems


def _malformed_configs(root: Path, canaries: Canaries) -> list[Path]:
    """A config that is not YAML, and one where the bot token was pasted in the wrong place."""
    broken = root / "broken.yaml"
    broken.write_text("clusters:\n  - name: prod\n    kubeconfig: [unclosed\n")
    pasted = root / "pasted.yaml"
    pasted.write_text(f"clusters:\n  - name: prod\n    approvers: [{canaries.bot_token}]\n")
    return [broken, pasted]


def _bad_database_urls(canaries: Canaries, *, migration: bool = False) -> list[str]:
    """Database URLs with a password that cannot work: no server, a port that is not a number, the
    password as a query parameter, and a password with an '@' that was not %-encoded (with `migration`,
    the migration role's password)."""
    password = canaries.migration_db_password if migration else canaries.db_password
    half = len(password) // 2
    return [
        f"postgresql+psycopg://sweep:{password}@127.0.0.1:1/nsstuck",
        f"postgresql+psycopg://sweep:{password}@127.0.0.1:notaport/nsstuck",
        f"postgresql+psycopg://sweep@127.0.0.1:1/nsstuck?password={password}",
        f"postgresql+psycopg://sweep:{password[:half]}@{password[half:]}@127.0.0.1:1/nsstuck",
    ]


# ---------------------------------------------------------------------------------------------
# Slack


@contextlib.contextmanager
def _slack(canaries: Canaries) -> Iterator[SlackEmulator]:
    slack = SlackEmulator(
        signing_secret=canaries.signing_secret,
        bot_token=canaries.bot_token,
        app_token=canaries.app_token,
        post_message_rate=100,
        post_message_burst=100,
    )
    populate_workspace(slack)
    for index, channel in enumerate((*SWEEP_CHANNELS, DIGEST_CHANNEL)):
        slack.add_channel(channel, f"sweep-{index}", members=[ALICE, BOB, slack.identity.bot_user_id])
    slack.start()
    try:
        yield slack
    finally:
        slack.stop()


def _answered(slack: SlackEmulator, channel: str, namespace: str) -> bool:
    """The verdict is in the channel, or the user was told why there is none."""
    if any(namespace in slack.render(m) for m in slack.channel_messages(channel)):
        return True
    return any(
        "Could not diagnose" in slack.render(e) and namespace in slack.render(e)
        for e in slack.ephemerals(channel, ALICE)
    )


def _quiet(slack: SlackEmulator, seconds: float = 1.5, timeout: float = 30) -> None:
    """Until the bot has stopped calling Slack for a while (reports' threads are posted after verdicts)."""
    deadline = time.monotonic() + timeout
    count, since = len(slack.calls()), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = len(slack.calls())
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return


def _wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _await_answers(
    slack: SlackEmulator, asked: list[tuple[str, Cluster]], timeout: float = 60, *, digest: bool = True
) -> list[str]:
    """Waits for an answer to every command and (with `digest`) for the scheduled digest; what never came
    (the sweep goes on, so that a leak is reported whatever else went wrong)."""
    deadline = time.monotonic() + timeout
    missing = ["a digest"]
    while missing and time.monotonic() < deadline:
        time.sleep(0.2)
        missing = [f"an answer about {c.name} in {ch}" for ch, c in asked if not _answered(slack, ch, c.namespace)]
        if digest and not any("Stuck namespaces" in slack.render(m) for m in slack.channel_messages(DIGEST_CHANNEL)):
            missing.append("a digest")
    if digest:
        _quiet(slack)
    return [f"no {what} within {timeout:g}s" for what in missing]


# ---------------------------------------------------------------------------------------------
# The sweeps


@pytest.fixture(scope="module")
def canaries() -> Canaries:
    return Canaries()


def _drive_the_bot(bot: Running, slack: SlackEmulator, world: World, database: str, surfaces: Surfaces) -> list[str]:
    """Everything a workspace does with the bot over HTTP: health checks, forged requests, the small
    commands, /nsstuck for every cluster, a remediation requested, approved and applied, the Home tab;
    then waits for every answer and the scheduled digest, and returns what did not come."""
    driver = bot.driver
    for path in ("/healthz", "/readyz", "/metrics", "/slack/events", "/nothing-here"):
        _http_get(surfaces, bot.url + path)
    _http_get(surfaces, bot.metrics_url)  # /metrics has a port of its own (issue 36)
    for signing in ("forged", "stale", "future", "unsigned", "tampered"):
        refused = driver.slash_command("/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, signing=signing)
        assert _delivery(surfaces, f"a {signing} request", refused).status == 401, signing
    for words in ("help", "clusters", "history", "history prod-eu", "what is this"):
        answered = driver.slash_command("/nsstuck", words, user=ALICE, channel=OPS_CHANNEL)
        assert _delivery(surfaces, f"/nsstuck {words}", answered).status == 200
    asked: list[tuple[str, Cluster]] = []
    for index, cluster in enumerate(c for c in world.clusters if c.name != "prod-eu"):
        channel = SWEEP_CHANNELS[index % len(SWEEP_CHANNELS)]
        ack = driver.slash_command("/nsstuck", f"{cluster.name} {cluster.namespace}", user=ALICE, channel=channel)
        assert _delivery(surfaces, f"/nsstuck {cluster.name}", ack).status == 200
        asked.append((channel, cluster))
    # every answer first: the remediation's diagnosis below would otherwise wait behind all of them for a
    # worker, longer than a verdict is waited for when the machine is busy (the suite runs in parallel)
    # (a hang guard, not a speed target: twenty diagnoses on three workers beside the parallel run)
    answered = _await_answers(slack, asked, timeout=120, digest=False)

    prod = world.cluster("prod-eu")
    assert prod.emulator is not None
    flow = Flow(bot, slack, prod.emulator, database, namespace=prod.namespace)
    flow.diagnose()
    flow.request("remove_finalizer")
    [request] = flow.requests()
    _delivery(surfaces, "an approval", flow.vote(int(request["id"]), BOB))
    row = flow.wait_status(int(request["id"]), "applied", "failed", "stale")
    assert row["status"] == "applied", row["status_reason"]
    flow.wait_thread(f"Remediation #{request['id']}: Done")
    _delivery(surfaces, "the Home tab", driver.event(slack.payloads.app_home_opened(ALICE)))
    return [*answered, *_await_answers(slack, asked)]


FAILURES = {  # what each failure cluster's diagnosis says, and its exit code (contract §1)
    "expired": (3, "refuses our credentials: Unauthorized"),
    "forbidden": (3, 'refuses our credentials: namespaces "forbidden-ns" is forbidden: User "nsstuck-sweep"'),
    "unreachable": (3, "is unreachable: cannot connect"),
    "exec-fails": (3, "refuses our credentials: Unauthorized"),
    "malformed-key": (2, "the kubeconfig cannot be used"),
    "malformed-yaml": (2, "is not valid YAML"),
    "token-newline": (3, "the request could not be made (ValueError)"),
    "basic-forbidden": (3, 'namespaces "forbidden-ns" is forbidden: User "***" cannot get'),
}


def _command_lines(world: World, env: dict[str, str], tmp_path: Path) -> list[Run]:
    """Each command an operator runs: a diagnosis with each kind of credential and of each failure, the
    history, digests, the config check, the audit trail and backups; bad database URLs, malformed
    configs, and a bot token Slack does not know. Each command runs as a process at least once; a second
    form of a command that only reads the database or a file (another output format, bad input) runs in
    this process (Run.process), as do most of the bad database URLs. Those that run a credential plugin
    or start the bot (a diagnosis, digests, clusters check, serve) all run as processes: what a child of
    theirs writes to the process's stderr would not reach an in-process capture."""
    runs: list[Run] = []
    one_per_kind = {c.auth: c for c in reversed(world.scenarios)}
    for index, cluster in enumerate([*one_per_kind.values(), *world.failures]):
        as_json = ("--json",) if index % 2 else ()
        code, said = FAILURES.get(cluster.name, (0, ""))
        argv = ("diagnose", cluster.namespace, "--cluster", cluster.name, "--timeout", "5", *as_json)
        runs.append(Run(argv, env, {code}, said or None))
    for argv, says, process in (
        (("history",), "prod-eu", True),
        (("history", "--json"), "nsstuck.history/v1", False),
        (("digest", "run", "--dry-run"), "Stuck namespaces", True),
        (("digest", "run", "--channel", DIGEST_CHANNEL), "digest posted", True),
        (("config", "check"), "credentials set", True),
        (("audit", "export"), "nsstuck.audit/v1", True),
        (("audit", "export", "--csv"), "execution_started", False),
        (("audit", "verify"), None, True),
        (("backup", "show", "1"), "ConfigMap", True),
        (("backup", "show", "1", "--raw"), "ConfigMap", False),
        (("db", "current"), "head", True),
    ):
        runs.append(Run(argv, env, {0}, says, process=process))
    # every cluster checked, the failing ones among them: their reasons said, their secrets not
    runs.append(Run(("clusters", "check"), env, {3}, "unreachable"))
    runs.append(Run(("clusters", "check", "-o", "json"), env, {3}, "nsstuck.clusters/v1"))
    # each bad URL with each of three commands: one of them as a process (each command, and each URL, at
    # least once as a process), the others in this process, searched alike (_in_a_fresh_process)
    for index, url in enumerate(_bad_database_urls(world.canaries)):
        bad = {**env, "NSSTUCK_DATABASE_URL": url}
        runs.append(Run(("config", "check"), bad, {0}, "database: ", process=index % 3 == 0))
        runs.append(Run(("history",), bad, {1, 2}, "database", process=index % 3 == 1))
        runs.append(Run(("db", "upgrade"), bad, {1, 2}, "database", process=index % 3 == 2))
    for index, url in enumerate(_bad_database_urls(world.canaries, migration=True)):
        # a runtime role named, so that `db upgrade` goes as far as connecting with the migration URL
        bad = {**env, "NSSTUCK_MIGRATION_DATABASE_URL": url, "NSSTUCK_DATABASE_RUNTIME_ROLE": "nsstuck_runtime"}
        runs.append(Run(("config", "check"), bad, {0}, "migrations: ", process=index % 3 == 0))
        runs.append(Run(("db", "upgrade"), bad, {1, 2}, "database", process=index % 3 == 1))
        runs.append(Run(("db", "current"), bad, {1, 2}, "database", process=index % 3 == 2))
    for path in _malformed_configs(tmp_path, world.canaries):
        bad = {**env, "NSSTUCK_CONFIG": str(path)}
        runs.append(Run(("config", "check"), bad, {2}, "config error", process=False))
    unknown = {**env, "SLACK_BOT_TOKEN": world.canaries.bad_bot_token, "SLACK_APP_TOKEN": "", "NSSTUCK_HTTP_PORT": "1"}
    runs.append(Run(("serve",), unknown, {2}, "invalid_auth"))
    return runs


# ---------------------------------------------------------------------------------------------
# Socket Mode, and a database that needs its password


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def sweep_database_urls(
    request: pytest.FixtureRequest, tmp_path: Path, canaries: Canaries
) -> Iterator[tuple[str, str | None]]:
    """(the runtime URL, the migration URL): SQLite (one URL, no roles), or a PostgreSQL database owned by
    a migration role beside a runtime role (README "Database roles"), each of which must log in with its
    canary password (scripts/pg-test-server trusts every other connection; members of
    nsstuck_password_login it does not)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sweep.db'}", None
        return
    admin = os.environ.get("NSSTUCK_TEST_POSTGRES_URL")
    if not admin:
        if os.environ.get("NSSTUCK_REQUIRE_POSTGRES") == "1":
            pytest.fail("NSSTUCK_REQUIRE_POSTGRES=1 but NSSTUCK_TEST_POSTGRES_URL is not set")
        pytest.skip("no PostgreSQL server (run the suite through `make test`)")
    with temporary_database(admin) as url:
        parsed = make_url(url)
        role, owner = f"sweep_{secrets.token_hex(6)}", f"sweep_owner_{secrets.token_hex(6)}"
        dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "DO $$ BEGIN CREATE ROLE nsstuck_password_login NOLOGIN; "
                "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            )
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{canaries.db_password}' IN ROLE nsstuck_password_login")
            conn.execute(
                f"CREATE ROLE {owner} LOGIN PASSWORD '{canaries.migration_db_password}' IN ROLE nsstuck_password_login"
            )
            conn.execute(f'ALTER DATABASE "{parsed.database}" OWNER TO {owner}')
        try:
            yield (
                parsed.set(username=role, password=canaries.db_password).render_as_string(hide_password=False),
                parsed.set(username=owner, password=canaries.migration_db_password).render_as_string(
                    hide_password=False
                ),
            )
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for name in (role, owner):
                    conn.execute(f"REASSIGN OWNED BY {name} TO CURRENT_USER")
                    conn.execute(f"DROP OWNED BY {name}")
                    conn.execute(f"DROP ROLE {name}")


SOCKET_SCENARIOS = [
    REMEDIATED,
    "pvc-in-use",
    "webhook-blocks-delete",
    "seed000-metrics-missing-endpoints",
    "just-deleted",
]


@pytest.fixture(scope="module")
def built_socket_world(tmp_path_factory: pytest.TempPathFactory, canaries: Canaries) -> Iterator[World]:
    with build_world(tmp_path_factory.mktemp("socket") / "world", SOCKET_SCENARIOS, canaries) as world:
        yield world


@pytest.fixture
def socket_world(built_socket_world: World) -> World:
    """The Socket Mode sweep's clusters, built once for both databases: the sweeps only read them, but for
    prod-eu, whose ConfigMap's finalizer is removed through Slack; what a sweep before wrote to is built
    again (World.renew_changed), so each sweep starts from the clusters as built."""
    built_socket_world.renew_changed()
    return built_socket_world


def _json_log_fields(log: str) -> str:
    """Every field of every line of a JSON log, decoded (a JSON string escapes what it quotes); each
    line must be one JSON object."""
    out = []
    for line in log.splitlines():
        if line.strip():
            record = json.loads(line)
            assert isinstance(record, dict), line
            assert {"time", "level", "logger", "message"} <= record.keys(), line
            out.extend(str(value) for value in record.values())
    assert out, "the log is empty"
    return "\n".join(out)


def test_socket_mode_and_the_database_password_stay_hidden(
    tmp_path: Path,
    slack_env: None,
    canaries: Canaries,
    sweep_database_urls: tuple[str, str | None],
    socket_world: World,
) -> None:
    """The bot in Socket Mode (the app token in use) on each database (on PostgreSQL, with two roles, each
    with a password it must give: migrated as the owner, run as the runtime role): commands, a
    remediation, a digest, the commands that read the database; wrong passwords; Slack revoking the app
    token. The bot and the commands log in JSON (NSSTUCK_LOG_FORMAT=json) at DEBUG: every line of the
    bot's log is one JSON object, searched as it is and with its fields decoded."""
    surfaces = Surfaces()
    sweep_database, migration_url = sweep_database_urls
    postgres = sweep_database.startswith("postgresql")
    world = socket_world
    with _slack(canaries) as slack:
        config = world.config(digest=True)
        clock = tmp_path / "now"
        clock.write_text("2026-11-23T09:00:30Z\n")
        env = _base_env(world, slack, sweep_database, config, clock)
        env["NSSTUCK_LOG_FORMAT"] = "json"  # this sweep reads the logs as operators who ship JSON do
        if migration_url:  # every command has it, as the bot does below (the chart gives it to the Job alone)
            env["NSSTUCK_MIGRATION_DATABASE_URL"] = migration_url
        wrong = make_url(sweep_database).set(password=canaries.wrong_db_password).render_as_string(hide_password=False)
        runs = [Run(("db", "upgrade"), env, {0}, "runtime role sweep_" if postgres else "is at revision")]
        if postgres:  # the server does check the password: the wrong one is refused, in words without it
            runs += [Run(("history",), {**env, "NSSTUCK_DATABASE_URL": wrong}, {1}, "password authentication failed")]
            assert migration_url is not None
            wrong_owner = make_url(migration_url).set(password=canaries.wrong_db_password)
            bad = {**env, "NSSTUCK_MIGRATION_DATABASE_URL": wrong_owner.render_as_string(hide_password=False)}
            runs += [Run(("db", "current"), bad, {1}, "password authentication failed")]
        outcomes = _processes(surfaces, runs)
        (tmp_path / "bot").mkdir()
        bot_env = {**FAST, "NSSTUCK_CLOCK_FILE": str(clock), "NSSTUCK_LOG_FORMAT": "json"}
        if migration_url:
            bot_env["NSSTUCK_MIGRATION_DATABASE_URL"] = migration_url
        debug = ("--log-level", "DEBUG")
        with serve_process(
            slack, config, sweep_database, tmp_path / "bot", socket_mode=True, extra_env=bot_env, options=debug
        ) as bot:
            slack.socket.wait_for_connections(1, timeout=15)
            try:
                problems = _drive_over_socket_mode(bot, slack, world, sweep_database, surfaces)
                outcomes += _processes(
                    surfaces,
                    [
                        Run(("history", "--json"), env, {0}, "nsstuck.history/v1"),
                        Run(("audit", "export", "--csv"), env, {0}, "applied"),
                        Run(("backup", "show", "1"), env, {0}, "ConfigMap"),
                        Run(("config", "check"), env, {0}, "socket mode, credentials set"),
                        Run(("db", "current"), env, {0}, "head"),
                    ],
                )
                # Slack revokes the app token, then asks for a new connection: it cannot be opened
                slack.revoke_token(slack.app_token)
                slack.socket.send_disconnect("refresh_requested", close_after=0.2)
                slack.wait_for_calls("apps.connections.open", 2, timeout=10)
                _wait(lambda: any(e.response.get("error") == "token_revoked" for e in _opened(slack)), 10, "a refusal")
                time.sleep(0.5)
            finally:
                slack.socket.drop_all()
        surfaces.add("bot log", bot.log.read_text())
        surfaces.add("bot log, each JSON line's fields decoded", _json_log_fields(bot.log.read_text()))
        _slack_surfaces(slack, surfaces, [OPS_CHANNEL, *SWEEP_CHANNELS, DIGEST_CHANNEL], [ALICE, BOB])
        surfaces.add(f"database dump ({'PostgreSQL' if postgres else 'SQLite'})", _dump_database(sweep_database))
        for file in tmp_path.glob("sweep.db*"):
            surfaces.add(f"database file {file.name}", file.read_bytes())

        connections = [e for e in _opened(slack) if e.ok and e.token_kind == "app"]
        bot_posts = [e for e in slack.calls("chat.postMessage") if e.ok and e.token_kind == "bot"]
        planted = _planted(world.cluster("prod-eu").emulator)

    surfaces.assert_clean(canaries.all())
    problems += [problem for run, outcome in outcomes for problem in run.problems(outcome)]
    assert not problems, "\n\n".join(problems)
    _values_were_there(planted, canaries, surfaces)
    # in use: the app token opened the connection, the bot token posted, the database took the password
    assert connections
    assert bot_posts
    dump = next(text for name, text in surfaces.texts.items() if name.startswith("database dump"))
    assert re.search(r"^== incidents \([1-9]\d* rows\)$", dump, re.MULTILINE), dump[:2000]
    if postgres:
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(make_url(wrong).set(drivername="postgresql").render_as_string(hide_password=False))
        # the migration role's password was in use too: its role made (owns) the tables the bot used
        assert migration_url is not None
        owner = make_url(migration_url)
        with psycopg.connect(owner.set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
            row = conn.execute(
                "SELECT relowner::regrole::text FROM pg_class WHERE relname = 'audit_entries'"
            ).fetchone()
        assert row == (owner.username,)


def _opened(slack: SlackEmulator) -> list[Any]:
    return [e for e in slack.calls("apps.connections.open") if isinstance(e.response, dict)]


def _drive_over_socket_mode(
    bot: Running, slack: SlackEmulator, world: World, database: str, surfaces: Surfaces
) -> list[str]:
    socket = slack.socket_mode
    asked: list[tuple[str, Cluster]] = []
    for index, cluster in enumerate(c for c in world.clusters if c.name != "prod-eu"):
        channel = SWEEP_CHANNELS[index % len(SWEEP_CHANNELS)]
        ack = socket.slash_command("/nsstuck", f"{cluster.name} {cluster.namespace}", user=ALICE, channel=channel)
        surfaces.add(f"the bot's acknowledgement of /nsstuck {cluster.name}", [ack.payload, ack.frame])
        asked.append((channel, cluster))
    prod = world.cluster("prod-eu")
    assert prod.emulator is not None
    flow = Flow(bot, slack, prod.emulator, database, namespace=prod.namespace)
    socket.slash_command("/nsstuck", f"prod-eu {prod.namespace}", user=ALICE, channel=OPS_CHANNEL)
    slack.wait_for(lambda: flow.query("SELECT id FROM incidents WHERE slack_thread_ts IS NOT NULL") or None, timeout=30)
    slack.wait_for(lambda: flow.buttons(flow.thread_ts()) or None, timeout=20)
    remedy = flow.remedy_id("remove_finalizer")
    [(ts, button)] = [(t, b) for t, b in flow.buttons(flow.thread_ts()) if b["value"].endswith(f":{remedy}")]
    socket.click(OPS_CHANNEL, ts, button["action_id"], user=ALICE, value=button["value"])
    slack.wait_for(lambda: flow.requests() or None, timeout=10)
    [request] = flow.requests()
    message = flow.request_message(int(request["id"]))
    socket.click(OPS_CHANNEL, str(message["ts"]), "nsstuck_approve", user=BOB)
    row = flow.wait_status(int(request["id"]), "applied", "failed", "stale")
    assert row["status"] == "applied", row["status_reason"]
    return _await_answers(slack, asked)


def test_what_the_client_logs_while_loading_a_kubeconfig_is_said_again_scrubbed(
    tmp_path: Path, canaries: Canaries, caplog: pytest.LogCaptureFixture
) -> None:
    """The net in bot/kube/connecting.py: the kubernetes client logs an exec plugin's failure, with the
    plugin's stderr, on the root logger; nsstuck holds such records back in the thread that loads the
    kubeconfig and says them again without the kubeconfig's secrets. Other threads' records pass as they are."""
    from bot.kube.connecting import ClusterTarget, connect

    (tmp_path / "plugin.sh").write_text(EXEC_PLUGIN)
    user = _user("exec", tmp_path, canaries, tmp_path / "marker")
    user["exec"]["args"] = [str(tmp_path / "plugin.sh"), "fail"]
    kubeconfig = _kubeconfig(tmp_path / "exec-fails.yaml", "http://127.0.0.1:1", user)
    stop = threading.Event()

    def chatter() -> None:  # another thread, logging on the root logger meanwhile
        while not stop.is_set():
            logging.getLogger().warning("unrelated %s", "record")
            time.sleep(0.002)

    with caplog.at_level(logging.DEBUG):
        thread = threading.Thread(target=chatter)
        thread.start()
        try:
            connect(ClusterTarget("exec-fails", kubeconfig)).close()
        finally:
            stop.set()
            thread.join()
    messages = [record.getMessage() for record in caplog.records]
    said = [record.getMessage() for record in caplog.records if record.name == "bot.kube.connecting"]
    assert len(said) == 1, messages
    assert "exec: process returned 1. identity provider refused SWEEP_EXEC_SECRET=***" in said[0]
    assert not [m for m in messages if canaries.exec_env in m or canaries.exec_token in m]
    assert "unrelated record" in messages
