"""The chart's namespace-delete admission webhook (issue 38 §6), behind `admission.enabled`: the
ValidatingWebhookConfiguration's fields that decide whether a delete can ever be blocked, the Service,
port and TLS files of `nsstuck serve`, both certificate paths (cert-manager's, and the chart's own CA
kept across upgrades by `lookup`, shown against the Kubernetes emulator with `helm template
--dry-run=server`), the NetworkPolicy rule, the schema's refusals, and the `helm test` hook's command run
against a running `nsstuck admission serve` (the emulator runs no pods).
"""

from __future__ import annotations

import base64
import ipaddress
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from bot.settings import AppConfig
from tests.admission._endpoint import Endpoint, endpoint
from tests.chart.conftest import CHART, HelmError, Render, find, helm_template, one
from tests.chart.test_chart import _validate
from tests.fakes.kubeapi import Emulator, FakeClock
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import Api, apply_scenario

ON: dict[str, Any] = {"admission": {"enabled": True}}
CERT_MANAGER: dict[str, Any] = {"admission": {"enabled": True, "certManager": True}}
SERVICE = "nsstuck-admission"  # release "nsstuck", namespace "platform" (tests/chart/conftest.py)
DNS_NAMES = [SERVICE, f"{SERVICE}.platform", f"{SERVICE}.platform.svc", f"{SERVICE}.platform.svc.cluster.local"]
TEST_POD = "templates/tests/test-admission.yaml"


def _webhook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [webhook] = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
    hook: dict[str, Any] = webhook
    return hook


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(one(docs, "ConfigMap")["data"]["nsstuck.yaml"])
    return config


def _signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    cert, ca = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(ca_pem)
    key = ca.public_key()
    assert isinstance(key, rsa.RSAPublicKey)
    assert cert.signature_hash_algorithm is not None
    try:
        key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    except Exception:
        return False
    return cert.issuer == ca.subject


# -- off by default --------------------------------------------------------------------------------


def test_off_by_default_the_chart_renders_none_of_it(render: Render) -> None:
    docs = render({"networkPolicy": {"enabled": True}})
    assert not find(docs, "ValidatingWebhookConfiguration")
    assert not find(docs, "Certificate")
    assert not find(docs, "Issuer")
    assert not find(docs, "Service", SERVICE)
    assert not [d for d in find(docs, "Secret") if "admission" in d["metadata"]["name"]]
    container = _container(docs)
    assert [p["name"] for p in container["ports"]] == ["http", "metrics"]
    assert not [name for name in _env(container) if name.startswith("NSSTUCK_ADMISSION")]
    assert "admission" not in yaml.safe_dump(one(docs, "Deployment"))
    assert "admission" not in _config(docs)["clusters"][0]
    ports = [p["port"] for rule in one(docs, "NetworkPolicy")["spec"]["ingress"] for p in rule["ports"]]
    assert ports == [3000, 9090]
    assert [p["metadata"]["name"] for p in find(docs, "Pod")] == ["nsstuck-test"]


# -- the webhook configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("values", [ON, CERT_MANAGER], ids=["chart-ca", "cert-manager"])
def test_the_webhook_can_never_block_a_delete_by_failing(render: Render, values: dict[str, Any]) -> None:
    docs = render(values)
    configuration = one(docs, "ValidatingWebhookConfiguration")
    webhook = _webhook(docs)
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["sideEffects"] == "NoneOnDryRun"
    assert webhook["matchPolicy"] == "Equivalent"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["timeoutSeconds"] == 3 + 2  # the default budget + 2
    assert webhook["rules"] == [
        {
            "operations": ["DELETE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["namespaces"],
            "scope": "Cluster",
        }
    ]
    # for a Namespace the selector is matched against the namespace's own labels
    assert webhook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kube-public", "kube-node-lease", "platform"],
            }
        ]
    }
    # the registered cluster nsstuck runs in (values.yaml: `local`, in_cluster), on the webhook's Service
    assert webhook["clientConfig"]["service"] == {
        "namespace": "platform",
        "name": SERVICE,
        "port": 443,
        "path": "/admission/namespaces/local",
    }
    service = one(docs, "Service", SERVICE)["spec"]
    assert service["type"] == "ClusterIP"
    assert service["ports"] == [{"name": "admission", "port": 443, "targetPort": "admission", "protocol": "TCP"}]
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= pod_labels.items()
    assert configuration["metadata"]["name"] == "nsstuck-admission"


