"""`kubectl nsstuck ...` (issue 24 §2): the package's `kubectl-nsstuck` console script found by the real
kubectl's plugin lookup on PATH; the krew manifest template; shell completion for bash (sourced by the
real bash and by the real zsh on a pseudo-terminal, which then complete commands, options and choices)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests._cli import run_nsstuck_process as run_nsstuck
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.scenarios import apply_scenario_once
from tests.foundation.test_config import REPO

SCRIPTS = Path(sys.executable).parent
KUBECTL = shutil.which("kubectl", path="/usr/local/bin:/usr/bin:/bin")


def _plugin_env(tmp_path: Path) -> dict[str, str]:
    # only the console script's directory and the system's: the real kubectl finds the plugin there
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "kubectl-nsstuck").symlink_to(SCRIPTS / "kubectl-nsstuck")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG"))}
    return {**env, "PATH": f"{plugins}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}


def test_the_package_installs_kubectl_nsstuck() -> None:
    assert (SCRIPTS / "kubectl-nsstuck").is_file()
    scripts = __import__("tomllib").loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-nsstuck"] == scripts["nsstuck"] == "bot.cli:main"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on this machine")
def test_kubectl_runs_nsstuck_as_a_plugin(kube_emulator: Emulator, tmp_path: Path) -> None:
    assert KUBECTL is not None
    apply_scenario_once(kube_emulator, "seed000-metrics-missing-endpoints")
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig", context="emu")
    env = _plugin_env(tmp_path)
    listed = subprocess.run([KUBECTL, "plugin", "list"], env=env, capture_output=True, text=True, check=False)
    assert "kubectl-nsstuck" in listed.stdout, listed.stdout + listed.stderr
    helped = subprocess.run([KUBECTL, "nsstuck", "--help"], env=env, capture_output=True, text=True, check=False)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kubectl nsstuck")
    # kubectl hands the plugin every argument, flags included; $KUBECONFIG as kubectl would use it
    done = subprocess.run(
        [KUBECTL, "nsstuck", "diagnose", "ack-system-e2e-test-0", "-o", "json", "--exit-code"],
        env={**env, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 4, done.stderr
    report = json.loads(done.stdout)
    assert report["cluster"] == "emu"
    assert report["state"] == "terminating"


def test_the_krew_manifest_template_fills_into_a_plugin_manifest() -> None:
    text = (REPO / "krew" / "nsstuck.yaml").read_text()
    values = {"VERSION": "0.1.0", "HOMEPAGE": "https://example.com/nsstuck", "URI": "https://example.com/a.tar.gz"}
    values["SHA256"] = "0" * 64
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    assert "{{" not in text
    manifest = yaml.safe_load(text)
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == "nsstuck"
    assert manifest["spec"]["version"] == "v0.1.0"
    assert manifest["spec"]["shortDescription"]
    (platform,) = manifest["spec"]["platforms"]
    assert platform["bin"] == "kubectl-nsstuck"
    assert platform["sha256"] == "0" * 64


def _complete(script: str, line: str) -> list[str]:
    """What bash offers after `line` (the cursor at its end) with the completion script sourced."""
    words = line.split(" ")
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_nsstuck\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completion_completes_commands_options_and_choices(tmp_path: Path) -> None:
    printed = run_nsstuck("completion", "bash")
    assert printed.returncode == 0, printed.stderr
    script = tmp_path / "nsstuck.bash"
    script.write_text(printed.stdout)
    # bash sources it and registers it for both programs
    registered = subprocess.run(
        ["bash", "--norc", "-c", f"source {script} && complete -p nsstuck kubectl-nsstuck"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert registered.returncode == 0, registered.stderr
    assert "-F _nsstuck nsstuck" in registered.stdout
    assert "-F _nsstuck kubectl-nsstuck" in registered.stdout
    assert _complete(str(script), "nsstuck d") == ["diagnose", "db", "digest"]
    assert _complete(str(script), "nsstuck clusters ") == ["--help", "check"]
    assert "--exit-code" in _complete(str(script), "nsstuck diagnose ns --")
    assert _complete(str(script), "nsstuck diagnose ns -o ") == ["text", "json", "yaml"]
    assert _complete(str(script), "nsstuck db c") == ["current"]
    assert _complete(str(script), "nsstuck completion ") == ["--help", "bash", "zsh"]
    assert _complete(str(script), "kubectl-nsstuck clusters check --c") == ["--cluster", "--context", "--config"]


ZSH = shutil.which("zsh", path="/usr/local/bin:/usr/bin:/bin")


def _zsh_complete(script: Path, line: str) -> list[str]:
    """What zsh's own completion system offers after `line` and a Tab, in an interactive zsh on a
    pseudo-terminal with compinit and the script sourced. compadd is wrapped to print each match it is
    given between two control bytes (which the terminal's echo of the typed text never holds), then
    the line is killed and a sentinel echoed, so the read ends when zsh has answered the Tab."""
    master, slave = os.openpty()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(script.parent), "TERM": "dumb"}
    shell = subprocess.Popen(
        [ZSH or "zsh", "-f", "-i"], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    said = b""

    def read_until(mark: bytes) -> None:
        nonlocal said
        deadline = time.monotonic() + 20
        while mark not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    said += os.read(master, 65536)
                except OSError:  # the shell is gone
                    break
        assert mark in said, said.decode(errors="replace")

    try:
        os.write(
            master,
            (
                f"autoload -U compinit && compinit -u -D && source {script} && "
                'compadd() { local -a m; builtin compadd -O m "$@"; local w; '
                "for w in $m; do print -r -- $'\\x01'$w$'\\x02'; done; builtin compadd \"$@\"; }; "
                "echo RE''ADY\n"
            ).encode(),
        )
        # typed before zle holds the terminal, the Tab would meet the kernel's line editing instead:
        # wait for the line editor to start again (it turns bracketed paste on) after the set-up
        read_until(b"\nREADY\r")
        said = said[said.index(b"\nREADY\r") :]
        read_until(b"\x1b[?2004h")
        os.write(master, f"{line}\t\x15echo DO''NE\n".encode())
        read_until(b"\nDONE\r")
        os.write(master, b"exit\n")
        shell.wait(timeout=10)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
        os.close(master)
    return [m.decode() for m in re.findall(rb"\x01(.*?)\x02", said)]


def test_zsh_completion_is_the_bash_one_through_bashcompinit() -> None:
    printed = run_nsstuck("completion", "zsh")
    assert printed.returncode == 0
    assert printed.stdout.startswith("#compdef nsstuck kubectl-nsstuck\n")
    assert "bashcompinit" in printed.stdout


@pytest.mark.skipif(ZSH is None and os.environ.get("NSSTUCK_REQUIRE_ZSH") != "1", reason="zsh is not on this machine")
def test_zsh_completes_commands_options_and_choices(tmp_path: Path) -> None:
    """The real zsh (`.ci/run` installs it; `make test` requires it) completes as bash does."""
    assert ZSH is not None, "zsh is required here (NSSTUCK_REQUIRE_ZSH=1): apt-get install zsh"
    printed = run_nsstuck("completion", "zsh")
    script = tmp_path / "_nsstuck.zsh"
    script.write_text(printed.stdout)
    assert _zsh_complete(script, "nsstuck d") == ["diagnose", "db", "digest"]
    assert _zsh_complete(script, "nsstuck diagnose ns -o ") == ["text", "json", "yaml"]
    assert "--exit-code" in _zsh_complete(script, "nsstuck diagnose ns --")
    assert _zsh_complete(script, "kubectl-nsstuck clusters check --c") == ["--cluster", "--context", "--config"]
