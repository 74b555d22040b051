"""Kubernetes' own finalizers (the control plane) and those of the CSI sidecars."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# kube-controller-manager: --leader-elect-resource-name kube-controller-manager, namespace kube-system
# (k8s.io/component-base leader election defaults, as kube-controller-manager sets them)
KCM = Runtime(
    RunsIn.CONTROL_PLANE, "kube-controller-manager", leases=(Lease("kube-controller-manager", "kube-system"),)
)
# kube-apiserver elects no leader; its finalizer controllers run in every API server
APISERVER = Runtime(RunsIn.CONTROL_PLANE, "kube-apiserver", leases=())
# kubernetes/cloud-provider:options/options.go: LeaderElection.ResourceName "cloud-controller-manager",
# ResourceNamespace "kube-system"
CCM = Runtime(
    RunsIn.CONTROL_PLANE,
    "cloud-controller-manager",
    leases=(Lease("cloud-controller-manager", "kube-system"),),
)

GC = Owner("the garbage collector (kube-controller-manager)", builtin=True, handled_by_rule="gc")
PROVISIONER = Owner("the CSI external-provisioner", markers=("csi-provisioner", "external-provisioner"))
SNAPSHOTTER = Owner("the CSI snapshot controller", markers=("snapshot-controller",))

# The external-provisioner is a sidecar ("csi-provisioner") of each CSI driver's controller; its
# Lease is named after the driver, so no fixed name can be listed.
PROVISIONER_RUNTIME = Runtime(RunsIn.WORKLOAD, images=("sig-storage/csi-provisioner",), leases=None)
# kubernetes-csi/external-snapshotter:deploy/kubernetes/snapshot-controller/setup-snapshot-controller.yaml
# (Deployment snapshot-controller in kube-system, --leader-election=true);
# cmd/snapshot-controller/main.go:370 lockName "snapshot-controller-leader", in the pod's namespace
SNAPSHOTTER_RUNTIME = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "snapshot-controller", "kube-system"),),
    images=("sig-storage/snapshot-controller",),
    leases=(Lease("snapshot-controller-leader", "kube-system"),),
)

ENTRIES: tuple[CatalogueEntry, ...] = (
    # kubernetes/kubernetes:staging/src/k8s.io/api/core/v1/types.go FinalizerKubernetes; only meaningful
    # in a Namespace's spec.finalizers (owner_for keeps saying so for any other object)
    CatalogueEntry(
        finalizer="kubernetes",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the namespace controller (kube-controller-manager)", builtin=True),
        runtime=KCM,
        resources=(("", "namespaces"),),
        open_resources=False,
        cleanup="Deletes every object in the namespace, then removes the finalizer through namespaces/finalize.",
        creates_in_namespace=False,
        manual_cleanup="Find what the namespace's conditions say remains and remove that; never finalize blindly.",
        source="kubernetes/kubernetes:staging/src/k8s.io/api/core/v1/types.go (FinalizerKubernetes)",
    ),
    # kubernetes/kubernetes:staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go FinalizerOrphanDependents,
    # FinalizerDeleteDependents; the garbage collector puts them on any object deleted with that policy
    CatalogueEntry(
        finalizer="orphan",
        prefix=False,
        project="Kubernetes",
        owner=GC,
        runtime=KCM,
        resources=(),
        open_resources=True,
        cleanup="Removes the owner reference from every dependent, then the finalizer.",
        creates_in_namespace=False,
        manual_cleanup="Strip the ownerReferences to this object from its dependents.",
        source="kubernetes/kubernetes:staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go",
    ),
    CatalogueEntry(
        finalizer="foregroundDeletion",
        prefix=False,
        project="Kubernetes",
        owner=GC,
        runtime=KCM,
        resources=(),
        open_resources=True,
        cleanup="Deletes every dependent with blockOwnerDeletion, waits until they are gone, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the dependents that still block (ownerReferences with blockOwnerDeletion).",
        source="kubernetes/kubernetes:staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go",
    ),
    # kubernetes/kubernetes:pkg/volume/util/finalizer.go PVCProtectionFinalizer, PVProtectionFinalizer
    CatalogueEntry(
        finalizer="kubernetes.io/pvc-protection",
        prefix=False,
        project="Kubernetes",
        owner=Owner(
            "the PVC protection controller (kube-controller-manager)", builtin=True, handled_by_rule="pvc_in_use"
        ),
        runtime=KCM,
        resources=(("", "persistentvolumeclaims"),),
        open_resources=False,
        cleanup="Removes it once no pod uses the claim.",
        creates_in_namespace=False,
        manual_cleanup="Delete (or force-delete) the pods that still use the claim.",
        source="kubernetes/kubernetes:pkg/volume/util/finalizer.go",
    ),
    CatalogueEntry(
        finalizer="kubernetes.io/pv-protection",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the PV protection controller (kube-controller-manager)", builtin=True),
        runtime=KCM,
        resources=(("", "persistentvolumes"),),
        open_resources=False,
        cleanup="Removes it once the volume is no longer bound to a claim.",
        creates_in_namespace=False,
        manual_cleanup="Delete the claim bound to the volume.",
        source="kubernetes/kubernetes:pkg/volume/util/finalizer.go",
    ),
    # kubernetes/kubernetes:staging/src/k8s.io/component-helpers/storage/volume/pv_helpers.go
    # PVDeletionInTreeProtectionFinalizer (HonorPVReclaimPolicy, in-tree volumes)
    CatalogueEntry(
        finalizer="kubernetes.io/pv-controller",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the PV controller (kube-controller-manager)", builtin=True),
        runtime=KCM,
        resources=(("", "persistentvolumes"),),
        open_resources=False,
        cleanup="Deletes the in-tree volume's storage (reclaim policy Delete), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the backing disk in the storage system by hand.",
        source="kubernetes/kubernetes:staging/src/k8s.io/component-helpers/storage/volume/pv_helpers.go",
    ),
    # kubernetes/kubernetes:staging/src/k8s.io/api/batch/v1/types.go JobTrackingFinalizer
    CatalogueEntry(
        finalizer="batch.kubernetes.io/job-tracking",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the Job controller (kube-controller-manager)", builtin=True),
        runtime=KCM,
        resources=(("", "pods"),),
        open_resources=False,
        cleanup="Counts the finished pod in its Job's status, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the Job's counts only lose that pod.",
        source="kubernetes/kubernetes:staging/src/k8s.io/api/batch/v1/types.go (JobTrackingFinalizer)",
    ),
    # kubernetes/cloud-provider:service/helpers/helper.go LoadBalancerCleanupFinalizer
    CatalogueEntry(
        finalizer="service.kubernetes.io/load-balancer-cleanup",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the cloud-controller-manager service controller", markers=("cloud-controller-manager", "ccm")),
        runtime=CCM,
        resources=(("", "services"),),
        open_resources=False,
        cleanup="Deletes the cloud load balancer of the Service, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the cloud load balancer (and its security groups) by hand.",
        source="kubernetes/cloud-provider:service/helpers/helper.go (LoadBalancerCleanupFinalizer)",
    ),
    # kubernetes/kubernetes:staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/types.go
    # CustomResourceCleanupFinalizer; removed by pkg/controller/finalizer/crd_finalizer.go
    CatalogueEntry(
        finalizer="customresourcecleanup.apiextensions.k8s.io",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the API server's CRD finalizer", builtin=True),
        runtime=APISERVER,
        resources=(("apiextensions.k8s.io", "customresourcedefinitions"),),
        open_resources=False,
        cleanup="Deletes every instance of the custom resource, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Deal with the instances that keep finalizers of their own.",
        source="kubernetes/kubernetes:staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/types.go",
    ),
    # kubernetes/kubernetes:staging/src/k8s.io/api/resource/v1/types.go Finalizer ("set for claims which
    # were allocated through a builtin controller"); the scheduler adds it, kube-controller-manager's
    # resourceclaim controller deallocates and removes it
    CatalogueEntry(
        finalizer="resource.kubernetes.io/delete-protection",
        prefix=False,
        project="Kubernetes",
        owner=Owner("the DRA resourceclaim controller", builtin=True),
        runtime=KCM,
        resources=(("resource.k8s.io", "resourceclaims"),),
        open_resources=False,
        cleanup="Deallocates the claim once no pod reserves it, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the pods that reserve the claim.",
        source="kubernetes/kubernetes:staging/src/k8s.io/api/resource/v1/types.go (Finalizer)",
    ),
    # kubernetes-csi/external-provisioner:vendor/sigs.k8s.io/sig-storage-lib-external-provisioner/v13/
    # controller/controller.go:89 finalizerPV
    CatalogueEntry(
        finalizer="external-provisioner.volume.kubernetes.io/finalizer",
        prefix=False,
        project="CSI external-provisioner",
        owner=PROVISIONER,
        runtime=PROVISIONER_RUNTIME,
        resources=(("", "persistentvolumes"),),
        open_resources=False,
        cleanup="Deletes the volume in the storage system (reclaim policy Delete), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the backing volume in the storage system by hand.",
        source="kubernetes-csi/external-provisioner:vendor/sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller/controller.go",
    ),
    # kubernetes-csi/external-provisioner:pkg/controller/controller.go:164 pvcCloneFinalizer
    CatalogueEntry(
        finalizer="provisioner.storage.kubernetes.io/cloning-protection",
        prefix=False,
        project="CSI external-provisioner",
        owner=PROVISIONER,
        runtime=PROVISIONER_RUNTIME,
        resources=(("", "persistentvolumeclaims"),),
        open_resources=False,
        cleanup="Removes it from the source claim once no clone from it is in progress.",
        creates_in_namespace=False,
        manual_cleanup="Delete the claims still being cloned from it.",
        source="kubernetes-csi/external-provisioner:pkg/controller/controller.go:164",
    ),
    # kubernetes-csi/external-provisioner:pkg/controller/controller.go:168 snapshotSourceProtectionFinalizer
    CatalogueEntry(
        finalizer="provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection",
        prefix=False,
        project="CSI external-provisioner",
        owner=PROVISIONER,
        runtime=PROVISIONER_RUNTIME,
        resources=(("snapshot.storage.k8s.io", "volumesnapshots"),),
        open_resources=False,
        cleanup="Removes it from the snapshot once no volume is being restored from it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the claims still being restored from the snapshot.",
        source="kubernetes-csi/external-provisioner:pkg/controller/controller.go:168",
    ),
    # kubernetes-csi/external-snapshotter:pkg/utils/util.go:80-88
    CatalogueEntry(
        finalizer="snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection",
        prefix=False,
        project="CSI external-snapshotter",
        owner=SNAPSHOTTER,
        runtime=SNAPSHOTTER_RUNTIME,
        resources=(("snapshot.storage.k8s.io", "volumesnapshots"),),
        open_resources=False,
        cleanup="Removes it once no claim is being provisioned from the snapshot.",
        creates_in_namespace=False,
        manual_cleanup="Delete the claims still being provisioned from the snapshot.",
        source="kubernetes-csi/external-snapshotter:pkg/utils/util.go:84",
    ),
    CatalogueEntry(
        finalizer="snapshot.storage.kubernetes.io/volumesnapshot-bound-protection",
        prefix=False,
        project="CSI external-snapshotter",
        owner=SNAPSHOTTER,
        runtime=SNAPSHOTTER_RUNTIME,
        resources=(("snapshot.storage.k8s.io", "volumesnapshots"),),
        open_resources=False,
        cleanup="Deletes the bound VolumeSnapshotContent (policy Delete), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the VolumeSnapshotContent and the snapshot in the storage system.",
        source="kubernetes-csi/external-snapshotter:pkg/utils/util.go:82",
    ),
    CatalogueEntry(
        finalizer="snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection",
        prefix=False,
        project="CSI external-snapshotter",
        owner=SNAPSHOTTER,
        runtime=SNAPSHOTTER_RUNTIME,
        resources=(("snapshot.storage.k8s.io", "volumesnapshotcontents"),),
        open_resources=False,
        cleanup="Removes it once the content's VolumeSnapshot is gone.",
        creates_in_namespace=False,
        manual_cleanup="Delete the snapshot in the storage system if the content's policy was Delete.",
        source="kubernetes-csi/external-snapshotter:pkg/utils/util.go:80",
    ),
    CatalogueEntry(
        finalizer="snapshot.storage.kubernetes.io/pvc-as-source-protection",
        prefix=False,
        project="CSI external-snapshotter",
        owner=SNAPSHOTTER,
        runtime=SNAPSHOTTER_RUNTIME,
        resources=(("", "persistentvolumeclaims"),),
        open_resources=False,
        cleanup="Removes it from the claim once no snapshot of it is being taken.",
        creates_in_namespace=False,
        manual_cleanup="Delete the VolumeSnapshots still being taken from the claim.",
        source="kubernetes-csi/external-snapshotter:pkg/utils/util.go:88",
    ),
)
