"""The config file and the environment: valid input loads, every bad input stops with exit 2 and one line."""

from __future__ import annotations

import re
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from bot.errors import ConfigError, UnknownClusterError
from bot.settings import Settings, load_config, load_settings, parse_duration
from tests._cli import run_nsstuck

# `config check`'s exit status and stderr: a few runs are a process of their own, as a shell sees them (a bad
# file, a bad environment variable, the example accepted); the others run the same command in this process
# (tests/_cli.py), which exits and says the same without a second of CPU for each interpreter's start
IN_A_PROCESS = "unknown key"

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "nsstuck.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    return path


def test_example_config_is_valid() -> None:
    config = load_config(REPO / "config" / "nsstuck.example.yaml")
    assert config.cluster_names == ["prod-eu", "staging"]
    assert config.require_cluster("prod-eu").allow_external_users is False
    assert config.digests[0].stuck_after == timedelta(minutes=30)
    assert config.digests[0].timezone == "Europe/Berlin"


def test_full_config_loads(tmp_path: Path, kubeconfig: Path) -> None:
    path = write(
        tmp_path,
        f"""
        clusters:
          - name: prod-eu
            kubeconfig: {kubeconfig}
            context: prod-eu
            channels: [C0123ABCD]
            approvers: [U0AAAAAAA, S0BBBBBBB]
            required_approvals: 2
            allow_external_users: true
            finalizer_resources: [widgets.example.com, limitranges]
          - name: local
            in_cluster: true
        digests:
          - channel: C0123ABCD
            schedule: "0 9 * * 1-5"
            timezone: Europe/Berlin
            clusters: [prod-eu]
            stuck_after: 1h30m
        """,
    )
    config = load_config(path)
    prod = config.require_cluster("prod-eu")
    assert prod.required_approvals == 2
    assert prod.approvers == ("U0AAAAAAA", "S0BBBBBBB")
    assert prod.allow_external_users is True
    assert prod.finalizer_resources == ("widgets.example.com", "limitranges")
    assert config.require_cluster("local").finalizer_resources == ()  # the catalogue's alone
    assert config.require_cluster("local").in_cluster
    assert config.require_cluster("local").allow_external_users is False  # guests and outsiders: not by default
    assert config.digests[0].stuck_after == timedelta(hours=1, minutes=30)


def test_relative_kubeconfig_is_relative_to_the_config_file(tmp_path: Path, kubeconfig: Path) -> None:
    path = write(tmp_path, "clusters:\n  - name: a\n    kubeconfig: kubeconfig\n")
    assert load_config(path).require_cluster("a").kubeconfig == Path("kubeconfig")