def test_budget_mode_channel_and_exclusions_reach_the_webhook_and_the_config(render: Render) -> None:
    values = {
        "admission": {
            "enabled": True,
            "budgetSeconds": 28,
            "mode": "deny",
            "channel": "C0456EFGH",
            "excludeNamespaces": ["argocd", "kube-system"],
        },
        "config": {"clusters": [{"name": "local", "in_cluster": True, "channels": ["C0123ABCD"]}]},
    }
    docs = render(values)
    webhook = _webhook(docs)
    assert webhook["timeoutSeconds"] == 30  # the most the API server allows
    excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert excluded == ["kube-system", "kube-public", "kube-node-lease", "platform", "argocd"]
    config = AppConfig.model_validate(_config(docs))
    [local] = config.clusters
    assert (local.admission.mode, local.admission.budget_seconds, local.admission.channel) == ("deny", 28, "C0456EFGH")
    assert local.admission_channel == "C0456EFGH"


def test_with_several_clusters_the_webhook_answers_as_the_one_named(render: Render) -> None:
    clusters = [
        {"name": "prod-eu", "kubeconfig": "/etc/nsstuck/kubeconfigs/prod-eu/kubeconfig"},
        {"name": "here", "in_cluster": True},
    ]
    kubeconfigs = [{"name": "prod-eu", "content": "apiVersion: v1\nkind: Config\n"}]
    base = {"config": {"clusters": clusters}, "kubeconfigs": kubeconfigs}
    # by default the in_cluster one: the cluster the chart (and so the webhook configuration) is installed in
    docs = render({**base, **ON})
    assert _webhook(docs)["clientConfig"]["service"]["path"] == "/admission/namespaces/here"
    config = _config(docs)
    assert [("admission" in c) for c in config["clusters"]] == [False, True]
    named = render({**base, "admission": {"enabled": True, "cluster": "prod-eu"}})
    assert _webhook(named)["clientConfig"]["service"]["path"] == "/admission/namespaces/prod-eu"
    test_pod = one(render({**base, **ON}, "--show-only", TEST_POD), "Pod")
    assert "/admission/namespaces/here" in " ".join(test_pod["spec"]["containers"][0]["args"][1:])


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (
            {"admission": {"enabled": True, "cluster": "nope"}},
            'admission.cluster "nope": no config.clusters entry has that name (registered: local)',
        ),
        (
            {"admission": {"enabled": True}, "config": {"clusters": [{"name": "a", "kubeconfig": "/k"}]}},
            "set admission.cluster to the config.clusters entry of the cluster this chart is installed in",
        ),
        (
            {
                "admission": {"enabled": True},
                "config": {"clusters": [{"name": "local", "in_cluster": True, "admission": {"budget_seconds": 9}}]},
            },
            "set admission.mode and admission.budgetSeconds of the chart, not the cluster's",
        ),
    ],
    ids=["unknown-cluster", "no-in-cluster-entry", "budget-in-config"],
)
def test_what_cannot_work_is_refused_in_one_line(render: Render, values: dict[str, Any], said: str) -> None:
    with pytest.raises(HelmError) as refused:
        render(values)
    assert said in str(refused.value)


