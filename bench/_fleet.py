"""The clusters of the digest benchmark, built inside the emulator's own process.

    python -m tests.fakes.kubeapi --clusters N --kubeconfig-dir DIR --build bench._fleet:build_cluster \
        --fake-clock --no-background-controllers --latency-ms 20

Each cluster: 1,000 Active team namespaces with a little content each (a Deployment, its ConfigMap
and Secret, and the `default` ServiceAccount and `kube-root-ca.crt` ConfigMap every namespace gets),
and among them five stuck since START, held the way it happens: three by a ConfigMap whose finalizer's
controller is gone, two by a custom resource of an operator that was uninstalled. The emulator's
namespace controller deletes their content and writes its conditions, as in a real cluster. One more
namespace was deleted five minutes before NOW and is still terminating: not stuck yet.

Objects are created through the API server's own code (admission, validation, storage), not over
HTTP, so that 50,000 namespaces take seconds; this module imports nothing of the bot.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakes.kubeapi.apiserver import Ctx, DeleteOptions
from tests.fakes.kubeapi.controllers import controllers_of

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)  # when the stuck namespaces were deleted
NOW = START + timedelta(hours=3)  # when the digest is built
NAMESPACES = 1000
STUCK = 5
GROUP = "stash.example.com"
CONFIGMAP_FINALIZER = "example.com/config-protection"
BACKUP_FINALIZER = f"{GROUP}/cleanup"


def team(i: int) -> str:
    return f"team-{i:04d}"


def stuck_indexes(namespaces: int = NAMESPACES, stuck: int = STUCK) -> list[int]:
    step = namespaces // stuck
    return [k * step + 17 for k in range(stuck)]


def young_index(namespaces: int = NAMESPACES) -> int:
    return namespaces - 3


def build_cluster(emu: Any, index: int, *, namespaces: int = NAMESPACES, stuck: int = STUCK) -> None:
    cluster = emu.cluster
    ctx = Ctx(user=emu.admin_identity, admin=True)

    def rt(group: str, version: str, plural: str) -> Any:
        return cluster.rt(group, version, plural)

    def create(rtype: Any, namespace: str, body: dict[str, Any]) -> None:
        cluster.create(rtype, namespace, body, ctx)

    def delete(rtype: Any, namespace: str, name: str) -> None:
        cluster.delete(rtype, namespace, name, DeleteOptions.parse(None, {}), ctx)

    ns_rt, cm_rt, secret_rt = rt("", "v1", "namespaces"), rt("", "v1", "configmaps"), rt("", "v1", "secrets")
    sa_rt, deploy_rt = rt("", "v1", "serviceaccounts"), rt("apps", "v1", "deployments")
    create(
        rt("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        "",
        {
            "metadata": {"name": f"backups.{GROUP}"},
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {"plural": "backups", "singular": "backup", "kind": "Backup", "listKind": "BackupList"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        },
    )
    backup_rt = rt(GROUP, "v1", "backups")
    held = stuck_indexes(namespaces, stuck)
    by_configmap = set(held[:3])  # the others are held by a custom resource
    young = young_index(namespaces)
    for i in range(namespaces):
        ns = team(i)
        labels = {"team": f"t{i % 97:02d}", "env": ("prod", "staging", "dev")[i % 3]}
        create(ns_rt, "", {"metadata": {"name": ns, "labels": labels}})
        create(sa_rt, ns, {"metadata": {"name": "default"}})
        create(cm_rt, ns, {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "-----BEGIN CERTIFICATE-----"}})
        app_labels = {"app": "api", "team": labels["team"]}
        config_meta: dict[str, Any] = {"name": "api-config", "labels": app_labels}
        if i in by_configmap or i == young:
            config_meta["finalizers"] = [CONFIGMAP_FINALIZER]
        create(cm_rt, ns, {"metadata": config_meta, "data": {"LOG_LEVEL": "info", "FEATURES": "search,export"}})
        create(secret_rt, ns, {"metadata": {"name": "api-tls"}, "type": "Opaque", "data": {"tls.key": "a2V5"}})
        create(
            deploy_rt,
            ns,
            {
                "metadata": {"name": "api", "labels": app_labels},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": app_labels},
                    "template": {
                        "metadata": {"labels": app_labels},
                        "spec": {"containers": [{"name": "api", "image": f"registry.example.com/{ns}/api:1.4.2"}]},
                    },
                },
            },
        )
    for i in held:
        if i not in by_configmap:  # an uninstalled backup operator left its custom resources behind
            create(
                backup_rt,
                team(i),
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Backup",
                    "metadata": {"name": "nightly", "finalizers": [BACKUP_FINALIZER]},
                    "spec": {"schedule": "0 2 * * *", "retention": "7d"},
                },
            )
    namespace_controller = controllers_of(emu).namespace  # type: ignore[union-attr]
    emu.clock.set(START)
    for i in held:
        delete(ns_rt, "", team(i))
    for _ in range(6):  # the namespace controller deletes the content, then waits on the finalizers
        namespace_controller.reconcile(emu)
        emu.clock.advance(30)
    emu.clock.set(NOW - timedelta(minutes=5))
    delete(ns_rt, "", team(young))
    for _ in range(3):
        namespace_controller.reconcile(emu)
        emu.clock.advance(30)
    emu.clock.set(NOW)


def build_from_env(emu: Any, index: int) -> None:
    """`build_cluster` with the shape the benchmark asked for (BENCH_FLEET_SHAPE="namespaces,stuck")."""
    shape = os.environ.get("BENCH_FLEET_SHAPE")
    namespaces, stuck = (int(n) for n in shape.split(",")) if shape else (NAMESPACES, STUCK)
    build_cluster(emu, index, namespaces=namespaces, stuck=stuck)
