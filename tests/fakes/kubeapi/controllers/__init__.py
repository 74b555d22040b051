"""Controllers that run inside the emulated cluster (namespace controller, GC, kubelet, ...).

They talk to the emulated API server over HTTP with the admin identity, exactly as
kube-controller-manager talks to a real one, and read time from ``emu.clock`` only.

``install_default_controllers(emu)`` registers them in this order (``emu.settle()`` runs them in
rounds in registration order until a round changes nothing):

namespace defaults (``default`` ServiceAccount, ``kube-root-ca.crt``), Deployments, ReplicaSets,
kubelet (all nodes), Endpoints + EndpointSlices, APIService availability, PVC/PV protection,
garbage collector, pod GC, CRD finalizer, namespace controller, kube-controller-manager's leader
election (the ``kube-system/kube-controller-manager`` Lease, renewed while it runs).

Emulator options read (``emu.options[...]``, else the attribute, else the default):
``discovery_error_style`` ("legacy" | "stale"), ``endpoint_style`` ("endpointslices" | "endpoints"),
``ordered_namespace_deletion`` (bool, default True as in 1.34+), ``pod_gc_orphans`` (bool, default
True: PodGC force-deletes pods of missing nodes after 40 s), ``controller_manager_lease`` (bool, default
True: keep kube-controller-manager's Lease; False: no Lease, as where leader election is off).
``controllers_of(emu)`` returns the installed set so a test or scenario can change an option
afterwards (``configure(...)``), or stop and start the controllers that live in
kube-controller-manager (``stop_kube_controller_manager()``).

All but the namespace controller are registered wrapped in ``Gated``, which skips a pass when the
store revision (and, for clock-driven controllers, the time) has not moved since the last one.

Test-only conventions read by the fake kubelet (there are no containers to break):
``emulator.nsstuck.dev/crash-loop: "true"`` on a pod keeps it in CrashLoopBackOff (not Ready);
``emulator.nsstuck.dev/stuck-terminating: "true"`` makes its deletion never complete (``"volumes"``: its
containers stop, its volumes never come down); ``emulator.nsstuck.dev/teardown-error: FailedKillPod``
(or ``FailedUnMount``) makes it never complete either, the kubelet recording that error as an Event.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

from ._gate import Gated
from ._util import option
from .apiservice_availability import APIServiceAvailabilityController
from .crd_finalizer import CRDFinalizer
from .endpoints import EndpointsController
from .garbage_collector import GarbageCollector
from .kubelet import Kubelet, PodGarbageCollector
from .leader_election import LeaderElection
from .namespace import NamespaceController
from .namespace_defaults import NamespaceDefaultsController
from .pvc_protection import PVCProtectionController
from .workloads import DeploymentController, ReplicaSetController


class Controller(Protocol):
    name: str

    def reconcile(self, emu: Any) -> bool: ...


@dataclass
class DefaultControllers:
    namespace_defaults: NamespaceDefaultsController
    deployments: DeploymentController
    replicasets: ReplicaSetController
    kubelet: Kubelet
    endpoints: EndpointsController
    apiservice_availability: APIServiceAvailabilityController
    pvc_protection: PVCProtectionController
    garbage_collector: GarbageCollector
    pod_gc: PodGarbageCollector
    crd_finalizer: CRDFinalizer
    namespace: NamespaceController
    leader_election: LeaderElection

    def all(self) -> list[Controller]:
        return [
            self.namespace_defaults,
            self.deployments,
            self.replicasets,
            self.kubelet,
            self.endpoints,
            self.apiservice_availability,
            self.pvc_protection,
            self.garbage_collector,
            self.pod_gc,
            self.crd_finalizer,
            self.namespace,
            self.leader_election,
        ]

    def configure(self, **options: Any) -> None:
        """Apply emulator options to the installed controllers (unknown options are ignored)."""
        if "discovery_error_style" in options:
            self.namespace.discovery_error_style = options["discovery_error_style"]
        if "ordered_namespace_deletion" in options:
            self.namespace.ordered_deletion = bool(options["ordered_namespace_deletion"])
        if "pod_gc_orphans" in options:
            self.pod_gc.orphans = bool(options["pod_gc_orphans"])
        if "endpoint_style" in options:
            self.apiservice_availability.endpoint_style = options["endpoint_style"]

    def kube_controller_manager(self) -> list[Any]:
        """The controllers that run in kube-controller-manager (not the kubelets, not the apiserver's)."""
        return [
            self.namespace_defaults,
            self.deployments,
            self.replicasets,
            self.endpoints,
            self.pvc_protection,
            self.garbage_collector,
            self.pod_gc,
            self.namespace,
            self.leader_election,
        ]

    def stop_kube_controller_manager(self) -> None:
        for ctrl in self.kube_controller_manager():
            ctrl.enabled = False

    def start_kube_controller_manager(self) -> None:
        for ctrl in self.kube_controller_manager():
            ctrl.enabled = True

    def gated(self) -> list[Controller]:
        """The controllers as registered: each skips passes in which nothing it reads changed."""
        pod_gc = self.pod_gc
        return [
            Gated(self.namespace_defaults),
            Gated(self.deployments),
            Gated(self.replicasets),
            Gated(self.kubelet, _clock),
            Gated(self.endpoints),
            Gated(self.apiservice_availability, _availability_inputs),
            Gated(self.pvc_protection),
            Gated(self.garbage_collector),
            Gated(pod_gc, lambda emu: (_clock(emu), pod_gc.orphans)),
            Gated(self.crd_finalizer, _clock),
            self.namespace,
            Gated(self.leader_election, lambda emu: (_clock(emu), option(emu, "controller_manager_lease", True))),
        ]


def _clock(emu: Any) -> Any:
    return emu.clock.now()


def _availability_inputs(emu: Any) -> Any:
    knobs = getattr(emu, "knobs", None)
    unreachable = tuple(sorted(getattr(knobs, "unreachable_services", ()) or ()))
    backends = getattr(getattr(emu, "cluster", None), "backends", None) or getattr(emu, "aggregated_backends", None)
    return (unreachable, tuple(sorted(map(str, backends or ()))), option(emu, "endpoint_style", None))


_installed: weakref.WeakKeyDictionary[Any, DefaultControllers] = weakref.WeakKeyDictionary()


def build_default_controllers(emu: Any) -> DefaultControllers:
    return DefaultControllers(
        namespace_defaults=NamespaceDefaultsController(),
        deployments=DeploymentController(),
        replicasets=ReplicaSetController(),
        kubelet=Kubelet(),
        endpoints=EndpointsController(),
        apiservice_availability=APIServiceAvailabilityController(),
        pvc_protection=PVCProtectionController(),
        garbage_collector=GarbageCollector(),
        pod_gc=PodGarbageCollector(orphans=bool(option(emu, "pod_gc_orphans", True))),
        crd_finalizer=CRDFinalizer(),
        namespace=NamespaceController(),
        leader_election=LeaderElection(),
    )


def install_default_controllers(emu: Any) -> DefaultControllers:
    """Register the default set of controllers on an Emulator; returns them (also via controllers_of)."""
    controllers = build_default_controllers(emu)
    for ctrl in controllers.gated():
        emu.register_controller(ctrl)
    with contextlib.suppress(TypeError):  # an emulator that cannot be weakly referenced
        _installed[emu] = controllers
    return controllers


def replace_controllers(emu: Any, controllers: DefaultControllers) -> None:
    """Register ``controllers`` on ``emu`` in place of the default set installed there (a restored state's,
    ``state.py``): the same gates in the same order, each around the given controller."""
    emu.controllers[:] = controllers.gated()
    _installed[emu] = controllers


def controllers_of(emu: Any) -> DefaultControllers | None:
    """The controllers install_default_controllers registered on ``emu`` (None if it was not called)."""
    return _installed.get(emu)


__all__ = [
    "APIServiceAvailabilityController",
    "CRDFinalizer",
    "Controller",
    "DefaultControllers",
    "DeploymentController",
    "EndpointsController",
    "GarbageCollector",
    "Kubelet",
    "NamespaceController",
    "NamespaceDefaultsController",
    "PVCProtectionController",
    "PodGarbageCollector",
    "ReplicaSetController",
    "controllers_of",
    "install_default_controllers",
    "replace_controllers",
]
