"""The Helm chart renders what a cluster needs and refuses what cannot work: `helm lint`, every
manifest valid against the Kubernetes schemas, secrets by value or by reference, probes and a
locked-down pod, SQLite for one replica only, migrations before the pods, the config file and the
kubeconfigs where nsstuck reads them."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.settings import AppConfig
from tests.chart.conftest import CHART, PRODUCTION_VALUES, REPO, HelmError, Render, find, helm_template, one

POSTGRES = {"database": {"url": "postgresql+psycopg://nsstuck:pw@db.example.com:5432/nsstuck"}}
OWNER_URL = "postgresql+psycopg://nsstuck_owner:owner-pw-7d1e@db.example.com:5432/nsstuck"
TWO_ROLES = {"database": {**POSTGRES["database"], "migrationUrl": OWNER_URL, "runtimeRole": "nsstuck_runtime"}}
SLACK = {"slack": {"botToken": "xoxb-1", "signingSecret": "s3cret"}}


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = _pod(docs)["containers"]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


def _validate(manifests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate-manifests")],
        input=manifests,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- lint and schemas ------------------------------------------------------------------------------


@pytest.mark.parametrize("production", [False, True], ids=["default", "production"])
def test_helm_lint(helm: str, production: bool) -> None:
    extra = ["--values", str(PRODUCTION_VALUES)] if production else []
    result = subprocess.run(
        [helm, "lint", "--strict", str(CHART), *extra], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "production": yaml.safe_load(PRODUCTION_VALUES.read_text()),
    "everything": {
        **TWO_ROLES,
        **SLACK,
        "replicaCount": 3,
        "remediation": {"enabled": True, "finalizerResources": ["kialis.kiali.io", "configmaps"]},
        "kubeconfigs": [{"name": "remote", "content": "apiVersion: v1\nkind: Config\n"}],
        "ingress": {"enabled": True, "className": "nginx", "tlsSecretName": "tls"},
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}, "namespaceStuckSeconds": 7200},
        "env": {"NSSTUCK_FOLLOW_UP_SECONDS": 60},
        "serviceAccount": {"annotations": {"example.com/role": "nsstuck"}},
        "imagePullSecrets": [{"name": "registry"}],
    },
    "sqlite-on-a-claim": {"database": {"sqlite": {"existingClaim": "nsstuck-data"}}, "podDisruptionBudget": {}},
    "act-as-approver": {
        "remediation": {
            "enabled": True,
            "actAsApprover": {"enabled": True, "users": ["alice@example.com"], "groups": ["sre"]},
        },
        "config": {
            "clusters": [
                {
                    "name": "local",
                    "in_cluster": True,
                    "approvers": ["U0AAAAAAA"],
                    "act_as_approver": True,
                    "impersonation": {"users": {"U0AAAAAAA": {"user": "alice@example.com", "groups": ["sre"]}}},
                }
            ]
        },
    },
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_manifest_is_valid_kubernetes(helm: str, tmp_path: Path, variant: str) -> None:
    manifests = helm_template(helm, values=VARIANTS[variant], tmp=tmp_path)
    result = _validate(manifests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problems" in result.stdout


def test_the_validator_catches_a_wrong_manifest() -> None:
    result = _validate("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n")
    assert result.returncode == 1
    assert "'prots' was unexpected" in result.stderr
    unknown = _validate("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\n")
    assert unknown.returncode == 1, "a kind without a schema is an error unless it is listed as a custom resource"


def test_the_service_monitor_is_skipped_and_said_so(helm: str, tmp_path: Path) -> None:
    result = _validate(helm_template(helm, values={"serviceMonitor": {"enabled": True}}, tmp=tmp_path))
    assert result.returncode == 0, result.stderr
    assert "skipped ServiceMonitor/nsstuck" in result.stdout


# -- the pod ---------------------------------------------------------------------------------------


def test_probes_and_a_locked_down_pod(render: Render) -> None:
    docs = render()
    pod = _pod(docs)
    container = _container(docs)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["ports"] == [
        {"name": "http", "containerPort": 3000, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},  # /metrics alone (issue 36)
    ]
    assert _env(container)["NSSTUCK_HTTP_PORT"] == "3000"
    assert _env(container)["NSSTUCK_METRICS_PORT"] == "9090"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    for c in [container, *pod.get("initContainers", ())]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        # the Kubernetes client writes CA files to /tmp: a writable emptyDir
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    assert container["args"] == ["serve"]
    assert container["resources"]["limits"]["memory"]


def test_the_service_publishes_the_http_port(render: Render) -> None:
    docs = render()
    service = one(docs, "Service")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 3000, "targetPort": "http", "protocol": "TCP"},
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"},
    ]
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_config_file_is_where_nsstuck_config_points(render: Render) -> None:
    docs = render()
    config_map = one(docs, "ConfigMap")
    container = _container(docs)
    assert _env(container)["NSSTUCK_CONFIG"] == "/etc/nsstuck/config/nsstuck.yaml"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert mount["mountPath"] == "/etc/nsstuck/config"
    volume = next(v for v in _pod(docs)["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    config = AppConfig.model_validate(yaml.safe_load(config_map["data"]["nsstuck.yaml"]))
    [local] = config.clusters
    assert (local.name, local.in_cluster, local.remediation) == ("local", True, False)


def test_remediation_enabled_leaves_the_config_alone(render: Render) -> None:
    docs = render({"remediation": {"enabled": True}})
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["nsstuck.yaml"])
    assert config["clusters"] == [{"name": "local", "in_cluster": True}]


def test_the_act_as_approver_config_is_a_valid_nsstuck_config(render: Render) -> None:
    docs = render(VARIANTS["act-as-approver"])
    config = AppConfig.model_validate(yaml.safe_load(one(docs, "ConfigMap")["data"]["nsstuck.yaml"]))
    assert config.clusters[0].act_as_approver
    assert config.clusters[0].remediation


def test_the_production_config_is_a_valid_nsstuck_config(render: Render) -> None:
    docs = render(None, "--values", str(PRODUCTION_VALUES))
    config = AppConfig.model_validate(yaml.safe_load(one(docs, "ConfigMap")["data"]["nsstuck.yaml"]))
    assert [c.name for c in config.clusters] == ["prod-eu", "prod-us"]


# -- secrets ---------------------------------------------------------------------------------------


def test_secrets_from_values(render: Render) -> None:
    docs = render({**POSTGRES, **SLACK})
    secret = one(docs, "Secret", "nsstuck")
    assert sorted(secret["data"]) == ["NSSTUCK_DATABASE_URL", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"]
    env = _env(_container(docs))
    for name in ("NSSTUCK_DATABASE_URL", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"):
        assert env[name] == {"secretKeyRef": {"name": "nsstuck", "key": name}}
    assert "SLACK_APP_TOKEN" not in env  # HTTP mode: no app token given
    # no secret value anywhere else in the manifests
    rendered = yaml.safe_dump_all(d for d in docs if d["kind"] != "Secret")
    assert "xoxb-1" not in rendered
    assert "s3cret" not in rendered


def test_existing_secrets(render: Render) -> None:
    values = {
        "slack": {"existingSecret": "team-slack", "botToken": "ignored"},
        "database": {"existingSecret": "team-db", "existingSecretKey": "url"},
        "replicaCount": 2,
    }
    docs = render(values)
    assert not find(docs, "Secret"), "the chart makes no Secret when existing ones are named"
    env = _env(_container(docs))
    assert env["NSSTUCK_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db", "key": "url"}}
    assert env["SLACK_BOT_TOKEN"] == {"secretKeyRef": {"name": "team-slack", "key": "SLACK_BOT_TOKEN"}}
    # HTTP mode has a signing secret, Socket Mode an app token: each may be absent
    assert env["SLACK_SIGNING_SECRET"]["secretKeyRef"] == {
        "name": "team-slack",
        "key": "SLACK_SIGNING_SECRET",
        "optional": True,
    }
    assert env["SLACK_APP_TOKEN"]["secretKeyRef"]["optional"] is True
    job = one(docs, "Job")
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert _env(migrate)["NSSTUCK_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db", "key": "url"}}


def test_kubeconfigs_of_remote_clusters(render: Render) -> None:
    values = {
        "kubeconfigs": [
            {"name": "prod-us", "existingSecret": "kc-prod-us", "key": "config"},
            {"name": "staging", "content": "apiVersion: v1\nkind: Config\n"},
        ],
        "config": {
            "clusters": [
                {"name": "prod-us", "kubeconfig": "/etc/nsstuck/kubeconfigs/prod-us/kubeconfig"},
                {"name": "staging", "kubeconfig": "/etc/nsstuck/kubeconfigs/staging/kubeconfig", "context": "s"},
            ]
        },
    }
    docs = render(values)
    made = one(docs, "Secret", "nsstuck-kubeconfig-staging")
    assert list(made["data"]) == ["kubeconfig"]
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["kubeconfig-prod-us"]["secret"]["secretName"] == "kc-prod-us"
    assert volumes["kubeconfig-prod-us"]["secret"]["items"] == [{"key": "config", "path": "kubeconfig"}]
    assert volumes["kubeconfig-staging"]["secret"]["secretName"] == "nsstuck-kubeconfig-staging"
    mounts = {m["name"]: m for m in _container(docs)["volumeMounts"]}
    assert mounts["kubeconfig-prod-us"] == {
        "name": "kubeconfig-prod-us",
        "mountPath": "/etc/nsstuck/kubeconfigs/prod-us",
        "readOnly": True,
    }


# -- the database ----------------------------------------------------------------------------------


def test_sqlite_with_more_than_one_replica_is_refused(render: Render) -> None:
    with pytest.raises(HelmError, match="replicaCount is 2 but the database is SQLite"):
        render({"replicaCount": 2})
    with pytest.raises(HelmError, match="SQLite"):
        render({"replicaCount": 3, "database": {"url": "sqlite:////var/lib/nsstuck/other.db"}})
    assert one(render({**POSTGRES, "replicaCount": 3}), "Deployment")["spec"]["replicas"] == 3


def test_sqlite_is_migrated_in_the_pod(render: Render) -> None:
    docs = render()
    assert not find(docs, "Job"), "a hook Job could not reach the pod's SQLite file"
    pod = _pod(docs)
    [init] = pod["initContainers"]
    assert init["args"] == ["db", "upgrade"]
    assert _env(init)["NSSTUCK_DATABASE_URL"] == "sqlite:////var/lib/nsstuck/nsstuck.db"
    assert _env(_container(docs))["NSSTUCK_DATABASE_URL"] == "sqlite:////var/lib/nsstuck/nsstuck.db"
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]
    assert one(docs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}


def test_postgres_is_migrated_by_a_hook_before_install_and_upgrade(render: Render) -> None:
    docs = render(POSTGRES)
    assert "initContainers" not in _pod(docs)
    job = one(docs, "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert migrate["args"] == ["db", "upgrade"]
    # a hook runs before the release's Secret exists: the URL comes in a hook Secret made before the Job
    hook_secret = one(docs, "Secret", "nsstuck-migrations")
    assert int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(annotations["helm.sh/hook-weight"])
    assert _env(migrate)["NSSTUCK_DATABASE_URL"] == {
        "secretKeyRef": {"name": "nsstuck-migrations", "key": "NSSTUCK_DATABASE_URL"}
    }
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    # the Job's pod is not one of the Service's
    selector = one(docs, "Service")["spec"]["selector"]
    assert not selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()


def _references(obj: Any) -> str:
    return yaml.safe_dump(obj)


def test_two_roles_the_migration_credentials_reach_the_job_only(render: Render) -> None:
    """README "Database roles": the owner's URL goes to the migration Job, in the hook Secret; the release
    Secret and the pods of `nsstuck serve` never hold or name it."""
    docs = render(TWO_ROLES)
    hook = one(docs, "Secret", "nsstuck-migrations")
    assert sorted(hook["data"]) == ["NSSTUCK_DATABASE_URL", "NSSTUCK_MIGRATION_DATABASE_URL"]
    assert base64.b64decode(hook["data"]["NSSTUCK_MIGRATION_DATABASE_URL"]).decode() == OWNER_URL
    [migrate] = one(docs, "Job")["spec"]["template"]["spec"]["containers"]
    env = _env(migrate)
    assert env["NSSTUCK_MIGRATION_DATABASE_URL"] == {
        "secretKeyRef": {"name": "nsstuck-migrations", "key": "NSSTUCK_MIGRATION_DATABASE_URL"}
    }
    assert env["NSSTUCK_DATABASE_URL"] == {
        "secretKeyRef": {"name": "nsstuck-migrations", "key": "NSSTUCK_DATABASE_URL"}
    }
    assert env["NSSTUCK_DATABASE_RUNTIME_ROLE"] == "nsstuck_runtime"

    release = one(docs, "Secret", "nsstuck")
    assert sorted(release["data"]) == ["NSSTUCK_DATABASE_URL"]
    assert base64.b64decode(release["data"]["NSSTUCK_DATABASE_URL"]).decode() == POSTGRES["database"]["url"]
    pod = _references(one(docs, "Deployment"))
    assert "MIGRATION" not in pod
    assert "nsstuck-migrations" not in pod
    assert "RUNTIME_ROLE" not in pod
    # the owner's password: in the hook Secret (base64) and nowhere else
    rendered = yaml.safe_dump_all(d for d in docs if d is not hook)
    assert "owner-pw-7d1e" not in rendered
    assert base64.b64encode(OWNER_URL.encode()).decode() not in rendered


def test_two_roles_from_existing_secrets(render: Render) -> None:
    values = {
        "database": {
            "existingSecret": "team-db",
            "existingSecretKey": "url",
            "migrationExistingSecret": "team-db-owner",
            "migrationExistingSecretKey": "owner-url",
        },
        "replicaCount": 2,
    }
    docs = render(values)
    assert not find(docs, "Secret"), "the chart makes no Secret when existing ones are named"
    [migrate] = one(docs, "Job")["spec"]["template"]["spec"]["containers"]
    env = _env(migrate)
    assert env["NSSTUCK_MIGRATION_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db-owner", "key": "owner-url"}}
    assert env["NSSTUCK_DATABASE_URL"] == {"secretKeyRef": {"name": "team-db", "key": "url"}}
    assert "NSSTUCK_DATABASE_RUNTIME_ROLE" not in env  # the runtime URL's user
    assert "team-db-owner" not in _references(one(docs, "Deployment"))
    # a migration URL in values beside a runtime URL in an existing Secret: the hook Secret holds it alone
    mixed = render({"database": {"existingSecret": "team-db", "migrationUrl": OWNER_URL}})
    assert sorted(one(mixed, "Secret", "nsstuck-migrations")["data"]) == ["NSSTUCK_MIGRATION_DATABASE_URL"]
    [migrate] = one(mixed, "Job")["spec"]["template"]["spec"]["containers"]
    assert _env(migrate)["NSSTUCK_DATABASE_URL"]["secretKeyRef"]["name"] == "team-db"


def test_one_role_as_before(render: Render) -> None:
    """No migration credentials: the Job migrates with the runtime URL, nothing else is added."""
    docs = render(POSTGRES)
    [migrate] = one(docs, "Job")["spec"]["template"]["spec"]["containers"]
    assert list(_env(migrate)) == ["NSSTUCK_DATABASE_URL"]
    assert sorted(one(docs, "Secret", "nsstuck-migrations")["data"]) == ["NSSTUCK_DATABASE_URL"]


def test_the_notes_say_when_one_role_owns_the_audit_tables(helm: str) -> None:
    def notes(*sets: str) -> str:
        command = [helm, "install", "nsstuck", str(CHART), "-n", "platform", "--dry-run=client"]
        for value in sets:
            command += ["--set", value]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]

    one_role = "one database role migrates and runs nsstuck"
    assert one_role in notes("database.url=postgresql://app:pw@db/nsstuck")
    assert one_role not in notes("database.url=postgresql://app:pw@db/nsstuck", f"database.migrationUrl={OWNER_URL}")
    assert one_role not in notes()  # SQLite: no roles (its own note says what it lacks)


def test_a_database_that_is_neither_postgres_nor_sqlite_is_refused(render: Render) -> None:
    with pytest.raises(HelmError, match="supports PostgreSQL"):
        render({"database": {"url": "mysql://x@y/z"}})


# -- production ------------------------------------------------------------------------------------


def test_production_values(render: Render) -> None:
    docs = render(None, "--values", str(PRODUCTION_VALUES))
    assert one(docs, "Deployment")["spec"]["replicas"] >= 2
    assert not find(docs, "Secret"), "production takes every secret from existing Secrets"
    env = _env(_container(docs))
    assert env["NSSTUCK_DATABASE_URL"]["secretKeyRef"]["name"] == "nsstuck-database"
    assert env["SLACK_BOT_TOKEN"]["secretKeyRef"]["name"] == "nsstuck-slack"
    # two database roles: the owner's URL for the migration Job only
    [migrate] = one(docs, "Job")["spec"]["template"]["spec"]["containers"]
    assert _env(migrate)["NSSTUCK_MIGRATION_DATABASE_URL"]["secretKeyRef"]["name"] == "nsstuck-database-migrations"
    assert "MIGRATION" not in _references(one(docs, "Deployment"))
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"  # its own port, not the Slack one (issue 36)
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert one(docs, "Job")["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    ingress = one(docs, "Ingress")
    [path] = ingress["spec"]["rules"][0]["http"]["paths"]
    assert path["path"] == "/slack/events"
    assert path["backend"]["service"]["port"] == {"name": "http"}  # never the metrics port


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"database": {"url": "postgresql://x", "existingSecret": "db"}}, "either url or existingSecret"),
        ({"database": {"migrationUrl": OWNER_URL}}, "SQLite has no roles"),
        ({"database": {"migrationExistingSecret": "owner"}}, "SQLite has no roles"),
        (
            {"database": {**POSTGRES["database"], "migrationUrl": OWNER_URL, "migrationExistingSecret": "owner"}},
            "either migrationUrl or migrationExistingSecret",
        ),
        (
            {"database": {**POSTGRES["database"], "migrationUrl": "mysql://o@h/db"}},
            "database.migrationUrl: a PostgreSQL URL",
        ),
        ({"database": {**POSTGRES["database"], "runtimeRole": "app"}}, "runtimeRole goes with database.migrationUrl"),
        (
            {"database": {**TWO_ROLES["database"], "runtimeRole": "app; DROP TABLE backups"}},
            "is not a role name",
        ),
        ({"kubeconfigs": [{"name": "a"}]}, "needs either existingSecret or content"),
        ({"kubeconfigs": [{"name": "a", "content": "one"}, {"name": "a", "content": "two"}]}, "listed twice"),
        (
            {"config": {"clusters": [{"name": "x", "kubeconfig": "/etc/nsstuck/kubeconfigs/x/kubeconfig"}]}},
            'no kubeconfigs entry is named "x"',
        ),
    ],
)
def test_values_that_cannot_work_are_refused(render: Render, values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError, match=message):
        render(values)
