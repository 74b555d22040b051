"""The chart's values schema, its opt-in NetworkPolicy, `helm test`, the environment and volumes an
exec credential plugin needs, the log settings, and Chart.yaml's metadata (issue 24 §4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, REPO, HelmError, Render, find, helm_template, one

PLUGIN = {
    "extraEnvFrom": [{"secretRef": {"name": "nsstuck-aws"}}],
    "extraEnv": [{"name": "AWS_ROLE_ARN", "valueFrom": {"secretKeyRef": {"name": "nsstuck-aws", "key": "role"}}}],
    "extraVolumes": [{"name": "plugins", "emptyDir": {"sizeLimit": "200Mi"}}],
    "extraVolumeMounts": [{"name": "plugins", "mountPath": "/opt/plugins", "readOnly": True}],
    "extraInitContainers": [
        {
            "name": "kubelogin",
            "image": "ghcr.io/int128/kubelogin:v1.31.1",
            "command": ["cp", "/ko-app/kubelogin", "/opt/plugins/kubelogin"],
            "volumeMounts": [{"name": "plugins", "mountPath": "/opt/plugins"}],
        }
    ],
}
NETWORK = {
    "networkPolicy": {
        "enabled": True,
        "apiServers": {"cidrs": ["10.0.0.1/32", "192.168.10.0/24"], "ports": [6443]},
        "database": {"cidrs": ["10.20.0.0/16"], "ports": [5432]},
        "ingressFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}],
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
    }
}


def _deployment_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = _deployment_pod(docs)["containers"]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


@pytest.mark.parametrize("variant", ["plugin", "network", "sqlite-and-plugin"])
def test_the_new_values_render_valid_kubernetes(helm: str, tmp_path: Path, variant: str) -> None:
    values = {
        "plugin": {**PLUGIN, "database": {"url": "postgresql+psycopg://u:p@db:5432/n"}},
        "network": {**NETWORK, "logging": {"level": "DEBUG", "format": "json"}},
        "sqlite-and-plugin": {**PLUGIN, **NETWORK},
    }[variant]
    manifests = helm_template(helm, values=values, tmp=tmp_path)
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate-manifests")],
        input=manifests,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problems" in result.stdout


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"logging": {"format": "yaml"}}, "at '/logging/format': value must be one of 'text', 'json'"),
        ({"logging": {"level": "verbose"}}, "at '/logging/level': value must be one of"),
        ({"replicaCount": 0}, "at '/replicaCount': minimum: got 0, want 1"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
        ({"networkPolicy": {"enabled": "yes"}}, "at '/networkPolicy/enabled': got string, want boolean"),
        ({"networkPolicy": {"slack": {"cidrs": ["slack.com"]}}}, "at '/networkPolicy/slack/cidrs/0'"),
        ({"networkPolicy": {"database": {"ports": [70000]}}}, "at '/networkPolicy/database/ports/0'"),
        ({"slack": {"botToken": 42}}, "at '/slack/botToken': got number, want string"),
        ({"kubeconfigs": [{"name": "prod", "contents": "x"}]}, "at '/kubeconfigs/0': additional properties 'contents'"),
        ({"extraEnv": [{"value": "x"}]}, "at '/extraEnv/0': missing property 'name'"),
        ({"extraEnv": {"A": "b"}}, "at '/extraEnv': got object, want array"),
        ({"extraVolumeMounts": [{"name": "plugins", "mountPath": "opt"}]}, "at '/extraVolumeMounts/0/mountPath'"),
        ({"env": {"NOT A NAME": "x"}}, "invalid propertyName 'NOT A NAME'"),
    ],
)
def test_bad_values_fail_at_template_time_saying_where(render: Render, values: dict[str, Any], said: str) -> None:
    with pytest.raises(HelmError) as refused:
        render(values)
    assert "values don't meet the specifications of the schema" in str(refused.value)
    assert said in str(refused.value)


def test_every_default_value_has_its_place_in_the_schema() -> None:
    """Each key of values.yaml (and of values-production.yaml) is described by the schema: a key
    added to the values without its schema would be refused by `helm install` as unknown."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    for path in ("values.yaml", "values-production.yaml"):
        values = yaml.safe_load((CHART / path).read_text())
        missing = sorted(set(values) - set(schema["properties"]))
        assert not missing, (path, missing)
    assert schema["additionalProperties"] is False


