"""Every `nsstuck` example of the README and of docs/ runs (issue 24, "Done when"): the lines of their
shell blocks that run nsstuck (`nsstuck`, `.venv/bin/nsstuck`, `kubectl nsstuck`) must all be in the
README's "Try it without a cluster", and that block runs as written, line by line in bash, against the
Kubernetes emulator it starts itself (`python -m tests.fakes.kubeapi ... &`), with /tmp/ moved to the
test's own folder. A line ending in `# exit N` must exit N, every other line 0; an `export` line sets
what the lines after it see, as in one shell. The command of a CI snippet (a YAML block's `- nsstuck
...` or `run: nsstuck ...`, issue 27), in the README or docs/, must be the command of a line of that
block too.

The README is a front page (issue 35): under 400 lines, starting with its two commands, `make run` and
`make test`, which the Makefile has; the rest is in docs/, and every relative link of the README and
docs/ leads to a file, and a heading, that exist."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.foundation.test_config import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))  # what the README links to (precheck.md has the CI snippet)
SECTION = "\n### Try it without a cluster\n"
_BLOCK = re.compile(r"```(sh|bash|console)\n(.*?)```", re.S)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _runs_nsstuck(line: str) -> bool:
    """Whether a shell line runs nsstuck (after any VAR=value assignments)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return False
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    if program == "source" and len(words) > 1:
        return "nsstuck" in words[1]
    return program in ("nsstuck", "kubectl-nsstuck") or (program == "kubectl" and words[1:2] == ["nsstuck"])


def _try_it_block() -> list[str]:
    text = README.read_text()
    section = text[text.index(SECTION) :]
    end = re.compile(r"\n##+ ").search(section, len(SECTION))
    assert end is not None
    section = section[: end.start()]
    match = _BLOCK.search(section)
    assert match is not None
    return [line for line in match.group(2).splitlines() if line.strip()]


def _documentation() -> str:
    """The README and every file of docs/, one text."""
    return "\n".join(path.read_text() for path in (README, *DOCS))


def _logical_lines(block: str) -> list[str]:
    """The block's commands, a line ending in a backslash joined to the next."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines()]


def test_every_nsstuck_example_is_in_the_block_that_runs() -> None:
    covered = set(_try_it_block())
    examples = [line for m in _BLOCK.finditer(_documentation()) for line in _logical_lines(m.group(2))]
    elsewhere = [line for line in examples if _runs_nsstuck(line) and line not in covered]
    assert elsewhere == [], "examples of nsstuck outside the README's 'Try it without a cluster' (run them there)"
    assert sum(_runs_nsstuck(line) for line in covered) >= 8


_YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)
_CI_STEP = re.compile(r"^\s*(?:-\s+|run:\s+)(.*)$")


def _command(line: str) -> str:
    """A shell line without its comment, its words as bash splits them."""
    return " ".join(shlex.split(line, comments=True))


def test_every_ci_snippet_runs_in_the_block() -> None:
    ran = {_command(line) for line in _try_it_block()}
    steps = [
        match.group(1)
        for block in _YAML_BLOCK.finditer(_documentation())
        for line in block.group(1).splitlines()
        if (match := _CI_STEP.match(line)) and _runs_nsstuck(match.group(1))
    ]
    assert steps, "neither the README nor docs/ shows a CI snippet running nsstuck"
    assert [step for step in steps if _command(step) not in ran] == []


def test_the_try_it_block_runs_against_the_emulator(tmp_path: Path) -> None:
    lines = _try_it_block()
    assert lines[0] == "make install"  # done already: the tests run in the installed .venv
    start = lines[1]
    assert start.startswith(".venv/bin/python -m tests.fakes.kubeapi ")
    assert start.endswith("&")
    here = str(tmp_path) + "/"
    kubeconfig = tmp_path / "kc"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG", "NO_COLOR"))}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    env["HOME"] = str(tmp_path)
    emulator = subprocess.Popen(
        shlex.split(start.rstrip("&").replace("/tmp/", here), comments=True),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert emulator.stdout is not None
        ready = emulator.stdout.readline()  # "URL: ...", once the scenario is built and it serves
        assert ready.startswith("URL: "), emulator.stderr.read() if emulator.stderr else ready
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for line in lines[2:]:
            if line.startswith("export "):  # what the next lines see, as in one shell
                exported = subprocess.run(
                    ["bash", "--norc", "-c", f"{line.replace('/tmp/', here)}\nenv -0"],
                    cwd=REPO,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                env = dict(item.split("=", 1) for item in exported.stdout.split("\0") if "=" in item)
                continue
            expected = re.search(r"#\s*exit (\d+)", line)
            done = subprocess.run(
                ["bash", "--norc", "-c", line.replace("/tmp/", here)],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == (int(expected.group(1)) if expected else 0), (line, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr, line
            if "diagnose" in line:
                assert "ack-system-e2e-test-0" in done.stdout, line
            if "kubectl get ns" in line:
                assert re.search(r"ack-system-e2e-test-0\s+Terminating", done.stdout), done.stdout
            if "clusters check" in line:
                assert "emulator" in done.stdout, line
    finally:
        emulator.send_signal(signal.SIGTERM)
        try:
            emulator.wait(timeout=30)
        finally:
            for stream in (emulator.stdout, emulator.stderr):
                if stream is not None:
                    stream.close()


def test_the_readme_is_a_front_page_that_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 400, "the README is a front page: move the details to docs/ and link them"
    top = re.match(r"# nsstuck\n\n```sh\n(.*?)```\n", text, re.S)
    assert top is not None, "the README starts with the block of its two commands"
    assert [line.split("#", 1)[0].strip() for line in top.group(1).splitlines()] == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert "\nrun: install\n" in makefile
    assert "\ntest: install\n" in makefile


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_links_of_the_readme_and_docs_lead_somewhere() -> None:
    broken = []
    for path in (README, *DOCS):
        for target in _LINK.findall(path.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.name}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert broken == []