def test_a_watched_cluster_speaks_in_its_watch_channel_or_its_first_channel(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        clusters:
          - {name: a, in_cluster: true, channels: [C0AAAAAAA, C0BBBBBBB], watch: {}}
          - {name: b, in_cluster: true, watch: {after: 1h30m, channel: C0CCCCCCC}}
          - {name: c, in_cluster: true, channels: [C0AAAAAAA]}
        """,
    )
    config = load_config(path)
    a, b, c = config.clusters
    assert (a.watch_channel, a.watch and a.watch.after) == ("C0AAAAAAA", timedelta(minutes=15))
    assert (b.watch_channel, b.watch and b.watch.after) == ("C0CCCCCCC", timedelta(hours=1, minutes=30))
    assert (c.watch, c.watch_channel) == (None, None)


def test_unknown_cluster_suggests_the_closest_name(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "clusters:\n  - name: prod-eu\n    in_cluster: true\n  - name: staging\n    in_cluster: true\n",
    )
    with pytest.raises(UnknownClusterError) as caught:
        load_config(path).require_cluster("prod-ue")
    assert caught.value.suggestion == "prod-eu"
    assert "did you mean 'prod-eu'?" in str(caught.value)


BAD_CONFIGS = {
    "unknown key": (
        "clusters:\n  - name: prod-eu\n    in_cluster: true\n    kubeconfg: /x\n",
        "clusters[0].kubeconfg (line 4): unknown key",
    ),
    "unknown top-level key": ("clusterz: []\n", "clusterz (line 1): unknown key"),
    "missing cluster name": (
        "clusters:\n  - in_cluster: true\n",
        "clusters[0].name (line 2): required key is missing",
    ),
    "duplicate cluster": (
        "clusters:\n  - name: prod\n    in_cluster: true\n  - name: prod\n    in_cluster: true\n",
        "clusters[1].name (line 4): duplicate cluster 'prod' (already defined at clusters[0])",
    ),
    "malformed cron": (
        "digests:\n  - channel: C0123ABCD\n    schedule: '0 25 * * *'\n",
        "digests[0]",
    ),
    "cron with six fields": (
        "digests:\n  - channel: C0123ABCD\n    schedule: '0 0 9 * * 1'\n",
        "expected 5 fields",
    ),
    "unreadable kubeconfig path": (
        "clusters:\n  - name: prod\n    kubeconfig: /nonexistent/kubeconfig\n",
        "clusters[0].kubeconfig (line 3): kubeconfig '/nonexistent/kubeconfig' does not exist",
    ),
    "kubeconfig is a directory": (
        "clusters:\n  - name: prod\n    kubeconfig: /tmp\n",
        "kubeconfig '/tmp' is not a file",
    ),
    "unknown time zone": (
        "digests:\n  - channel: C0123ABCD\n    schedule: '0 9 * * *'\n    timezone: Mars/Olympus\n",
        "digests[0].timezone (line 4): unknown time zone 'Mars/Olympus'",
    ),
    "bad duration": (
        "digests:\n  - channel: C0123ABCD\n    schedule: '0 9 * * *'\n    stuck_after: soon\n",
        "'soon' is not a duration",
    ),
    "digest names an unknown cluster": (
        "clusters:\n  - name: prod\n    in_cluster: true\n"
        "digests:\n  - channel: C0123ABCD\n    schedule: '0 9 * * *'\n    clusters: [prd]\n",
        "digests[0].clusters[0] (line 7): unknown cluster 'prd'",
    ),
    "bad channel id": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    channels: ['#ops']\n",
        "clusters[0].channels[0] (line 4): '#ops' is not a Slack channel ID",
    ),
    "zero approvals": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    required_approvals: 0\n",
        "clusters[0].required_approvals (line 4)",
    ),
    "allow_external_users not a boolean": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    allow_external_users: sometimes\n",
        "clusters[0].allow_external_users (line 4): Input should be a valid boolean",
    ),
    "allow_external_users misspelt": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    allow_external_user: true\n",
        "clusters[0].allow_external_user (line 4): unknown key",
    ),
    "finalizer_resources with a wildcard": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    finalizer_resources: ['*.example.com']\n",
        "clusters[0].finalizer_resources[0] (line 4): '*.example.com' is not RESOURCE or RESOURCE.GROUP",
    ),
    "finalizer_resources with a subresource": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    finalizer_resources: [pods/ephemeralcontainers]\n",
        "never * or a subresource",
    ),
    "both kubeconfig and in_cluster": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    kubeconfig: /tmp/k\n",
        "set either kubeconfig or in_cluster: true, not both",
    ),
    "watch misspelt": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    channels: [C0123ABCD]\n    watch: {afetr: 15m}\n",
        "clusters[0].watch.afetr (line 5): unknown key (did you mean after?)",
    ),
    "watch after not a duration": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    channels: [C0123ABCD]\n    watch: {after: soon}\n",
        "clusters[0].watch.after (line 5): 'soon' is not a duration",
    ),
    "watch after too short": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    channels: [C0123ABCD]\n    watch: {after: 20s}\n",
        "clusters[0].watch.after (line 5): 20s is too short: at least 1m",
    ),
    "watch channel not a channel": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    watch: {channel: '#ops'}\n",
        "clusters[0].watch.channel (line 4): '#ops' is not a Slack channel ID",
    ),
    "watched cluster without a channel": (
        "clusters:\n  - name: prod\n    in_cluster: true\n    watch: {after: 15m}\n",
        "clusters[0].watch (line 4): a watched cluster needs a channel to speak in: set watch.channel, or give "
        "the cluster channels:",
    ),
    "invalid YAML": ("clusters: [\n", "invalid YAML"),
    "not a mapping": ("- a\n- b\n", "the top level must be a mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_raises_config_error_naming_file_and_key(tmp_path: Path, case: str) -> None:
    text, expected = BAD_CONFIGS[case]
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert expected in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "case",
    [
        "unknown key",
        "missing cluster name",
        "duplicate cluster",
        "malformed cron",
        "unreadable kubeconfig path",
        "allow_external_users not a boolean",
        "watched cluster without a channel",
    ],
)
def test_bad_config_stops_the_program_with_exit_2_and_one_line(tmp_path: Path, case: str) -> None:
    text, expected = BAD_CONFIGS[case]
    path = write(tmp_path, text)
    result = run_nsstuck("config", "check", env={"NSSTUCK_CONFIG": str(path)}, process=case == IN_A_PROCESS)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"nsstuck: config error: {path}")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_config_check_accepts_the_example(tmp_path: Path) -> None:
    result = run_nsstuck("config", "check", "--config", "config/nsstuck.example.yaml", process=True)
    assert result.returncode == 0, result.stderr
    assert "clusters: prod-eu, staging" in result.stdout


def test_named_config_file_that_does_not_exist(tmp_path: Path) -> None:
    result = run_nsstuck("config", "check", env={"NSSTUCK_CONFIG": str(tmp_path / "nope.yaml")})
    assert result.returncode == 2
    assert result.stderr.strip() == f"nsstuck: config error: {tmp_path / 'nope.yaml'}: file not found"


def test_default_config_path_may_be_absent(tmp_path: Path) -> None:
    result = run_nsstuck("config", "check", cwd=tmp_path, env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert "clusters: none" in result.stdout


def test_bad_environment_variable_is_named_without_its_value() -> None:
    result = run_nsstuck("config", "check", env={"NSSTUCK_HTTP_PORT": "port-80-please"}, process=True)
    assert result.returncode == 2
    assert result.stderr.startswith("nsstuck: config error: environment: NSSTUCK_HTTP_PORT:")
    assert "port-80-please" not in result.stderr


def test_the_metrics_port_must_differ_from_the_http_port() -> None:
    """/metrics has a port of its own (issue 36): the same port as Slack's is refused in one line."""
    assert load_settings({}).metrics_port == 9090
    for env in ({"NSSTUCK_HTTP_PORT": "9090"}, {"NSSTUCK_METRICS_PORT": "3000"}):
        result = run_nsstuck("config", "check", env=env)
        assert result.returncode == 2, env
        assert result.stderr == (
            "nsstuck: config error: environment: NSSTUCK_METRICS_PORT: "
            "must differ from NSSTUCK_HTTP_PORT (/metrics has a port of its own)\n"
        )


def test_secrets_never_show_in_settings_repr() -> None:
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-very-secret", "SLACK_SIGNING_SECRET": "shh-secret"})
    assert "xoxb-very-secret" not in repr(settings)
    assert "shh-secret" not in str(settings)
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == "xoxb-very-secret"


def test_settings_defaults_follow_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    # the process environment must not leak into settings built from an explicit mapping
    monkeypatch.setenv("NSSTUCK_CONFIG", "elsewhere.yaml")
    monkeypatch.setenv("NSSTUCK_HTTP_PORT", "9999")
    settings = load_settings({})
    assert settings.database_url == "sqlite:///nsstuck.db"
    assert settings.config_path == Path("config/nsstuck.yaml")
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.http_port == 3000
    assert settings.watch_seconds == 60
    assert load_settings({"NSSTUCK_WATCH_SECONDS": "2.5"}).watch_seconds == 2.5
    with pytest.raises(ConfigError, match="NSSTUCK_WATCH_SECONDS"):
        load_settings({"NSSTUCK_WATCH_SECONDS": "0"})
    assert load_settings({"NSSTUCK_SLACK_API_URL": "http://127.0.0.1:9/api"}).slack_api_url.endswith("/api/")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("1h30m", 5400), ("2d", 172800), ("90", 90), ("1w", 604800)],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "m", "10x", "1h 30m", "-5m", "30m1"])
