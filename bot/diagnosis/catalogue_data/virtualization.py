"""Virtual machines: KubeVirt and its Containerized Data Importer (CDI)."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- KubeVirt -----------------------------------------------------------------------------------------------
# kubevirt/kubevirt:pkg/virt-controller/leaderelectionconfig/config.go:34 DefaultLeaseName "virt-controller",
# created in the KubeVirt namespace (pkg/virt-controller/watch/application.go:1150-1152). virt-operator's
# Lease is named after it, "virt-operator" (pkg/virt-operator/application.go:72,394-396).
VIRT_CONTROLLER_OWNER = Owner("KubeVirt's virt-controller", markers=("virt-controller",))
VIRT_CONTROLLER = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "virt-controller", "kubevirt"),),
    images=("kubevirt/virt-controller",),
    leases=(Lease("virt-controller", "kubevirt"),),
)
VIRT_OPERATOR = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "virt-operator", "kubevirt"),),
    images=("kubevirt/virt-operator",),
    leases=(Lease("virt-operator", "kubevirt"),),
)
# (The names and where they are set were read; the cleanups are summarized from the code's comments and
# controllers, not traced line by line.)
KUBEVIRT_TYPES = "kubevirt/kubevirt:staging/src/kubevirt.io/api/core/v1/types.go"
SNAPSHOT_SOURCE = "kubevirt/kubevirt:pkg/storage/snapshot/snapshot.go"

# --- CDI ----------------------------------------------------------------------------------------------------
# kubevirt/containerized-data-importer:pkg/common/common.go:30 Deployment "cdi-deployment" (in the cdi
# namespace); cmd/cdi-controller/controller.go:204-207 LeaderElection true, ID
# "cdi-controller-leader-election-helper", Leases, in the controller's namespace
CDI_OWNER = Owner("the CDI controller", markers=("cdi-deployment", "cdi-controller"))
CDI = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "cdi-deployment", "cdi"),),
    images=("kubevirt/cdi-controller",),
    leases=(Lease("cdi-controller-leader-election-helper", "cdi"),),
)


def _kubevirt(
    finalizer: str,
    resources: tuple[tuple[str, str], ...],
    cleanup: str,
    manual: str,
    source: str,
    *,
    owner: Owner = VIRT_CONTROLLER_OWNER,
    runtime: Runtime = VIRT_CONTROLLER,
) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=finalizer,
        prefix=False,
        project="KubeVirt",
        owner=owner,
        runtime=runtime,
        resources=resources,
        open_resources=False,
        cleanup=cleanup,
        creates_in_namespace=False,
        manual_cleanup=manual,
        source=source,
    )


def _cdi(
    finalizer: str, resources: tuple[tuple[str, str], ...], cleanup: str, manual: str, source: str
) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=finalizer,
        prefix=False,
        project="KubeVirt CDI",
        owner=CDI_OWNER,
        runtime=CDI,
        resources=resources,
        open_resources=False,
        cleanup=cleanup,
        creates_in_namespace=False,
        manual_cleanup=manual,
        source=source,
    )


ENTRIES: tuple[CatalogueEntry, ...] = (
    # types.go:1250 VirtualMachineInstanceFinalizer (the unqualified "foregroundDeleteVirtualMachine" it
    # replaced, types.go:1251, is left out: not a domain-qualified name)
    _kubevirt(
        "kubevirt.io/foregroundDeleteVirtualMachine",
        (("kubevirt.io", "virtualmachineinstances"),),
        "Waits until the VM's virt-launcher pod is gone, then removes it.",
        "Delete (or force-delete) the VM's virt-launcher pod.",
        f"{KUBEVIRT_TYPES}:1250",
    ),
    # types.go:1253 VirtualMachineControllerFinalizer, set by the VM controller on VMs and their VMIs
    # (pkg/virt-controller/watch/vm/vm.go:1308)
    _kubevirt(
        "kubevirt.io/virtualMachineControllerFinalize",
        (("kubevirt.io", "virtualmachines"), ("kubevirt.io", "virtualmachineinstances")),
        "Lets the VM controller see the VM and its instance go (stopping it), then removes it.",
        "Delete the VM's virt-launcher pod and DataVolumes if the VM controller is gone.",
        f"{KUBEVIRT_TYPES}:1253",
    ),
    # types.go:1254 VirtualMachineInstanceMigrationFinalizer (added by virt-api's mutating webhook)
    _kubevirt(
        "kubevirt.io/migrationJobFinalize",
        (("kubevirt.io", "virtualmachineinstancemigrations"),),
        "Ends the migration and deletes its target pod, then removes it.",
        "Delete the migration's target virt-launcher pod.",
        f"{KUBEVIRT_TYPES}:1254",
    ),
    # staging/src/kubevirt.io/api/pool/v1beta1/types.go:32; the pool controller puts it on the pool's VMs
    # (pkg/virt-controller/watch/pool/pool.go:953)
    _kubevirt(
        "pool.kubevirt.io/finalizer",
        (("pool.kubevirt.io", "virtualmachinepools"), ("kubevirt.io", "virtualmachines")),
        "Lets the pool controller account for the VM's removal, then removes it.",
        "Nothing outside the cluster: the pool only loses track of the VM.",
        "kubevirt/kubevirt:staging/src/kubevirt.io/api/pool/v1beta1/types.go:32",
    ),
    # pkg/storage/snapshot/snapshot.go:50,52, restore.go:61, source.go:54
    _kubevirt(
        "snapshot.kubevirt.io/vmsnapshot-protection",
        (("snapshot.kubevirt.io", "virtualmachinesnapshots"),),
        "Deletes the snapshot's content (unless retained), then removes it.",
        "Delete the VirtualMachineSnapshotContent and its VolumeSnapshots.",
        f"{SNAPSHOT_SOURCE}:50",
    ),
    _kubevirt(
        "snapshot.kubevirt.io/vmsnapshotcontent-protection",
        (("snapshot.kubevirt.io", "virtualmachinesnapshotcontents"),),
        "Deletes the content's VolumeSnapshots, then removes it.",
        "Delete the content's VolumeSnapshots.",
        f"{SNAPSHOT_SOURCE}:52",
    ),
    _kubevirt(
        "snapshot.kubevirt.io/vmrestore-protection",
        (("snapshot.kubevirt.io", "virtualmachinerestores"),),
        "Releases the VM the restore targets, then removes it.",
        "Nothing outside the cluster: unpause or restart the target VM if it stays locked.",
        "kubevirt/kubevirt:pkg/storage/snapshot/restore.go:61",
    ),
    _kubevirt(
        "snapshot.kubevirt.io/snapshot-source-protection",
        (("kubevirt.io", "virtualmachines"),),
        "Removes it from the source VM once no snapshot of it is in progress.",
        "Delete the VirtualMachineSnapshots still in progress for the VM.",
        "kubevirt/kubevirt:pkg/storage/snapshot/source.go:54",
    ),
    # pkg/virt-operator/util/client.go:39 KubeVirtFinalizer, on the KubeVirt CR
    _kubevirt(
        "kubevirt.io/foregroundDeleteKubeVirt",
        (("kubevirt.io", "kubevirts"),),
        "Uninstalls KubeVirt's components, then removes it.",
        "Delete KubeVirt's Deployments, DaemonSets, webhooks and APIServices by hand.",
        "kubevirt/kubevirt:pkg/virt-operator/util/client.go:39",
        runtime=VIRT_OPERATOR,
        owner=Owner("KubeVirt's virt-operator", markers=("virt-operator",)),
    ),
    # kubevirt/containerized-data-importer:pkg/controller/datavolume/clone-controller-base.go:134
    _cdi(
        "cdi.kubevirt.io/dataVolumeFinalizer",
        (("cdi.kubevirt.io", "datavolumes"),),
        "Cleans up a cross-namespace clone's temporary objects, then removes it.",
        "Delete the clone's temporary PVCs and pods in the source namespace.",
        "kubevirt/containerized-data-importer:pkg/controller/datavolume/clone-controller-base.go:134",
    ),
    # pkg/controller/populators/clone-populator.go:68, on the target PVC
    _cdi(
        "cdi.kubevirt.io/clonePopulator",
        (("", "persistentvolumeclaims"),),
        "Deletes the clone's temporary objects (PVC prime, snapshots), then removes it.",
        "Delete the clone's temporary PVCs and VolumeSnapshots.",
        "kubevirt/containerized-data-importer:pkg/controller/populators/clone-populator.go:68",
    ),
    # pkg/controller/clone-controller.go:57,208
    _cdi(
        "cdi.kubevirt.io/cloneSource",
        (("", "persistentvolumeclaims"),),
        "Deletes the clone source pod, then removes it.",
        "Delete the clone source pod.",
        "kubevirt/containerized-data-importer:pkg/controller/clone-controller.go:57",
    ),
    # pkg/controller/import-controller.go:55-57 ("ensures image stream import pod is deleted when pvc is
    # deleted")
    _cdi(
        "cdi.kubevirt.io/importImageStream",
        (("", "persistentvolumeclaims"),),
        "Deletes the image-stream import pod, then removes it.",
        "Delete the importer pod.",
        "kubevirt/containerized-data-importer:pkg/controller/import-controller.go:57",
    ),
)
