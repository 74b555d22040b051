"""bot.kube imports the `kubernetes` package piece by piece (bot/kube/_lazy.py): whatever else imports
from `kubernetes` afterwards, in any order and form, gets what it would get from a plain import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    """`code` in a fresh interpreter, after `import bot.kube` has put the lazy packages in place."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, bot.kube\nassert 'kubernetes.client.api' not in sys.modules\n" + code],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _plain(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True, timeout=60
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
