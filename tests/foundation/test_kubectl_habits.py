"""kubectl habits (issue 24 §2), through the console script against the Kubernetes emulator:
`-o text|json|yaml` (`--json` a synonym of `-o json`), `diagnose --exit-code`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests._cli import run_nsstuck
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.clock import FakeClock
from tests.fakes.kubeapi.scenarios import apply_scenario_once

STUCK = ("seed000-metrics-missing-endpoints", "ack-system-e2e-test-0")


def scenario(emu: Emulator, tmp_path: Path, name: str) -> Path:
    apply_scenario_once(emu, name)
    return emu.write_kubeconfig(tmp_path / "kubeconfig")


def test_diagnose_prints_text_json_and_yaml_alike(kube_emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = scenario(kube_emulator, tmp_path, STUCK[0])
    base = ("diagnose", STUCK[1], "--kubeconfig", str(kubeconfig))
    as_json = run_nsstuck(*base, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["schema"] == "nsstuck.diagnosis/v1"
    assert report["state"] == "terminating"
    as_yaml = run_nsstuck(*base, "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout)["findings"] == report["findings"]
    synonym = run_nsstuck(*base, "--json")
    assert json.loads(synonym.stdout)["findings"] == report["findings"]
    text = run_nsstuck(*base, "-o", "text")
    assert text.returncode == 0
    assert not text.stdout.lstrip().startswith("{")
    assert report["findings"][0]["cause"] in text.stdout or "APIService" in text.stdout
    bad = run_nsstuck(*base, "-o", "xml")
    assert bad.returncode == 2
    assert "invalid choice" in bad.stderr


@pytest.mark.parametrize(
    ("name", "namespace", "code"),
    [
        (*STUCK, 4),
        ("content-deleting", "web-frontend", 0),  # content_deleting alone: not stuck
        ("healthy-active", "shop", 0),
    ],
)
def test_diagnose_exit_code(tmp_path: Path, name: str, namespace: str, code: int) -> None:
    # the console script reads the real clock: the emulator's stands at the present, so that pods
    # inside their grace period are seen as such
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        kubeconfig = scenario(emu, tmp_path, name)
        _exit_code(kubeconfig, name, namespace, code)


def _exit_code(kubeconfig: Path, name: str, namespace: str, code: int) -> None:
    done = run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig), "--exit-code", "-o", "json")
    assert done.returncode == code, done.stderr
    # a non-zero exit ends with one line saying why; 0 says nothing on stderr
    assert done.stderr == ("" if code == 0 else f"nsstuck: {namespace} on emulator is stuck: apiservice_unavailable\n")
    report = json.loads(done.stdout)
    if name == "content-deleting":
        assert {f["cause"] for f in report["findings"]} == {"content_deleting"}
    # without --exit-code a report is 0 whatever it says
    assert run_nsstuck("diagnose", namespace, "--kubeconfig", str(kubeconfig)).returncode == 0


def test_diagnose_exit_code_keeps_2_and_3(kube_emulator: Emulator, tmp_path: Path) -> None:
    assert run_nsstuck("diagnose", "Bad_Name", "--exit-code", "--kubeconfig", "x").returncode == 2
    gone = tmp_path / "gone"
    gone.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    done = run_nsstuck("diagnose", "ns", "--exit-code", "--kubeconfig", str(gone), "--timeout", "3")
    assert done.returncode == 3, done.stderr


def test_history_and_db_current_take_o(tmp_path: Path) -> None:
    env = {"NSSTUCK_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    assert run_nsstuck("db", "upgrade", env=env).returncode == 0
    current = run_nsstuck("db", "current", "-o", "json", env=env)
    assert current.returncode == 0
    data = json.loads(current.stdout)
    assert data["at_head"] is True
    assert data["current"] == data["head"]
    history = run_nsstuck("history", "-o", "yaml", env=env)
    assert history.returncode == 0
    assert yaml.safe_load(history.stdout)["schema"] == "nsstuck.history/v1"
    assert json.loads(run_nsstuck("history", "--json", env=env).stdout)["schema"] == "nsstuck.history/v1"
    verify = run_nsstuck("audit", "verify", "-o", "json", env=env)
    assert verify.returncode == 0
    assert json.loads(verify.stdout)["intact"] is True


# ---------------------------------------------------------------------------------------------
# Finding the cluster the way kubectl does


def _kubeconfig_env(tmp_path: Path, **more: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "NSSTUCK_CONFIG": str(tmp_path / "absent.yaml"), **more}


def _cluster_of(done: object) -> str:
    import subprocess

    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["cluster"])


def test_diagnose_finds_the_cluster_as_kubectl_does(kube_emulator: Emulator, tmp_path: Path) -> None:
    apply_scenario_once(kube_emulator, STUCK[0])
    ns = STUCK[1]
    env = _kubeconfig_env(tmp_path)
    # nothing at all: one line that says where it looked
    none = run_nsstuck("diagnose", ns, env=env)
    assert none.returncode == 2
    assert ".kube/config" in none.stderr
    assert "--kubeconfig" in none.stderr
    # ~/.kube/config, its current context
    kube_emulator.write_kubeconfig(Path(env["HOME"]) / ".kube" / "config", context="home-ctx")
    assert _cluster_of(run_nsstuck("diagnose", ns, "-o", "json", env=env)) == "home-ctx"
    # $KUBECONFIG wins over it: a path list, merged (a missing file is skipped, as kubectl does); the
    # first file's current context, and --context alone picks another context of the merged files
    first = kube_emulator.write_kubeconfig(tmp_path / "a.kubeconfig", context="ctx-a")
    second = kube_emulator.write_kubeconfig(tmp_path / "b.kubeconfig", context="ctx-b")
    listed = f"{tmp_path / 'missing'}:{first}:{second}"
    env_list = {**env, "KUBECONFIG": listed}
    assert _cluster_of(run_nsstuck("diagnose", ns, "-o", "json", env=env_list)) == "ctx-a"
    assert _cluster_of(run_nsstuck("diagnose", ns, "--context", "ctx-b", "-o", "json", env=env_list)) == "ctx-b"
    # kubectl agrees on the current context of the merged files
    import subprocess

    seen = subprocess.run(
        ["kubectl", "config", "current-context"],
        env={**env_list, "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert seen.stdout.strip() == "ctx-a"
    unknown = run_nsstuck("diagnose", ns, "--context", "nope", env=env_list)
    assert unknown.returncode == 2
    assert "nope" in unknown.stderr
    # --kubeconfig wins over $KUBECONFIG
    assert _cluster_of(run_nsstuck("diagnose", ns, "--kubeconfig", str(second), "-o", "json", env=env_list)) == "ctx-b"
    # $KUBECONFIG naming no file that exists: said, not a silent fallback to ~/.kube/config
    gone = run_nsstuck("diagnose", ns, env={**env, "KUBECONFIG": str(tmp_path / "missing")})
    assert gone.returncode == 2
    assert "KUBECONFIG" in gone.stderr


def test_a_config_file_with_one_cluster_is_no_longer_the_default(kube_emulator: Emulator, tmp_path: Path) -> None:
    # the migration note of docs/commands.md: without --cluster, the kubeconfig is used even when the config
    # file registers clusters (one or several); --cluster NAME still picks a registered one
    apply_scenario_once(kube_emulator, STUCK[0])
    registered = kube_emulator.write_kubeconfig(tmp_path / "registered.kubeconfig", context="reg")
    config = tmp_path / "nsstuck.yaml"
    config.write_text(f"clusters:\n  - name: prod-eu\n    kubeconfig: {registered}\n")
    env = {**_kubeconfig_env(tmp_path), "NSSTUCK_CONFIG": str(config)}
    kube_emulator.write_kubeconfig(Path(env["HOME"]) / ".kube" / "config", context="mine")
    assert _cluster_of(run_nsstuck("diagnose", STUCK[1], "-o", "json", env=env)) == "mine"
    assert _cluster_of(run_nsstuck("diagnose", STUCK[1], "--cluster", "prod-eu", "-o", "json", env=env)) == "prod-eu"
    both = run_nsstuck("diagnose", STUCK[1], "--cluster", "prod-eu", "--context", "mine", env=env)
    assert both.returncode == 2


# ---------------------------------------------------------------------------------------------
# config check


def test_config_check_reports_every_problem_at_once(tmp_path: Path) -> None:
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        "clusters:\n"
        "  - name: prod-eu\n"
        f"    kubeconfig: {tmp_path / 'missing-a'}\n"
        "    chanels: [C0123ABCD]\n"  # a typo: channels
        "    required_approvals: 0\n"
        "  - name: staging\n"
        "    in_cluster: true\n"
        "    act_as_aprover: true\n"  # a typo: act_as_approver
        "digest:\n"  # a typo: digests
        "  - channel: C0123ABCD\n"
    )
    done = run_nsstuck("config", "check", "--config", str(path), env={"NSSTUCK_HTTP_PORT": "eighty"})
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert all(line.startswith("nsstuck: config error: ") for line in lines), lines
    joined = "\n".join(lines)
    assert "more problem" not in joined
    assert "environment: NSSTUCK_HTTP_PORT" in joined
    assert "eighty" not in joined
    assert "clusters[0].chanels (line 4): unknown key (did you mean channels?)" in joined
    assert "clusters[0].required_approvals (line 5)" in joined
    assert "clusters[1].act_as_aprover (line 8): unknown key (did you mean act_as_approver?)" in joined
    assert "digest (line 9): unknown key (did you mean digests?)" in joined
    assert len(lines) == 5, lines
    as_json = run_nsstuck("config", "check", "--config", str(path), "-o", "json")
    assert as_json.returncode == 2
    assert len(json.loads(as_json.stdout)["problems"]) == 4


def test_config_check_names_every_kubeconfig_that_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        f"clusters:\n  - name: a\n    kubeconfig: {tmp_path / 'ka'}\n  - name: b\n    kubeconfig: {tmp_path / 'kb'}\n"
    )
    done = run_nsstuck("config", "check", "--config", str(path))
    assert done.returncode == 2
    assert [("clusters[0]" in line, "clusters[1]" in line) for line in done.stderr.strip().splitlines()] == [
        (True, False),
        (False, True),
    ]


def test_config_check_says_when_there_is_no_file_and_names_each_slack_variable(tmp_path: Path) -> None:
    from tests.foundation.test_config import REPO

    done = run_nsstuck("config", "check", cwd=tmp_path, env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "config: no config file at config/nsstuck.yaml (the default path): no clusters are registered" in done.stdout
    slack = next(line for line in done.stdout.splitlines() if line.startswith("slack:"))
    assert "SLACK_BOT_TOKEN" in slack
    assert "SLACK_SIGNING_SECRET" in slack
    only_secret = run_nsstuck(
        "config", "check", cwd=tmp_path, env={"PYTHONPATH": str(REPO), "SLACK_BOT_TOKEN": "xoxb-1"}
    )
    slack = next(line for line in only_secret.stdout.splitlines() if line.startswith("slack:"))
    assert "SLACK_BOT_TOKEN" not in slack
    assert "SLACK_SIGNING_SECRET" in slack
    assert "xoxb-1" not in only_secret.stdout
    as_json = run_nsstuck(
        "config", "check", "-o", "json", cwd=tmp_path, env={"PYTHONPATH": str(REPO), "SLACK_APP_TOKEN": "xapp-1"}
    )
    data = json.loads(as_json.stdout)
    assert data["config"] == {"path": "config/nsstuck.yaml", "exists": False, "default": True}
    assert data["slack"] == {"mode": "socket", "missing": ["SLACK_BOT_TOKEN"]}


# ---------------------------------------------------------------------------------------------
# A terminal: the progress line on stderr, colours in the text report (NO_COLOR respected)


def _in_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run the console script with stdout and stderr each on a pseudo-terminal: (exit code, out, err)."""
    import os
    import pty
    import select
    import subprocess

    from tests._python import PYTHON
    from tests.foundation.test_config import REPO

    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "NO_COLOR"))}
    process = subprocess.Popen(
        [*PYTHON, "-m", "bot", *args],
        stdout=out_slave,
        stderr=err_slave,
        stdin=subprocess.DEVNULL,
        env={**full_env, **env},
        cwd=REPO,
    )
    os.close(out_slave)
    os.close(err_slave)
    chunks: dict[int, bytes] = {out_master: b"", err_master: b""}
    open_fds = [out_master, err_master]
    try:
        while open_fds:
            ready, _, _ = select.select(open_fds, [], [], 60)
            assert ready, "the console script wrote nothing for 60 s"
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the other side is closed
                    data = b""
                if data:
                    chunks[fd] += data
                else:
                    open_fds.remove(fd)
        code = process.wait(timeout=60)
    finally:
        os.close(out_master)
        os.close(err_master)
    return code, chunks[out_master].decode(), chunks[err_master].decode()


def test_a_terminal_gets_a_progress_line_and_colours(kube_emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = scenario(kube_emulator, tmp_path, STUCK[0])
    args = ["diagnose", STUCK[1], "--kubeconfig", str(kubeconfig)]
    code, out, err = _in_terminal(args, {})
    assert code == 0, err
    # the progress line: discovery, then lists done of total, rewritten in place and cleared at the end
    assert "\rnsstuck: diagnosing emulator/ack-system-e2e-test-0: discovery " in err.replace("\x1b[K", "")
    assert "lists " in err
    assert "/" in err.rsplit("lists ", 1)[1]
    assert err.endswith("\r\x1b[K")
    # colours in the report
    assert "\x1b[1;31mBLOCKING\x1b[0m" in out
    # NO_COLOR: the same report without them
    code, plain, _ = _in_terminal(args, {"NO_COLOR": "1"})
    assert code == 0
    assert "\x1b[" not in plain
    assert "BLOCKING" in plain
    # not a terminal: neither
    piped = run_nsstuck(*args)
    assert piped.returncode == 0
    assert piped.stderr == ""
    assert "\x1b[" not in piped.stdout
    assert piped.stdout.replace("\r\n", "\n") == plain.replace("\r\n", "\n")
