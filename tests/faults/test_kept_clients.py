"""Clients kept between diagnoses (ConnectionCache): lent again while they are sound, given up when
their configuration changes, when the server refuses their credentials, when old or idle; closed."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import yaml

from bot.domain.findings import Cause
from bot.errors import ClusterUnreachableError, UserError
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget, Connection, ConnectionCache
from bot.kube.transport import Transport
from bot.services.diagnosing import DiagnosisResult, diagnose_namespace
from tests.fakes.kubeapi.emulator import USER_IDENTITY
from tests.faults._support import NAMESPACE, Cluster


def run(cluster: Cluster, cache: ConnectionCache | None, target: ClusterTarget | None = None) -> DiagnosisResult:
    return diagnose_namespace(target or cluster.target, NAMESPACE, clock=cluster.emu.clock.now, connections=cache)


def blocked_on_kiali(result: DiagnosisResult) -> bool:
    """A whole diagnosis that found the cause: the orphaned Kiali object."""
    diagnosis = result.diagnosis
    return bool(
        diagnosis.complete
        and diagnosis.cause is Cause.ORPHANED_FINALIZER
        and [(o.kind, o.name) for o in diagnosis.findings[0].objects] == [("Kiali", "kiali")]
    )


def kept(cache: ConnectionCache, target: ClusterTarget) -> Connection:
    with cache.lease(target) as connection:
        return connection


def sockets_open(connection: Connection) -> int:
    """Connections the client holds to the server (idle in its pools, with a socket)."""
    pools = connection.api_client.rest_client.pool_manager.pools
    held = [conn for key in list(pools.keys()) for conn in list(pools[key].pool.queue)]
    # and those its Reader keeps (bot.kube.requesting: the GETs)
    held += list(connection.reader._idle) if connection.reader is not None else []
    return sum(1 for conn in held if conn is not None and conn.sock is not None)


def test_a_kept_client_is_lent_again_without_new_connections(cluster: Cluster) -> None:
    options = CollectOptions(workers=8)  # at most 8 requests at once
    opened = cluster.emu.tls_handshakes
    for _ in range(6):  # the baseline: a fresh client each time opens its connections again
        assert blocked_on_kiali(diagnose_namespace(cluster.target, NAMESPACE, options=options))
    fresh, opened = cluster.emu.tls_handshakes - opened, cluster.emu.tls_handshakes
    cache = ConnectionCache(pool_size=8)
    for _ in range(6):
        assert blocked_on_kiali(diagnose_namespace(cluster.target, NAMESPACE, options=options, connections=cache))
    kept_ = cluster.emu.tls_handshakes - opened
    cache.close()

    assert fresh >= 6 * 2, fresh  # each fresh client opened several
    assert 1 <= kept_ <= 8, kept_  # the kept one, never more than it keeps, over all six


def test_a_changed_kubeconfig_is_read_again(cluster: Cluster) -> None:
    cache = ConnectionCache()
    assert blocked_on_kiali(run(cluster, cache))
    before = kept(cache, cluster.target)
    # the credentials are rotated: a new token in the kubeconfig (the old one still works, so that
    # only the change of the file can tell the kept client to go)
    cluster.emu.write_kubeconfig(cluster.kubeconfig, token=cluster.emu.add_token(USER_IDENTITY))

    assert blocked_on_kiali(run(cluster, cache))
    after = kept(cache, cluster.target)
    assert after is not before
    assert sockets_open(before) == 0  # the one given up was closed, not left to the garbage collector
    cache.close()


def token_file_target(cluster: Cluster, tmp_path: Path) -> tuple[ClusterTarget, Path]:
    """A kubeconfig that names a token file (a projected service account token, rotated in place),
    written as `echo $TOKEN > token` writes it."""
    token_file = tmp_path / "token"
    token_file.write_text(cluster.emu.user_token + "\n")
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"][0]["user"] = {"tokenFile": "token"}  # relative to the kubeconfig's directory
    kubeconfig = tmp_path / "with-token-file.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    return ClusterTarget(name="emulated", kubeconfig=kubeconfig), token_file


def test_a_token_file_ending_in_a_newline_serves_every_worker(cluster: Cluster, tmp_path: Path) -> None:
    # the client sets the token as read (with its newline) before each request, in every worker thread
    # at once; no request may catch it before it is stripped (it cannot be sent: a gap, ValueError)
    target, _ = token_file_target(cluster, tmp_path)
    for _ in range(5):
        result = run(cluster, None, target)
        assert blocked_on_kiali(result), [str(g) for g in result.diagnosis.gaps]


def test_a_rotated_token_file_is_read_again(cluster: Cluster, tmp_path: Path) -> None:
    target, token_file = token_file_target(cluster, tmp_path)
    cache = ConnectionCache()
    assert blocked_on_kiali(run(cluster, cache, target))
    before = kept(cache, target)

    token_file.write_text(cluster.emu.add_token(USER_IDENTITY) + "\n")

    assert blocked_on_kiali(run(cluster, cache, target))  # the kubeconfig did not change; its token file did
    assert kept(cache, target) is not before
    assert sockets_open(before) == 0
    cache.close()


EXEC_PLUGIN = textwrap.dedent(
    """\
    import json, pathlib, sys
    token = pathlib.Path(sys.argv[1]).read_text().strip()
    with open(sys.argv[2], "a") as runs:
        runs.write("run\\n")
    status = {"token": token}  # no expirationTimestamp: the client keeps the token until told otherwise
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                      "status": status}))
    """
)


def exec_target(cluster: Cluster, tmp_path: Path) -> tuple[ClusterTarget, Path, Path]:
    source, runs, plugin = tmp_path / "issued-token", tmp_path / "runs", tmp_path / "plugin.py"
    source.write_text(cluster.emu.user_token)
    plugin.write_text(EXEC_PLUGIN)
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin), str(source), str(runs)],
            "interactiveMode": "Never",
        }
    }
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    return ClusterTarget(name="emulated", kubeconfig=kubeconfig), source, runs


def test_credentials_the_server_refuses_are_loaded_again_at_once(cluster: Cluster, tmp_path: Path) -> None:
    target, source, runs = exec_target(cluster, tmp_path)
    cache = ConnectionCache()
    assert blocked_on_kiali(run(cluster, cache, target))
    assert blocked_on_kiali(run(cluster, cache, target))
    assert runs.read_text().count("run") == 1  # the plugin ran once: the second diagnosis kept its token

    # the identity provider revokes the token before the client thinks it has expired
    new_token = cluster.emu.add_token(USER_IDENTITY)
    cluster.emu.knobs.expired_tokens.add(cluster.emu.user_token)
    source.write_text(new_token)

    # the kept client is refused (401); the diagnosis runs again with the plugin run again, unseen
    assert blocked_on_kiali(run(cluster, cache, target))
    assert runs.read_text().count("run") == 2
    cache.close()


def test_a_fresh_client_that_is_refused_is_not_tried_twice(cluster: Cluster, tmp_path: Path) -> None:
    target, _, runs = exec_target(cluster, tmp_path)
    cluster.emu.knobs.expired_tokens.add(cluster.emu.user_token)
    cache = ConnectionCache()
    with pytest.raises(ClusterUnreachableError, match="refuses our credentials"):
        run(cluster, cache, target)
    assert runs.read_text().count("run") == 1
    with pytest.raises(ClusterUnreachableError, match="refuses our credentials"):
        run(cluster, cache, target)  # and the refused client was not lent again: the plugin ran again
    assert runs.read_text().count("run") == 2
    cache.close()


def test_a_refreshed_token_is_scrubbed_too(cluster: Cluster, tmp_path: Path) -> None:
    target, _, _ = exec_target(cluster, tmp_path)
    cache = ConnectionCache()
    with cache.lease(target) as connection:
        refreshed = "refreshed-" + "x" * 24
        connection.api_client.configuration.api_key["authorization"] = f"Bearer {refreshed}"
        assert refreshed not in connection.scrub(f"the server said: token {refreshed} is revoked")
        assert cluster.emu.user_token not in connection.scrub(f"old {cluster.emu.user_token}")
    cache.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_old_and_idle_clients_are_given_up_and_closed(cluster: Cluster) -> None:
    clock = Clock()
    cache = ConnectionCache(max_age=300, idle=90, clock=clock)
    assert blocked_on_kiali(run(cluster, cache))
    first = kept(cache, cluster.target)
    assert sockets_open(first) > 0
    clock.now += 60
    assert kept(cache, cluster.target) is first  # used a minute later: kept
    clock.now += 60
    assert kept(cache, cluster.target) is first  # idle a minute again, 2 minutes old: kept
    clock.now += 91
    second = kept(cache, cluster.target)  # idle longer than 90 s: given up, closed
    assert second is not first
    assert sockets_open(first) == 0
    for _ in range(4):  # never idle long, but older than max_age at last
        clock.now += 80
        third = kept(cache, cluster.target)
    assert third is not second
    cache.close()


def test_a_client_in_use_is_closed_only_when_given_back(cluster: Cluster) -> None:
    cache = ConnectionCache()
    with cache.lease(cluster.target) as held:
        result = run(cluster, cache)  # shares the kept client meanwhile
        assert blocked_on_kiali(result)
        assert sockets_open(held) > 0
        cache.close()
        assert sockets_open(held) > 0  # still in use: not closed under its user
        assert Transport(held).get("/version")  # still usable
    assert sockets_open(held) == 0
    # a closed cache still lends (a fresh client, closed when given back): nothing fails at shutdown
    with cache.lease(cluster.target) as late:
        assert late is not held
    assert sockets_open(late) == 0


def test_a_burst_of_leases_connects_once(cluster: Cluster, tmp_path: Path) -> None:
    target, _, runs = exec_target(cluster, tmp_path)
    cache = ConnectionCache()
    seen: list[int] = []
    start = threading.Barrier(8)

    def lease() -> None:
        start.wait()
        with cache.lease(target) as connection:
            seen.append(id(connection))

    threads = [threading.Thread(target=lease) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1
    assert runs.read_text().count("run") == 1  # one connect, not eight
    cache.close()


def test_a_kubeconfig_that_cannot_work_is_not_kept(cluster: Cluster, tmp_path: Path) -> None:
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    target = ClusterTarget(name="emulated", kubeconfig=broken)
    cache = ConnectionCache()
    for _ in range(2):
        with pytest.raises(UserError), cache.lease(target):
            pass
    # mended, it works at once: nothing of the failure was kept
    broken.write_text(cluster.kubeconfig.read_text())
    os.utime(broken)
    with cache.lease(target) as connection:
        assert json.dumps(connection.api_client.configuration.host).startswith('"https://127.0.0.1:')
    cache.close()
