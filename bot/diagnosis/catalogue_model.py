"""What the finalizer catalogue says of one finalizer: who removes it, where that controller runs, what
it sits on, what its cleanup does, and where that was read.

Pure data (the entries are in `catalogue_data`, the look-ups in `catalogue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# the three finalizer names Kubernetes itself defines without a domain
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


@dataclass(frozen=True)
class Owner:
    """The controller expected to remove a finalizer."""

    name: str  # for people: "Kiali operator"
    # words that identify its workloads (matched against names, labels, images); empty: built in
    markers: tuple[str, ...] = ()
    # part of the control plane (kube-controller-manager, the API server): assumed to be running
    builtin: bool = False
    handled_by_rule: str | None = None  # another rule family explains it (pvc protection, GC)


class RunsIn(StrEnum):
    """Where the remover runs, which says how to tell whether it is alive."""

    # a Deployment, StatefulSet or DaemonSet of the cluster (its workloads, images and Lease show it)
    WORKLOAD = "workload"
    # kube-controller-manager, kube-apiserver or cloud-controller-manager: never dead for want of a
    # workload; kube-controller-manager's own are judged by its kube-system Lease
    CONTROL_PLANE = "control plane"
    # inside a distribution's server or its own control plane (k3s, RKE2, OpenShift): unknown unless a
    # Lease or Events show it
    DISTRIBUTION = "distribution server"
    # no current release of the project removes it any more: only a person can
    RETIRED = "no current release"


@dataclass(frozen=True)
class Workload:
    """A workload the remover usually runs as, in its usual namespace (installs may rename both)."""

    kind: str  # Deployment, StatefulSet, DaemonSet
    name: str
    namespace: str


@dataclass(frozen=True)
class Lease:
    """A leader-election Lease the remover holds by default (renewed while it is alive)."""

    name: str
    namespace: str  # the usual namespace; for most, the controller's own namespace


@dataclass(frozen=True)
class Runtime:
    """Where a remover runs."""

    runs_in: RunsIn
    # for CONTROL_PLANE: kube-controller-manager, kube-apiserver, cloud-controller-manager;
    # for DISTRIBUTION: which servers ("k3s and RKE2 servers", "OpenShift's openshift-controller-manager")
    where: str = ""
    workloads: tuple[Workload, ...] = ()  # empty: none, or not verified (the source comment says which)
    images: tuple[str, ...] = ()  # fragments of image names (registry/repository), not tags
    # the Leases it holds by default; () when leader election is off by default or it has none;
    # None when the source was not read for it (the source comment says why)
    leases: tuple[Lease, ...] | None = None


@dataclass(frozen=True)
class CatalogueEntry:
    """One well-known finalizer, or a family of them sharing a prefix."""

    finalizer: str  # the exact name, or the prefix when `prefix` is true
    prefix: bool
    project: str  # the project that defines it, for people and for coverage ("Argo CD")
    owner: Owner
    runtime: Runtime
    # the (API group, plural resource) pairs it sits on, as RBAC names them; "" is the core group
    resources: tuple[tuple[str, str], ...]
    # it also sits on resources no list can name in advance (custom resources a provider or a user
    # defines, anything a Helm chart or a sync list includes)
    open_resources: bool
    cleanup: str  # one sentence: what the remover does before removing it
    # whether that cleanup creates objects in the object's own namespace before the finalizer goes
    # (a terminating namespace refuses them: "forbidden: unable to create new content in namespace X
    # because it is being terminated"); None: unknown. The reason is in the source comment.
    creates_in_namespace: bool | None
    manual_cleanup: str  # what a person does by hand instead of the remover's cleanup
    source: str  # "owner/repo:path[:line]" or a documentation URL that was read
    unverified: str = ""  # what could not be checked in the project's own source, if anything

    def matches(self, finalizer: str) -> bool:
        return finalizer.startswith(self.finalizer) if self.prefix else finalizer == self.finalizer
