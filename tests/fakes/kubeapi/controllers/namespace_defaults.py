"""What every Active namespace gets from kube-controller-manager without anyone asking.

- the ``default`` ServiceAccount (serviceaccount controller);
- the ``kube-root-ca.crt`` ConfigMap (root-ca-cert-publisher).

Both are recreated while the namespace is Active and are removed by the namespace controller when
it terminates (creating them in a terminating namespace is refused with 403, as upstream).
"""

from __future__ import annotations

from typing import Any

from ._http import JSON, ApiError, client_for
from ._util import get_path, meta

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
# A syntactically plausible, obviously fake certificate: the emulator has no TLS.
FAKE_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    "TUlJQkVtdWxhdGVkS3ViZXJuZXRlc0NBZm9yVGVzdHNPbmx5Tm90QVJlYWxDZXJ0aWZpY2F0ZQ==\n"
    "-----END CERTIFICATE-----\n"
)


class NamespaceDefaultsController:
    name = "namespace-defaults-controller"
    enabled = True

    def reconcile(self, emu: Any) -> bool:
        client = client_for(emu)
        changed = False
        accounts = {
            (str(meta(sa).get("namespace")), str(meta(sa).get("name")))
            for sa in client.list_items("/api/v1/serviceaccounts", fieldSelector="metadata.name=default")
        }
        configmaps = {
            (str(meta(cm).get("namespace")), str(meta(cm).get("name")))
            for cm in client.list_items("/api/v1/configmaps", fieldSelector=f"metadata.name={ROOT_CA_CONFIGMAP}")
        }
        for ns in client.list_items("/api/v1/namespaces"):
            if get_path(ns, "status", "phase") == "Terminating" or meta(ns).get("deletionTimestamp"):
                continue
            name = str(meta(ns).get("name"))
            wanted: list[tuple[str, JSON]] = []
            if (name, "default") not in accounts:
                wanted.append(
                    (
                        f"/api/v1/namespaces/{name}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
                    )
                )
            if (name, ROOT_CA_CONFIGMAP) not in configmaps:
                wanted.append(
                    (
                        f"/api/v1/namespaces/{name}/configmaps",
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "metadata": {
                                "name": ROOT_CA_CONFIGMAP,
                                "annotations": {
                                    "kubernetes.io/description": "Contains a CA bundle that can be used to "
                                    "verify the kube-apiserver when using internal endpoints such as the "
                                    "internal service IP or kubernetes.default.svc. No other usage is "
                                    "guaranteed across distributions of Kubernetes clusters."
                                },
                            },
                            "data": {"ca.crt": FAKE_CA},
                        },
                    )
                )
            for path, body in wanted:
                try:
                    client.post(path, body)
                    changed = True
                except ApiError:
                    continue
        return changed
