"""The clusters of the load benchmark: one stuck namespace each, from the emulator's scenario library.

    python -m tests.fakes.kubeapi --clusters N --kubeconfig-dir DIR --build bench._load_fleet:build_cluster \
        --fake-clock --no-background-controllers --latency-ms 50

Cluster K gets scenario SCENARIOS[K % 10] (seven causes between them). On the clusters of the first
seven the benchmark has a change made, through a request and approvals in Slack: a finalizer removed
(from an object or from the namespace), an APIService, a webhook configuration or a pod deleted. The
controllers settle each scenario while it is built and are not run afterwards, so a cluster stays as
it was built until the bot changes it. This module imports nothing of the bot.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.kubeapi.scenarios import SCENARIOS as LIBRARY
from tests.fakes.kubeapi.scenarios import apply_scenario

# (scenario, the change the benchmark has made there through Slack, or None)
SCENARIOS: tuple[tuple[str, str | None], ...] = (
    ("seed002-configmap-finalizer", "remove_finalizer"),
    ("seed003-kiali-orphaned-finalizer", "remove_finalizer"),
    ("seed003-kubesphere-namespace-finalizer", "remove_namespace_finalizer"),
    ("namespace-spec-finalizer", "remove_namespace_finalizer"),
    ("seed003-prometheus-adapter-service-not-found", "delete_apiservice"),
    ("webhook-blocks-delete", "delete_webhook_configuration"),
    ("pod-on-missing-node", "force_delete_pod"),
    ("pvc-in-use", None),
    ("seed000-metrics-missing-endpoints", None),
    ("controller-manager-down", None),
)


def scenario_of(index: int) -> str:
    return SCENARIOS[index % len(SCENARIOS)][0]


def namespace_of(index: int) -> str:
    """The stuck namespace of cluster `index`."""
    return LIBRARY[scenario_of(index)].expected.namespace


def remediable(index: int) -> bool:
    """Whether the benchmark has a change made on cluster `index`."""
    return SCENARIOS[index % len(SCENARIOS)][1] is not None


def build_cluster(emu: Any, index: int) -> None:
    apply_scenario(emu, scenario_of(index))
