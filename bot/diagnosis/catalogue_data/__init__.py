"""The finalizer catalogue's entries, grouped by area, each with the source it was read from.

Entries were checked against each project's own source (the constant that names the finalizer, where it
is added and removed, the controller's workloads and leader-election settings); what could not be
checked is left empty or None and said in the entry's comment or its `unverified` field.
"""

from __future__ import annotations

from bot.diagnosis.catalogue_data import (
    delivery,
    distributions,
    infrastructure,
    kubernetes,
    mesh_and_policy,
    storage,
    virtualization,
    workloads,
)
from bot.diagnosis.catalogue_model import CatalogueEntry

ENTRIES: tuple[CatalogueEntry, ...] = (
    *kubernetes.ENTRIES,
    *delivery.ENTRIES,
    *infrastructure.ENTRIES,
    *storage.ENTRIES,
    *virtualization.ENTRIES,
    *mesh_and_policy.ENTRIES,
    *workloads.ENTRIES,
    *distributions.ENTRIES,
)

# Projects looked at that put no finalizer on objects, with where that was checked
PROJECTS_WITHOUT_FINALIZERS: dict[str, str] = {
    "Linkerd": "linkerd/linkerd2, linkerd/linkerd-failover, linkerd/linkerd-smi: no finalizer in their Go or Rust code",
}