# -- the pod ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [ON, CERT_MANAGER], ids=["chart-ca", "cert-manager"])
def test_serve_gets_the_port_and_the_mounted_tls_files(render: Render, values: dict[str, Any]) -> None:
    docs = render({**values, "admission": {**values["admission"], "port": 9443}})
    container = _container(docs)
    assert {"name": "admission", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    env = _env(container)
    assert env["NSSTUCK_ADMISSION_PORT"] == "9443"
    assert env["NSSTUCK_ADMISSION_CERT"] == "/etc/nsstuck/admission/tls.crt"
    assert env["NSSTUCK_ADMISSION_KEY"] == "/etc/nsstuck/admission/tls.key"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "admission-tls")
    assert mount == {"name": "admission-tls", "mountPath": "/etc/nsstuck/admission", "readOnly": True}
    assert "subPath" not in mount  # a subPath mount would never see a rotated certificate
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    volume = next(v for v in volumes if v["name"] == "admission-tls")["secret"]
    expected = "nsstuck-admission-cert" if values["admission"].get("certManager") else "nsstuck-admission-tls"
    assert volume["secretName"] == expected
    assert volume["items"] == [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]


# -- the certificate -------------------------------------------------------------------------------


def test_the_chart_makes_a_ca_and_a_certificate_for_the_service_names(render: Render) -> None:
    docs = render(ON)
    secret = one(docs, "Secret", "nsstuck-admission-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert sorted(data) == ["ca.crt", "tls.crt", "tls.key"]  # the CA's key is not kept
    # the caBundle is the Secret's CA, and the CA signed the serving certificate
    assert base64.b64decode(_webhook(docs)["clientConfig"]["caBundle"]) == data["ca.crt"]
    assert _signed_by(data["tls.crt"], data["ca.crt"])
    serving = x509.load_pem_x509_certificate(data["tls.crt"])
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == DNS_NAMES
    assert "cert-manager.io/inject-ca-from" not in (one(docs, "ValidatingWebhookConfiguration")["metadata"])
    assert not find(docs, "Certificate")
    # `helm template` (and Argo CD) cannot look the Secret up: each render makes another CA (docs/admission.md)
    again = render(ON)
    assert _webhook(again)["clientConfig"]["caBundle"] != _webhook(docs)["clientConfig"]["caBundle"]


def test_cert_manager_issues_the_certificate_and_injects_its_ca(render: Render) -> None:
    docs = render(CERT_MANAGER)
    certificate = one(docs, "Certificate", "nsstuck-admission")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["spec"]["secretName"] == "nsstuck-admission-cert"
    assert certificate["spec"]["dnsNames"] == DNS_NAMES
    issuer = one(docs, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["issuerRef"] == {
        "name": issuer["metadata"]["name"],
        "kind": "Issuer",
        "group": "cert-manager.io",
    }
    configuration = one(docs, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "platform/nsstuck-admission"}
    assert "caBundle" not in _webhook(docs)["clientConfig"]  # cert-manager's CA injector fills it in
    assert not [d for d in find(docs, "Secret") if "admission" in d["metadata"]["name"]]
    # an issuer of the user's: no Issuer of the chart's
    named = render(
        {"admission": {"enabled": True, "certManager": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}
    )
    assert not find(named, "Issuer")
    ref = one(named, "Certificate")["spec"]["issuerRef"]
    assert ref == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}


def test_an_upgrade_keeps_the_ca_it_finds_in_the_cluster(helm: str, tmp_path: Path) -> None:
    """`lookup` against a real API (the emulator, through `helm template --dry-run=server`): the Secret an
    earlier install made is kept, and the caBundle is its CA; without it a new CA is made."""
    ca = trustme.CA()
    issued = ca.issue_cert(*DNS_NAMES)
    stored = {
        "tls.crt": base64.b64encode(issued.cert_chain_pems[0].bytes()).decode(),
        "tls.key": base64.b64encode(issued.private_key_pem.bytes()).decode(),
        "ca.crt": base64.b64encode(ca.cert_pem.bytes()).decode(),
    }
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        emu.settle()
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        http = KubeHTTP(emu.url, emu.admin_token)
        http.post("/api/v1/namespaces", {"metadata": {"name": "platform"}})
        server = ("--dry-run=server", "--kubeconfig", str(kubeconfig))
        first = [d for d in yaml.safe_load_all(helm_template(helm, *server, values=ON, tmp=tmp_path)) if d]
        assert base64.b64decode(_webhook(first)["clientConfig"]["caBundle"]) != ca.cert_pem.bytes()
        http.post(
            "/api/v1/namespaces/platform/secrets",
            {
                "metadata": {
                    "name": "nsstuck-admission-tls",
                    # what Helm marks its own objects with, as an earlier install left it
                    "labels": {"app.kubernetes.io/managed-by": "Helm"},
                    "annotations": {
                        "meta.helm.sh/release-name": "nsstuck",
                        "meta.helm.sh/release-namespace": "platform",
                    },
                },
                "type": "kubernetes.io/tls",
                "data": stored,
            },
        )
        upgrade = [d for d in yaml.safe_load_all(helm_template(helm, *server, values=ON, tmp=tmp_path)) if d]
    assert one(upgrade, "Secret", "nsstuck-admission-tls")["data"] == stored
    assert _webhook(upgrade)["clientConfig"]["caBundle"] == stored["ca.crt"]


# -- the network policy ----------------------------------------------------------------------------


def test_the_network_policy_lets_the_api_server_in_on_the_admission_port(render: Render) -> None:
    network = {"enabled": True, "ingressFrom": [{"podSelector": {"matchLabels": {"app": "ingress"}}}]}
    docs = render({**ON, "networkPolicy": network})
    rules = one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert rules[2] == {"ports": [{"port": 8443, "protocol": "TCP"}]}  # default: from anywhere, on that port only
    control_plane = {"ipBlock": {"cidr": "10.0.0.0/24"}}
    narrowed = render({**ON, "networkPolicy": {**network, "admissionFrom": [control_plane]}})
    rule = one(narrowed, "NetworkPolicy")["spec"]["ingress"][2]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert rule["from"][0] == control_plane
    # and the `helm test` pod, which calls the webhook
    test_pod = one(render(ON, "--show-only", TEST_POD), "Pod")
    assert rule["from"][1]["podSelector"]["matchLabels"].items() <= test_pod["metadata"]["labels"].items()


# -- validity and the schema -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {**ON, "networkPolicy": {"enabled": True}},
        {"admission": {"enabled": True, "certManager": True, "mode": "deny", "budgetSeconds": 1}},
    ],
    ids=["chart-ca", "cert-manager"],
)
def test_every_admission_manifest_is_valid_kubernetes(helm: str, tmp_path: Path, values: dict[str, Any]) -> None:
    result = _validate(helm_template(helm, values=values, tmp=tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problems" in result.stdout
    assert "ValidatingWebhookConfiguration" not in result.stdout  # validated, not skipped
    if values["admission"].get("certManager"):
        assert (
            "skipped Certificate/nsstuck-admission (cert-manager.io/v1: cert-manager CRD, no schema)" in result.stdout
        )
        assert "skipped Issuer/nsstuck-admission-selfsigned" in result.stdout


@pytest.mark.parametrize("certmanager", [False, True], ids=["chart-ca", "cert-manager"])
def test_helm_lint_passes_with_the_webhook(helm: str, certmanager: bool) -> None:
    result = subprocess.run(
        [
            helm, "lint", "--strict", str(CHART), "--set", "admission.enabled=true",
            "--set", f"admission.certManager={str(certmanager).lower()}",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"admission": {"budgetSeconds": 40}}, "at '/admission/budgetSeconds': maximum: got 40, want 28"),
        ({"admission": {"budgetSeconds": 0}}, "at '/admission/budgetSeconds': minimum: got 0, want 1"),
        ({"admission": {"budgetSeconds": 2.5}}, "at '/admission/budgetSeconds': got number, want integer"),
        ({"admission": {"mode": "block"}}, "at '/admission/mode': value must be one of 'warn', 'deny'"),
        ({"admission": {"enabled": "yes"}}, "at '/admission/enabled': got string, want boolean"),
        ({"admission": {"port": 3000}}, "at '/admission/port'"),
        ({"admission": {"port": 70000}}, "at '/admission/port': maximum: got 70,000, want 65,535"),
        ({"admission": {"channel": "#general"}}, "at '/admission/channel'"),
        ({"admission": {"excludeNamespaces": ["Not A Name"]}}, "at '/admission/excludeNamespaces/0'"),
        ({"admission": {"issuerRef": {"nmae": "x"}}}, "at '/admission/issuerRef': additional properties 'nmae'"),
        ({"admission": {"issuerRef": {"kind": "ClusterIssuer"}}}, "missing property 'name'"),
        ({"admission": {"budget": 3}}, "at '/admission': additional properties 'budget' not allowed"),
        ({"networkPolicy": {"admissionFrom": {"ipBlock": {}}}}, "at '/networkPolicy/admissionFrom'"),
    ],
)
def test_the_schema_refuses_bad_admission_values(render: Render, values: dict[str, Any], said: str) -> None:
    with pytest.raises(HelmError) as refused:
        render(values)
    assert "values don't meet the specifications of the schema" in str(refused.value)
    assert said in str(refused.value)


