"""bot.kube imports the `kubernetes` package piece by piece (bot/kube/_lazy.py): whatever else imports
from `kubernetes` afterwards, in any order and form, gets what it would get from a plain import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.kube import _lazy
from bot.settings import load_settings, settings_problems

REPO = Path(__file__).resolve().parents[2]


def _environment(**more: str) -> dict[str, str]:
    """The process environment without the switch (a developer's NSSTUCK_LAZY_KUBERNETES=0 would turn
    the piecewise import these tests are about off), and with `more`."""
    return {**{k: v for k, v in os.environ.items() if k != _lazy.SWITCH}, **more}


def _run(code: str) -> str:
    """`code` in a fresh interpreter, after `import bot.kube` has put the lazy packages in place."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, bot.kube\nassert 'kubernetes.client.api' not in sys.modules\n" + code],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=_environment(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _plain(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=_environment(**env),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize(
    "code",
    [
        # the test suite's own form: the dynamic client imported before the package's __init__ ran
        "from kubernetes import client, config, dynamic\nprint(dynamic.DynamicClient.__module__)",
        # a submodule that asks the package for its version while it is imported
        "import kubernetes.dynamic\nimport kubernetes\nprint(kubernetes.dynamic.discovery.__version__)",
        "import kubernetes.utils, kubernetes.watch, kubernetes.stream, kubernetes.leaderelection\nprint('ok')",
        "from kubernetes.client import CoreV1Api, V1Namespace\nprint(CoreV1Api.__module__, V1Namespace.__module__)",
        "import kubernetes\nprint(kubernetes.__version__, kubernetes.__project__)",
    ],
)
def test_any_import_of_kubernetes_after_bot_kube_works_as_a_plain_one(code: str) -> None:
    assert _run(code) == _plain(code)


def test_the_names_a_full_import_defines_are_all_there_once_asked_for() -> None:
    code = (
        "import kubernetes, kubernetes.client\n"
        "print(sorted(n for n in dir(kubernetes.client) if not n.startswith('_')))\n"
        "print(sorted(n for n in dir(kubernetes) if not n.startswith('_')))\n"
        "print(kubernetes.config.load_kube_config.__module__, kubernetes.watch.Watch.__module__)"
    )
    assert _run(code) == _plain(code)


def test_the_client_nsstuck_builds_does_not_import_every_model() -> None:
    out = _run(
        "from kubernetes.client import ApiClient, Configuration\n"
        "from kubernetes.config import kube_config\n"
        "ApiClient(Configuration()).close()\n"
        "print(len([m for m in sys.modules if m.startswith('kubernetes.client.models.')]),"
        " 'kubernetes.client.api' in sys.modules, 'kubernetes.dynamic' in sys.modules)"
    )
    assert out == "0 False False"


@pytest.mark.parametrize("value", ["0", "false", "False", "no", "off", "OFF"])
def test_the_switch_off_imports_kubernetes_whole(value: str) -> None:
    """NSSTUCK_LAZY_KUBERNETES=0: bot.kube leaves `kubernetes` alone, and its first import is a plain one."""
    code = (
        "import sys, bot.kube\n"
        "print('kubernetes' in sys.modules)\n"
        "import bot.kube.connecting\n"
        "print(type(sys.modules['kubernetes']).__name__, 'kubernetes.client.api' in sys.modules)"
    )
    assert _plain(code, NSSTUCK_LAZY_KUBERNETES=value).splitlines() == ["False", "module True"]
    assert _plain(code).splitlines() == ["True", "_Package False"]


@pytest.mark.parametrize(
    "value", ["", "1", "true", "True", "yes", "on", "t", "y", "0", "false", "no", "off", "f", "n", "maybe", "2", " 0"]
)
def test_the_switch_is_read_as_the_settings_read_it(value: str) -> None:
    """bot.kube reads the variable itself (it is imported before any settings are loaded): what the
    settings' model takes for true keeps the piecewise import, what it takes for false turns it off,
    and a value it refuses (`config check` and `serve` stop there) imports the package whole."""
    environ = {_lazy.SWITCH: value}
    settings, problems = settings_problems(environ)
    assert _lazy.enabled(environ) is (settings.lazy_kubernetes if settings is not None else False)
    assert settings is not None or problems[0].key == _lazy.SWITCH
    assert _lazy.enabled({}) is load_settings({}).lazy_kubernetes is True
