"""Helm for the chart tests: the `helm` binary that `scripts/install-helm` puts in the virtual
environment (or one on PATH). Without one the tests are skipped, unless NSSTUCK_REQUIRE_HELM=1 (as
`make test` and CI set it), where they fail instead: the chart is never left untested there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "nsstuck"
PRODUCTION_VALUES = CHART / "values-production.yaml"

Render = Callable[..., list[dict[str, Any]]]


def helm_binary() -> str | None:
    beside = Path(sys.executable).parent / "helm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("helm")


@pytest.fixture(scope="session")
def helm() -> str:
    binary = helm_binary()
    if binary is None:
        if os.environ.get("NSSTUCK_REQUIRE_HELM") == "1":
            pytest.fail("NSSTUCK_REQUIRE_HELM=1 but there is no helm (scripts/install-helm installs it)")
        pytest.skip("no helm binary (scripts/install-helm installs it; `make test` does)")
    return binary


class HelmError(Exception):
    """`helm template` refused the values; the message is its stderr."""


def helm_template(helm: str, *args: str, values: dict[str, Any] | None = None, tmp: Path | None = None) -> str:
    command = [helm, "template", "nsstuck", str(CHART), "--namespace", "platform", *args]
    if values is not None:
        assert tmp is not None
        path = tmp / f"values-{len(list(tmp.glob('values-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(values))
        command += ["--values", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise HelmError(result.stderr.strip())
    return result.stdout


@pytest.fixture
def render(helm: str, tmp_path: Path) -> Render:
    """render(values=None, *helm_args) -> the manifests (documents) `helm template` prints."""

    def run(values: dict[str, Any] | None = None, *args: str) -> list[dict[str, Any]]:
        text = helm_template(helm, *args, values=values, tmp=tmp_path)
        return [doc for doc in yaml.safe_load_all(text) if doc]

    return run


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]