# -- `helm test` -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Endpoint]]:
    """`nsstuck admission serve` for the emulator, whose namespace `platform` (the release's, which the probe
    asks about) holds a Kiali whose operator is not installed: its finalizer would hold the delete."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        api = Api(emu)
        api.crd("kiali.io", "kialis", "Kiali", version="v1alpha1")
        emu.settle()
        http = KubeHTTP(emu.url, emu.admin_token)
        http.post("/api/v1/namespaces", {"metadata": {"name": "platform"}})
        http.post(
            "/apis/kiali.io/v1alpha1/namespaces/platform/kialis",
            {
                "apiVersion": "kiali.io/v1alpha1",
                "kind": "Kiali",
                "metadata": {"name": "kiali", "finalizers": ["kiali.io/finalizer"]},
            },
        )
        directory = tmp_path_factory.mktemp("admission-probe")
        kubeconfig = emu.write_kubeconfig(directory / "kubeconfig")
        with endpoint(kubeconfig, directory, "--budget", "8") as running:
            yield emu, running


@pytest.fixture(scope="module")
def probe_pod(helm: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The `helm test` pod of the webhook, as the chart renders it (once for the module)."""
    text = helm_template(helm, "--show-only", TEST_POD, values=ON, tmp=tmp_path_factory.mktemp("probe-pod"))
    return one([d for d in yaml.safe_load_all(text) if d], "Pod")


