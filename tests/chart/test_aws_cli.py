"""The image carries the AWS CLI (issue 24 §4), so that a kubeconfig whose exec credential plugin is
`aws eks get-token` works in it as it is. What the Dockerfile's build stage does for it is done here
(an environment of its own from requirements/aws.txt, wheels only), and the CLI it gives signs, with
dummy credentials and no network, an EKS token that the Kubernetes API emulator accepts.

The emulator has no AWS STS behind it: `Emulator.accept_eks_tokens` checks the token's SigV4
signature itself, from the dummy secret key, as STS would (tests/fakes/kubeapi/awsauth.py). So what
these tests check is that the CLI in the image makes a correctly signed token for the cluster's name,
and that nsstuck, given the kubeconfig, runs the plugin and is let in with its token; not that AWS
would accept these (dummy) credentials.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.dockerfile import instructions
from tests.diagnosis.test_diagnose_cli import _namespace
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.awsauth import EksAuthenticator

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "requirements" / "aws.txt"
ACCESS_KEY = "AKIAEXAMPLEDUMMY0001"
SECRET_KEY = "dummy-secret/0123456789abcdefghijklmnopqrstu"
CLUSTER = "prod-eks"
REGION = "eu-west-1"


def test_the_build_stage_installs_the_pinned_aws_cli_and_puts_aws_on_the_path() -> None:
    runs = " ".join(i.args for i in instructions(REPO / "Dockerfile") if i.name == "RUN")
    assert "python -m venv /opt/aws" in runs
    assert "--only-binary=:all: --requirement requirements/aws.txt" in runs
    assert "ln -s /opt/aws/bin/aws /opt/nsstuck/bin/aws" in runs  # /opt/nsstuck/bin is on the image's PATH
    pins = [line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")]
    assert pins
    assert all("==" in line for line in pins), pins
    assert any(line.startswith("awscli==1.") for line in pins)


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage's RUN for the AWS CLI, on this machine: `aws` of an environment of its own."""
    venv = tmp_path_factory.mktemp("aws") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
         "--disable-pip-version-check", "--only-binary=:all:", "--requirement", str(REQUIREMENTS)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    binary = venv / "bin" / "aws"
    assert binary.is_file()
    return binary


def _aws_env(**extra: str) -> dict[str, str]:
    """Dummy credentials, no config files, no instance metadata."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "NSSTUCK_", "SLACK_", "PYTHON"))}
    env.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_EC2_METADATA_DISABLED="true",
    )
    env.update(extra)
    return env


def _offline(**extra: str) -> dict[str, str]:
    """`_aws_env` with every address behind a closed proxy: whatever tried to reach AWS would fail."""
    return _aws_env(HTTPS_PROXY="http://127.0.0.1:1", HTTP_PROXY="http://127.0.0.1:1", **extra)


def _get_token(aws: Path, cluster: str = CLUSTER) -> str:
    result = subprocess.run(
        [str(aws), "eks", "get-token", "--cluster-name", cluster, "--region", REGION],
        env=_offline(),  # signed here: STS is never asked
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    credential: dict[str, Any] = json.loads(result.stdout)
    assert credential["kind"] == "ExecCredential"
    token = credential["status"]["token"]
    assert isinstance(token, str)
    assert token.startswith("k8s-aws-v1.")
    return token


def _status(emulator: Emulator, token: str) -> int:
    request = urllib.request.Request(
        f"{emulator.url}/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        with e:
            return int(e.code)


def test_aws_eks_get_token_signs_locally_a_token_the_emulator_accepts(aws: Path, kube_emulator: Emulator) -> None:
    token = _get_token(aws)
    assert _status(kube_emulator, token) == 401  # not before the cluster knows the key
    kube_emulator.accept_eks_tokens(CLUSTER, ACCESS_KEY, SECRET_KEY, kube_emulator.user_identity)
    assert _status(kube_emulator, token) == 200
    # a token for another cluster, a changed character, another secret key: refused
    assert _status(kube_emulator, _get_token(aws, "staging-eks")) == 401
    tampered = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    assert _status(kube_emulator, tampered) == 401
    other = EksAuthenticator(CLUSTER, {ACCESS_KEY: ("another-secret", "x")})
    assert other.user(token) is None
    # and too old: aws-iam-authenticator takes a token for 15 minutes
    late = EksAuthenticator(CLUSTER, {ACCESS_KEY: (SECRET_KEY, "x")})
    assert late.user(token) == "x"
    late.now = time.time() + 16 * 60
    assert late.user(token) is None


def test_nsstuck_diagnoses_a_cluster_whose_kubeconfig_runs_aws_eks_get_token(
    aws: Path, kube_emulator: Emulator, tmp_path: Path
) -> None:
    kube_emulator.accept_eks_tokens(CLUSTER, ACCESS_KEY, SECRET_KEY, kube_emulator.user_identity)
    _namespace(kube_emulator, "eks-stuck", delete=True)
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig", context=CLUSTER)
    config = yaml.safe_load(kubeconfig.read_text())
    # the kubeconfig `aws eks update-kubeconfig` writes: the plugin by name, found on the PATH
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["--region", REGION, "eks", "get-token", "--cluster-name", CLUSTER, "--output", "json"],
            "interactiveMode": "Never",
        }
    }
    kubeconfig.write_text(yaml.safe_dump(config))
    env = _aws_env(PATH=f"{aws.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which("aws", path=env["PATH"]) == str(aws)
    result = subprocess.run(
        [sys.executable, "-m", "bot", "diagnose", "eks-stuck", "--kubeconfig", str(kubeconfig), "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["namespace"] == "eks-stuck"
    assert report["state"] != "not_found"
    assert SECRET_KEY not in result.stdout + result.stderr