def test_parse_duration_refuses_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_act_as_approver_loads_its_mapping(tmp_path: Path, kubeconfig: Path) -> None:
    path = write(
        tmp_path,
        f"""
        clusters:
          - name: prod-eu
            kubeconfig: {kubeconfig}
            approvers: [U0AAAAAAA]
            act_as_approver: true
            impersonation:
              users:
                U0AAAAAAA: {{user: alice@example.com, groups: [sre]}}
              email: {{prefix: "oidc:", groups: [sre, ops]}}
        """,
    )
    [cluster] = load_config(path).clusters
    assert cluster.act_as_approver
    assert cluster.impersonation is not None
    assert cluster.impersonation.users["U0AAAAAAA"].user == "alice@example.com"
    assert cluster.impersonation.users["U0AAAAAAA"].groups == ("sre",)
    assert cluster.impersonation.email is not None
    assert (cluster.impersonation.email.prefix, cluster.impersonation.email.groups) == ("oidc:", ("sre", "ops"))


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("impersonation: {users: {U0AAAAAAA: {user: alice, groups: [system:masters]}}}", "groups[0] (line"),
        ("impersonation: {users: {U0AAAAAAA: {user: system:admin}}}", "'system:admin': nsstuck never acts as"),
        ("impersonation: {email: {prefix: 'system:', groups: []}}", "nsstuck never acts as a system: identity"),
        ("impersonation: {email: {groups: [system:authenticated]}}", "never sends a system: group"),
        ("impersonation: {users: {C0123ABCD: {user: alice}}}", "'C0123ABCD' is not a Slack user ID"),
        ("impersonation: {}", "act_as_approver: true needs impersonation"),
        ("impersonation: {users: {U0AAAAAAA: {user: alice, role: admin}}}", "role"),
    ],
)
def test_act_as_approver_refusals(tmp_path: Path, kubeconfig: Path, block: str, message: str) -> None:
    path = write(
        tmp_path,
        f"clusters:\n  - name: prod-eu\n    kubeconfig: {kubeconfig}\n    act_as_approver: true\n    {block}\n",
    )
    done = run_nsstuck("config", "check", "--config", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_every_setting_is_in_the_settings_table() -> None:
    table = (REPO / "docs" / "configuration.md").read_text().partition("\n## Settings\n")[2]
    names = [field.validation_alias for field in Settings.model_fields.values()]
    assert all(isinstance(name, str) for name in names)
    missing = [name for name in names if f"\n| `{name}` |" not in table]
    assert not missing, f"settings without a row in docs/configuration.md's Settings: {missing}"
    readme = (REPO / "README.md").read_text()
    shown = re.findall(r"\n\| `([A-Z_]+)` \|", readme.partition("\n## Configuration\n")[2])
    assert shown, "the README's Configuration shows no setting"
    assert set(shown) <= set(names), f"the README's table names settings that do not exist: {shown}"


@pytest.mark.parametrize("value", ["0", "many", "1001"])
def test_an_http_thread_count_that_cannot_work_is_refused_by_name(value: str) -> None:
    assert load_settings({"NSSTUCK_HTTP_THREADS": "7"}).http_threads == 7
    with pytest.raises(ConfigError, match="NSSTUCK_HTTP_THREADS") as caught:
        load_settings({"NSSTUCK_HTTP_THREADS": value})
    assert len(str(caught.value).splitlines()) == 1
