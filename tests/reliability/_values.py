"""A terminating namespace whose objects carry values nsstuck must never read or keep (issues 18 and 20).

`vault` holds a Secret (canaries in `data` and `stringData`) and a ConfigMap (canaries in `data` and
`binaryData`), each with a finalizer no controller removes, so that a `remove_finalizer` remedy
targets them; a pod with canaries as environment values (a container and an init container) and a
finalizer of its own, so that it stays listed. Each of the three also carries a canary in the
annotation `kubectl apply` writes (`kubectl.kubernetes.io/last-applied-configuration`): that one is
metadata, so it does reach nsstuck, and must not be kept. Outside the namespace, a Deployment with a
canary environment value runs the backend of a webhook that intercepts nothing there, so that its
pods are read in full as a backend's pods are.

Issue 36 (snapshots keep names, not values): the pod's command line holds canaries as a flag's value
(`--stripe-key=...`), as a positional argument and inside a shell script after `-c`; its liveness
probe sends one in an HTTP header, its lifecycle hooks run one (preStop's exec command) and send one
(postStart's header); it and the namespace carry one in an annotation of their own. A Deployment in
`vault`, held by the same finalizer (so read whole) and scaled to zero, has canaries in its pod
template's arguments, environment and annotations. The backend's Deployment takes a canary flag
value too, and so does a Deployment in a namespace nothing diagnoses (`payments`), which reaches a
snapshot only as one of the cluster's workloads (controller attribution). The flag names stay: they
are what the catalogue matches.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.kubeapi import Emulator, Journaled
from tests.fakes.kubeapi.scenarios import Api, base_cluster, run_for

NAMESPACE = "vault"
BACKEND_NAMESPACE = "vault-backend"
OTHER_NAMESPACE = "payments"  # a Deployment no diagnosis is about, but every one lists (controller attribution)
FINALIZER = "orphans.invalid/hold"  # no workload's name, label or image says "orphans"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# a request for Secrets or ConfigMaps, one or a list, in a namespace or cluster-wide
VALUE_PATH = re.compile(r"^/api/v1/(namespaces/[^/]+/)?(secrets|configmaps)(/|$)")


def _value(kind: str) -> str:
    return f"canary-{kind}-{secrets.token_hex(12)}"


@dataclass(frozen=True)
class ValueCanaries:
    secret_data: str = field(default_factory=lambda: _value("secretdata"))
    secret_string_data: str = field(default_factory=lambda: _value("secretstringdata"))
    secret_applied: str = field(default_factory=lambda: _value("secretapplied"))
    configmap_data: str = field(default_factory=lambda: _value("configmapdata"))
    configmap_binary: str = field(default_factory=lambda: _value("configmapbinary"))
    configmap_applied: str = field(default_factory=lambda: _value("configmapapplied"))
    pod_env: str = field(default_factory=lambda: _value("podenv"))
    init_env: str = field(default_factory=lambda: _value("initenv"))
    pod_applied: str = field(default_factory=lambda: _value("podapplied"))
    backend_env: str = field(default_factory=lambda: _value("backendenv"))
    # issue 36: command lines, probes, hooks, annotations, templates, another namespace's Deployment
    pod_flag: str = field(default_factory=lambda: _value("podflag"))
    pod_positional: str = field(default_factory=lambda: _value("podpositional"))
    pod_command: str = field(default_factory=lambda: _value("podcommand"))
    probe_header: str = field(default_factory=lambda: _value("probeheader"))
    lifecycle_command: str = field(default_factory=lambda: _value("lifecyclecommand"))
    lifecycle_header: str = field(default_factory=lambda: _value("lifecycleheader"))
    pod_annotation: str = field(default_factory=lambda: _value("podannotation"))
    namespace_annotation: str = field(default_factory=lambda: _value("namespaceannotation"))
    template_flag: str = field(default_factory=lambda: _value("templateflag"))
    template_env: str = field(default_factory=lambda: _value("templateenv"))
    template_annotation: str = field(default_factory=lambda: _value("templateannotation"))
    backend_flag: str = field(default_factory=lambda: _value("backendflag"))
    other_flag: str = field(default_factory=lambda: _value("otherflag"))
    # issue 37: a bearer token in a controller's log line that names a blocking object (quoted, redacted)
    controller_log: str = field(default_factory=lambda: _value("controllerlog"))

    def values(self) -> dict[str, str]:
        return dict(vars(self))

    def needles(self) -> dict[str, tuple[str, ...]]:
        """Per canary: itself, its base64 (how a Secret's data travels), and each half of its random part."""
        out = {}
        for name, value in self.values().items():
            random = value.rsplit("-", 1)[1]
            out[name] = (value, base64.b64encode(value.encode()).decode(), random[:12], random[12:])
        return out

    def found_in(self, texts: dict[str, str]) -> list[str]:
        """`<canary> in <surface>: …excerpt…` for every canary found anywhere."""
        found = []
        for name, needles in self.needles().items():
            for needle in needles:
                hit = next(((where, text) for where, text in texts.items() if needle in text), None)
                if hit is not None:
                    where, text = hit
                    at = text.find(needle)
                    excerpt = text[max(0, at - 100) : at + len(needle) + 40].replace("\n", "\\n")
                    found.append(f"{name} ({needle}) in {where}: …{excerpt}…")
                    break
        return found


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _applied(obj: dict[str, Any], canary: str) -> str:
    """What `kubectl apply` writes in its annotation: the object it applied (here, with a canary)."""
    return json.dumps({**obj, "metadata": {"name": obj["metadata"]["name"]}, "canary": canary}, sort_keys=True)


def build_vault(emu: Emulator, canaries: ValueCanaries, *, nodes: bool = True) -> None:
    """The namespace `vault`, deleted and stuck on its finalizers, and its webhook backend outside it.

    The cluster deletes a namespace's content all at once (before OrderedNamespaceDeletion): a pod
    that stays does not keep the Secret and the ConfigMap from being marked for deletion."""
    emu.options["ordered_namespace_deletion"] = False
    api = Api(emu)
    if nodes:
        base_cluster(api)
    run_for(emu, 10)
    api.namespace(BACKEND_NAMESPACE)
    container = {
        "name": "guard",
        "image": "example.com/guard:1.0",
        "args": ["--listen=:9443", f"--stripe-key={canaries.backend_flag}"],
        "env": [{"name": "TOKEN", "value": canaries.backend_env}],
    }
    api.create(
        f"/apis/apps/v1/namespaces/{BACKEND_NAMESPACE}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "guard", "labels": {"app": "guard"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "guard"}},
                "template": {
                    "metadata": {"labels": {"app": "guard"}},
                    "spec": {"nodeName": "node-1", "containers": [container]},
                },
            },
        },
    )
    api.service(BACKEND_NAMESPACE, "guard", selector={"app": "guard"}, ports=[{"port": 443, "targetPort": 9443}])
    api.create(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "guard"},
            "webhooks": [
                {
                    "name": "guard.example.com",
                    "clientConfig": {"service": {"namespace": BACKEND_NAMESPACE, "name": "guard"}},
                    # creates of widgets only: nothing in `vault` is held by it
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": ["example.com"],
                            "apiVersions": ["v1"],
                            "resources": ["widgets"],
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )
    _other_deployment(api, canaries)
    api.namespace(NAMESPACE, annotations={"example.com/owner-token": canaries.namespace_annotation})
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db-password", "finalizers": [FINALIZER], "labels": {"app": "db"}},
        "type": "Opaque",
        "data": {"password": _b64(canaries.secret_data)},
        "stringData": {"plain": canaries.secret_string_data},
    }
    secret["metadata"]["annotations"] = {LAST_APPLIED: _applied(secret, canaries.secret_applied)}
    api.create(f"/api/v1/namespaces/{NAMESPACE}/secrets", secret)
    configmap: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "finalizers": [FINALIZER]},
        "data": {"url": f"postgres://app:{canaries.configmap_data}@db/app"},
        "binaryData": {"blob": _b64(canaries.configmap_binary)},
    }
    configmap["metadata"]["annotations"] = {LAST_APPLIED: _applied(configmap, canaries.configmap_applied)}
    api.create(f"/api/v1/namespaces/{NAMESPACE}/configmaps", configmap)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "finalizers": [FINALIZER], "labels": {"app": "app"}},
        "spec": {
            "nodeName": "node-2",
            "initContainers": [
                {"name": "init", "image": "example.com/init:1.0", "env": [{"name": "SEED", "value": canaries.init_env}]}
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "example.com/app:1.0",
                    "command": ["/bin/sh", "-c", f"exec /app --password {canaries.pod_command}"],
                    "args": [f"--stripe-key={canaries.pod_flag}", "--verbose", "-v", canaries.pod_positional],
                    "env": [
                        {"name": "API_KEY", "value": canaries.pod_env},
                        {
                            "name": "DB_PASSWORD",
                            "valueFrom": {"secretKeyRef": {"name": "db-password", "key": "password"}},
                        },
                    ],
                    "livenessProbe": {
                        "httpGet": {
                            "path": "/healthz",
                            "port": 8080,
                            "httpHeaders": [{"name": "Authorization", "value": f"Bearer {canaries.probe_header}"}],
                        }
                    },
                    "lifecycle": {
                        "preStop": {"exec": {"command": ["/bin/sh", "-c", f"notify {canaries.lifecycle_command}"]}},
                        "postStart": {
                            "httpGet": {
                                "path": "/started",
                                "port": 8080,
                                "httpHeaders": [{"name": "X-Token", "value": canaries.lifecycle_header}],
                            }
                        },
                    },
                }
            ],
        },
    }
    pod["metadata"]["annotations"] = {
        LAST_APPLIED: _applied(pod, canaries.pod_applied),
        "example.com/api-key": canaries.pod_annotation,
    }
    api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    template_container = {
        "name": "worker",
        "image": "example.com/worker:1.0",
        "args": [f"--stripe-key={canaries.template_flag}"],
        "env": [{"name": "SEED", "value": canaries.template_env}],
    }
    api.create(
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "worker", "labels": {"app": "worker"}, "finalizers": [FINALIZER]},
            "spec": {
                "replicas": 0,  # no pod of its own: the namespace's one pod stays the one above
                "selector": {"matchLabels": {"app": "worker"}},
                "template": {
                    "metadata": {
                        "labels": {"app": "worker"},
                        "annotations": {"example.com/seed": canaries.template_annotation},
                    },
                    "spec": {"containers": [template_container]},
                },
            },
        },
    )
    run_for(emu, 30)
    api.delete_namespace(NAMESPACE)
    run_for(emu, 120, step=30)


def _other_deployment(api: Api, canaries: ValueCanaries) -> None:
    """`payments/billing`: a Deployment with a canary flag value, in a namespace nothing diagnoses."""
    api.namespace(OTHER_NAMESPACE)
    container = {"name": "billing", "image": "example.com/billing:2.0", "args": [f"--stripe-key={canaries.other_flag}"]}
    api.create(
        f"/apis/apps/v1/namespaces/{OTHER_NAMESPACE}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "billing", "labels": {"app": "billing"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "billing"}},
                "template": {
                    "metadata": {"labels": {"app": "billing"}},
                    "spec": {"nodeName": "node-1", "containers": [container]},
                },
            },
        },
    )


def value_requests(journal: Iterable[Journaled]) -> list[Journaled]:
    """The requests for Secrets and ConfigMaps among those of a journal."""
    return [entry for entry in journal if VALUE_PATH.match(entry.path)]
