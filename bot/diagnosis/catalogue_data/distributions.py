"""Distributions: OpenShift and KubeSphere. (The k3s/RKE2 helm-controller is with delivery, Rancher's
controllers with delivery too.)"""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Owner, RunsIn, Runtime, Workload

# --- OpenShift ----------------------------------------------------------------------------------------------
# openshift/openshift-controller-manager runs the project finalizer and template instance finalizer
# controllers; it is part of OpenShift's control plane (managed by its operator). Its workloads and its
# leader-election Lease were not read (no leader election code in the repository outside vendor/).
OCM_OWNER_NAME = "OpenShift's openshift-controller-manager"
OCM = Runtime(RunsIn.DISTRIBUTION, "OpenShift's openshift-controller-manager", leases=None)
# openshift/machine-api-operator:pkg/operator/sync.go:522,744 Deployment machine-api-controllers,
# --leader-elect=true, in openshift-machine-api (cmd/machine-api-operator/main.go:12); the machine
# controller's Lease is named by the cloud provider's repository, not read.
MACHINE_API = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "machine-api-controllers", "openshift-machine-api"),),
    leases=None,
)

# --- KubeSphere ---------------------------------------------------------------------------------------------
KUBESPHERE = Runtime(RunsIn.WORKLOAD, images=("ks-controller-manager",), leases=None)

ENTRIES: tuple[CatalogueEntry, ...] = (
    # openshift/api:project/v1/types.go:27 FinalizerOrigin, in a project Namespace's spec.finalizers;
    # openshift/openshift-controller-manager:pkg/project/controller/project_finalizer_controller.go:129-146
    # only drops it from the list (nothing else to clean)
    CatalogueEntry(
        finalizer="openshift.io/origin",
        prefix=False,
        project="OpenShift",
        owner=Owner(f"the project finalizer controller ({OCM_OWNER_NAME})", markers=("openshift-controller-manager",)),
        runtime=OCM,
        resources=(("", "namespaces"),),
        open_resources=False,
        cleanup="Removes it from the terminating namespace's spec.finalizers; there is nothing else to clean.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: remove it from spec.finalizers through namespaces/finalize.",
        source="openshift/openshift-controller-manager:pkg/project/controller/project_finalizer_controller.go:129",
    ),
    # openshift/api:template/v1/consts.go:6 TemplateInstanceFinalizer; removed by
    # pkg/template/controller/templateinstance_finalizer.go after deleting the instance's objects
    CatalogueEntry(
        finalizer="template.openshift.io/finalizer",
        prefix=False,
        project="OpenShift",
        owner=Owner(
            f"the template instance finalizer controller ({OCM_OWNER_NAME})", markers=("openshift-controller-manager",)
        ),
        runtime=OCM,
        resources=(("template.openshift.io", "templateinstances"),),
        open_resources=False,
        cleanup="Deletes the objects the template instance created, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the objects the template instance created (listed in its status.objects).",
        source="openshift/openshift-controller-manager:pkg/template/controller/templateinstance_finalizer.go:31",
    ),
    # openshift/api:machine/v1beta1/types_machine.go:14 MachineFinalizer; removed by
    # openshift/machine-api-operator:pkg/controller/machine/controller.go:324 after the instance is gone
    CatalogueEntry(
        finalizer="machine.machine.openshift.io",
        prefix=False,
        project="OpenShift",
        owner=Owner("the OpenShift machine controller", markers=("machine-api-controllers",)),
        runtime=MACHINE_API,
        resources=(("machine.openshift.io", "machines"),),
        open_resources=False,
        cleanup="Drains the node, deletes the cloud instance and the Node, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the machine's cloud instance and its Node by hand.",
        source="openshift/api:machine/v1beta1/types_machine.go:14",
    ),
    # kubesphere/kubesphere:pkg/controller/namespace/namespace_controller.go `finalizer` (read through the
    # code index, several versions); on Namespaces' metadata.finalizers
    CatalogueEntry(
        finalizer="finalizers.kubesphere.io/namespaces",
        prefix=False,
        project="KubeSphere",
        owner=Owner("the KubeSphere controller manager", markers=("ks-controller-manager", "kubesphere")),
        runtime=KUBESPHERE,
        resources=(("", "namespaces"),),
        open_resources=False,
        cleanup="Cleans up what KubeSphere keeps for the namespace, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Remove the namespace from its KubeSphere workspace in the console.",
        source="kubesphere/kubesphere:pkg/controller/namespace/namespace_controller.go",
        unverified="ks-controller-manager's Deployment and Lease were not read",
    ),
)