def test_an_exec_plugin_gets_its_environment_from_a_secret_and_its_binary_from_an_init_container(
    render: Render,
) -> None:
    docs = render(PLUGIN)
    pod = _deployment_pod(docs)
    container = _container(docs)
    assert container["envFrom"] == [{"secretRef": {"name": "nsstuck-aws"}}]
    assert _env(container)["AWS_ROLE_ARN"] == {"secretKeyRef": {"name": "nsstuck-aws", "key": "role"}}
    assert {"name": "plugins", "mountPath": "/opt/plugins", "readOnly": True} in container["volumeMounts"]
    assert {"name": "plugins", "emptyDir": {"sizeLimit": "200Mi"}} in pod["volumes"]
    # the plugin's init container first, then the SQLite migration (which needs nothing of it)
    assert [c["name"] for c in pod["initContainers"]] == ["kubelogin", "migrate"]
    # neither the Secret's name nor the mounts reach the migration Job (PostgreSQL)
    job = one(render({**PLUGIN, "database": {"url": "postgresql+psycopg://u:p@db:5432/n"}}), "Job")
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert "envFrom" not in migrate
    assert "AWS_ROLE_ARN" not in _env(migrate)


def test_log_level_and_format_reach_the_container(render: Render) -> None:
    assert {"NSSTUCK_LOG_LEVEL": "INFO", "NSSTUCK_LOG_FORMAT": "text"}.items() <= _env(_container(render())).items()
    env = _env(_container(render({"logging": {"level": "DEBUG", "format": "json"}})))
    assert (env["NSSTUCK_LOG_LEVEL"], env["NSSTUCK_LOG_FORMAT"]) == ("DEBUG", "json")


def test_the_network_policy_is_opt_in_and_lets_through_only_dns_and_the_given_cidrs(render: Render) -> None:
    assert not find(render(), "NetworkPolicy")
    docs = render(NETWORK)
    policy = one(docs, "NetworkPolicy")["spec"]
    # it covers the server's pods and the migration Job's, not the `helm test` pod
    selector = policy["podSelector"]["matchLabels"]
    server_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= server_labels.items()
    test_pod = one(render(NETWORK, "--show-only", "templates/tests/test-connection.yaml"), "Pod")
    assert not selector.items() <= test_pod["metadata"]["labels"].items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    ingress, metrics = policy["ingress"]
    assert ingress["ports"] == [{"port": 3000, "protocol": "TCP"}]
    assert ingress["from"][0] == NETWORK["networkPolicy"]["ingressFrom"][0]
    assert ingress["from"][1]["podSelector"]["matchLabels"].items() <= test_pod["metadata"]["labels"].items()
    # /metrics on its own port, from the monitoring peers only: the ingress controller cannot reach it
    assert metrics == {"ports": [{"port": 9090, "protocol": "TCP"}], "from": NETWORK["networkPolicy"]["metricsFrom"]}
    dns, api, database, slack = policy["egress"]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert api == {
        "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}, {"ipBlock": {"cidr": "192.168.10.0/24"}}],
        "ports": [{"port": 6443, "protocol": "TCP"}],
    }
    assert database["to"] == [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    assert slack == {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443, "protocol": "TCP"}]}


def test_helm_test_asks_the_service_for_health_and_readiness(render: Render) -> None:
    docs = render(None, "--show-only", "templates/tests/test-connection.yaml")
    pod = one(docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [container] = pod["spec"]["containers"]
    service = one(render(), "Service")
    script = container["args"][0]
    assert f'"http://{service["metadata"]["name"]}:{service["spec"]["ports"][0]["port"]}"' in script
    assert '("/healthz", "/readyz")' in script
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # the probe's script is valid Python that exits 1 when the Service does not answer
    result = subprocess.run(
        [sys.executable, "-c", script.replace(service["metadata"]["name"], "127.0.0.1").replace(":3000", ":1")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "/healthz failed:" in result.stdout
    assert find(render(), "Pod")
    assert not find(render({"tests": {"enabled": False}}), "Pod")


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["maintainers"]
    assert chart["annotations"]["artifacthub.io/license"] == "Apache-2.0"
    assert "apache-2.0" in (REPO / "pyproject.toml").read_text().lower()
    [image] = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert image["image"] == f"nsstuck:{chart['appVersion']}"