def _probe_command(pod: dict[str, Any], url: str, ca: Path) -> list[str]:
    """The `helm test` pod's command as the chart renders it, with the endpoint's URL and CA file in place of
    the in-cluster ones, and this interpreter for the image's `python`."""
    [container] = pod["spec"]["containers"]
    command = [*container["command"], *container["args"]]
    assert command[:2] == ["python", "-c"]
    assert command[2] == (CHART / "files" / "admission-probe.py").read_text()
    options = dict(zip(command[3::2], command[4::2], strict=True))
    assert options == {
        "--url": "https://nsstuck-admission.platform.svc:443/admission/namespaces/local",
        "--ca": "/etc/nsstuck/admission-ca/ca.crt",
        "--namespace": "platform",
    }
    # the CA, and only the CA, of the webhook's Secret is what the pod mounts at --ca
    [mount] = container["volumeMounts"]
    assert mount["mountPath"] == "/etc/nsstuck/admission-ca"
    [volume] = pod["spec"]["volumes"]
    assert volume["secret"] == {"secretName": "nsstuck-admission-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["automountServiceAccountToken"] is False
    swapped = {"--url": url, "--ca": str(ca), "--namespace": options["--namespace"]}
    return [sys.executable, "-c", command[2], *[part for item in swapped.items() for part in item]]


def test_the_helm_test_command_passes_against_a_running_endpoint(
    probe_pod: dict[str, Any], served: tuple[Emulator, Endpoint], tmp_path: Path
) -> None:
    _, running = served
    ca = tmp_path / "ca.crt"
    ca.write_bytes(running.ca.cert_pem.bytes())
    result = subprocess.run(
        _probe_command(probe_pod, running.url(), ca), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "admission probe: 200, a delete of platform would be allowed"
    # the endpoint really checked the namespace: the Kiali's finalizer would hold it
    assert lines[1:] == [
        "Warning: nsstuck: orphaned_finalizer: kiali/kiali would hold it; see `nsstuck precheck platform`"
    ]
    # a dry run: the structured line of a let-through says so (the bot writes no audit entry for one)
    assert '"dry_run": true' in running.stderr()
    assert '"user": "helm-test:admission-probe"' in running.stderr()


def test_the_helm_test_command_fails_against_a_wrong_ca(
    probe_pod: dict[str, Any], served: tuple[Emulator, Endpoint], tmp_path: Path
) -> None:
    _, running = served
    other = tmp_path / "other-ca.crt"
    other.write_bytes(trustme.CA().cert_pem.bytes())
    result = subprocess.run(
        _probe_command(probe_pod, running.url(), other), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert result.stdout.startswith(f"admission probe failed: {running.url()}: ")
    assert "CERTIFICATE_VERIFY_FAILED" in result.stdout


def test_the_helm_test_command_fails_when_nothing_answers_a_review(
    probe_pod: dict[str, Any], served: tuple[Emulator, Endpoint], tmp_path: Path
) -> None:
    _, running = served
    ca = tmp_path / "ca.crt"
    ca.write_bytes(running.ca.cert_pem.bytes())
    # the TLS port answers, but not at this path: a 404 is not an answer
    wrong_path = subprocess.run(
        _probe_command(probe_pod, running.url("/admission/nowhere"), ca),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert wrong_path.returncode == 1
    assert wrong_path.stdout.startswith(f"admission probe failed: {running.url('/admission/nowhere')} answered 404")
    plain = subprocess.run(
        _probe_command(probe_pod, running.url().replace("https://", "http://"), ca),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert plain.returncode == 1
    assert "is not an https:// URL" in plain.stdout


def _self_signed() -> tuple[bytes, bytes]:
    """A serving certificate that signs itself (not a CA), as cert-manager's selfSigned Issuer makes: its
    `ca.crt` is the certificate itself. For 127.0.0.1. (PEM certificate, PEM key)"""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nsstuck-admission.platform.svc")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def test_the_helm_test_command_passes_with_a_self_signed_certificate_as_cert_managers_issuer_makes(
    probe_pod: dict[str, Any], tmp_path: Path
) -> None:
    """The cert-manager path's default: the Secret's ca.crt is the serving certificate itself, which the probe
    trusts as it is. Written over the endpoint's files (a rotation in place), it is what the endpoint serves."""
    with Emulator(clock=FakeClock(datetime.now(UTC)), seed=0) as emu:
        apply_scenario(emu, "healthy-active")
        emu.settle()
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        with endpoint(kubeconfig, tmp_path) as running:
            cert_pem, key_pem = _self_signed()
            running.key.write_bytes(key_pem)
            running.cert.write_bytes(cert_pem)
            ca = tmp_path / "ca.crt"
            ca.write_bytes(cert_pem)
            command = _probe_command(probe_pod, running.url(), ca)
            result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    # `platform` does not exist there: nothing to check, allowed without a word
    assert result.stdout.splitlines() == ["admission probe: 200, a delete of platform would be allowed"]


def test_the_notes_name_the_cluster_and_warn_of_the_chart_ca_under_helm_template(helm: str) -> None:
    def notes(*sets: str) -> str:
        command = [helm, "install", "nsstuck", str(CHART), "-n", "platform", "--dry-run=client"]
        for value in sets:
            command += ["--set", value]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]

    chart_ca = notes("admission.enabled=true", "admission.mode=deny")
    assert "The namespace-delete webhook answers as cluster local (deny mode, budget 3 s)." in chart_ca
    assert "`helm test nsstuck -n platform` sends it a dry-run review." in chart_ca
    assert "under `helm template` or Argo CD it changes on every" in chart_ca
    assert "changes on every" not in notes("admission.enabled=true", "admission.certManager=true")
    assert "namespace-delete webhook" not in notes()
