"""The webhook's settings in `nsstuck serve` and the config file (issue 38 §1): a bad one is one clear
line at start-up (exit 2) and nothing starts; `config check` names the bad `admission:` key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._cli import run_nsstuck

BASE = {"SLACK_BOT_TOKEN": "xoxb-test-token-1", "SLACK_SIGNING_SECRET": "s3cr3t-signing"}


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"NSSTUCK_ADMISSION_PORT": "8443"},
            "NSSTUCK_ADMISSION_PORT needs NSSTUCK_ADMISSION_CERT and NSSTUCK_ADMISSION_KEY",
        ),
        (
            {
                "NSSTUCK_ADMISSION_PORT": "8443",
                "NSSTUCK_ADMISSION_CERT": "/nowhere/cert.pem",
                "NSSTUCK_ADMISSION_KEY": "/nowhere/key.pem",
            },
            "NSSTUCK_ADMISSION_CERT '/nowhere/cert.pem' does not exist or is not a file",
        ),
        ({"NSSTUCK_ADMISSION_PORT": "70000"}, "NSSTUCK_ADMISSION_PORT"),
    ],
    ids=["no-pair", "cert-missing", "port"],
)
def test_a_bad_admission_setting_stops_serve_at_start(tmp_path: Path, env: dict[str, str], said: str) -> None:
    database = tmp_path / "bot.db"
    (tmp_path / "none.yaml").write_text("clusters: []\n")
    result = run_nsstuck(
        "serve",
        env={
            **BASE,
            **env,
            "NSSTUCK_DATABASE_URL": f"sqlite:///{database}",
            "NSSTUCK_CONFIG": str(tmp_path / "none.yaml"),
        },
    )
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
    assert "xoxb-test-token-1" not in result.stderr + result.stdout
    assert not database.exists()  # nothing started: not even the database was opened


@pytest.mark.parametrize(
    ("admission", "said"),
    [
        ("{budget_seconds: 29}", "budget_seconds"),
        ("{mode: block}", "mode"),
        ("{channel: general}", "channel"),
        ("{modes: deny}", "modes"),
    ],
    ids=["budget", "mode", "channel", "unknown-key"],
)
def test_config_check_names_a_bad_admission_key(tmp_path: Path, admission: str, said: str) -> None:
    path = tmp_path / "nsstuck.yaml"
    (tmp_path / "k").write_text("")
    path.write_text(f"clusters:\n  - name: prod\n    kubeconfig: k\n    admission: {admission}\n")
    result = run_nsstuck("config", "check", env={"NSSTUCK_CONFIG": str(path)})
    assert result.returncode != 0
    assert f"admission.{said}" in result.stdout + result.stderr, result.stdout + result.stderr


def test_config_check_takes_a_good_admission(tmp_path: Path) -> None:
    path = tmp_path / "nsstuck.yaml"
    path.write_text(
        "clusters:\n  - name: prod\n    in_cluster: true\n"
        "    admission: {mode: deny, budget_seconds: 28, channel: C0123ABCD}\n"
    )
    result = run_nsstuck("config", "check", env={"NSSTUCK_CONFIG": str(path)})
    assert "admission" not in result.stdout + result.stderr, result.stdout + result.stderr
