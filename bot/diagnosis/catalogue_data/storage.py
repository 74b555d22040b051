"""Storage and backup: Rook/Ceph, Longhorn, Velero and the vSphere CSI driver (CNS)."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- Rook/Ceph ----------------------------------------------------------------------------------------------
# (Only the CephCluster's deletion was read line by line; the other kinds' cleanups are what their
# controllers are for, in one sentence.)
# rook/rook:pkg/operator/ceph/controller/finalizer.go:99 buildFinalizerName: lower(kind) + ".ceph.rook.io",
# added by each CR's controller (AddFinalizerIfNotPresent). deploy/examples/operator.yaml: Deployment
# rook-ceph-operator in rook-ceph, image docker.io/rook/ceph; pkg/operator/ceph/cr_manager.go:150
# LeaderElection false.
ROOK_OWNER = Owner("the Rook operator", markers=("rook-ceph-operator", "rook"))
ROOK = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "rook-ceph-operator", "rook-ceph"),),
    images=("rook/ceph",),
    leases=(),
)
ROOK_SOURCE = "rook/rook:pkg/operator/ceph/controller/finalizer.go:99"


def _rook(kind: str, plural: str, cleanup: str, manual: str) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=f"{kind}.ceph.rook.io",
        prefix=False,
        project="Rook/Ceph",
        owner=ROOK_OWNER,
        runtime=ROOK,
        resources=(("ceph.rook.io", plural),),
        open_resources=False,
        cleanup=cleanup,
        creates_in_namespace=False,
        manual_cleanup=manual,
        source=ROOK_SOURCE,
    )


# --- Longhorn -----------------------------------------------------------------------------------------------
# longhorn/longhorn-manager:datastore/longhorn.go:49 longhornFinalizerKey = the group "longhorn.io"; the
# admission webhook adds it to every Longhorn CR (webhook/common/common.go:21,34). longhorn-manager is a
# DaemonSet in longhorn-system (image longhornio/longhorn-manager); each manager owns its node's objects
# and elects no leader for them (its only Lease, longhorn-manager-webhook-lock, app/daemon.go:61, is the
# webhook's).
LONGHORN = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("DaemonSet", "longhorn-manager", "longhorn-system"),),
    images=("longhornio/longhorn-manager",),
    leases=(),
)

# --- Velero -------------------------------------------------------------------------------------------------
# The velero server (Deployment velero) and the node-agent DaemonSet, in velero, image velero/velero;
# no leader election was found in pkg/ or cmd/.
VELERO_OWNER = Owner("the Velero server", markers=("velero",))
VELERO = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "velero", "velero"),),
    images=("velero/velero",),
    leases=(),
)
NODE_AGENT = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("DaemonSet", "node-agent", "velero"),),
    images=("velero/velero",),
    leases=(),
)

# --- vSphere CSI (CNS) --------------------------------------------------------------------------------------
# kubernetes-sigs/vsphere-csi-driver: the syncer (container vsphere-syncer of Deployment
# vsphere-csi-controller in vmware-system-csi, manifests/vanilla/vsphere-csi-driver.yaml, which passes
# --leader-election) holds Lease "vsphere-syncer" in its own namespace (cmd/syncer/main.go:214-223).
# The CNS operator finalizers are mostly on vSphere Supervisor clusters.
CNS_OWNER = Owner("the vSphere CSI syncer (CNS operator)", markers=("vsphere-csi-controller", "vsphere-syncer"))
CNS = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "vsphere-csi-controller", "vmware-system-csi"),),
    images=("csi-vsphere/syncer",),
    leases=(Lease("vsphere-syncer", "vmware-system-csi"),),
)
CNS_SOURCE = "kubernetes-sigs/vsphere-csi-driver:pkg/syncer/cnsoperator/types/types.go"

ENTRIES: tuple[CatalogueEntry, ...] = (
    # pkg/operator/ceph/cluster/controller.go:399-449 reconcileDelete: waits for the cluster's dependent
    # CRs, starts the cleanup Jobs of cleanupPolicy in a goroutine (cleanup.go:72-87, in the cluster's
    # namespace) and removes the finalizer without waiting for them: nothing created holds it.
    _rook(
        "cephcluster",
        "cephclusters",
        "Waits for the cluster's pools, filesystems and stores to go, starts the data cleanup, then removes it.",
        "Remove the Ceph daemons' data on the hosts (dataDirHostPath, the OSD disks) by hand.",
    ),
    _rook(
        "cephblockpool",
        "cephblockpools",
        "Deletes the pool in Ceph once no image uses it, then removes it.",
        "Delete the pool in Ceph (ceph osd pool rm) by hand.",
    ),
    _rook(
        "cephfilesystem",
        "cephfilesystems",
        "Deletes the filesystem and its pools in Ceph, then removes it.",
        "Delete the filesystem and its pools in Ceph (ceph fs rm) by hand.",
    ),
    _rook(
        "cephobjectstore",
        "cephobjectstores",
        "Deletes the object store's pools and realm once no bucket uses it, then removes it.",
        "Delete the object store's pools and realm in Ceph by hand.",
    ),
    _rook(
        "cephobjectstoreuser",
        "cephobjectstoreusers",
        "Deletes the user in the Ceph object store, then removes it.",
        "Delete the user with radosgw-admin by hand.",
    ),
    _rook(
        "cephnfs",
        "cephnfses",
        "Deletes the NFS cluster's Ganesha configuration in Ceph, then removes it.",
        "Delete the NFS Ganesha configuration objects in Ceph by hand.",
    ),
    _rook(
        "cephfilesystemsubvolumegroup",
        "cephfilesystemsubvolumegroups",
        "Deletes the subvolume group in CephFS, then removes it.",
        "Delete the subvolume group (ceph fs subvolumegroup rm) by hand.",
    ),
    _rook(
        "cephblockpoolradosnamespace",
        "cephblockpoolradosnamespaces",
        "Deletes the RADOS namespace in its pool, then removes it.",
        "Delete the RADOS namespace (rbd namespace remove) by hand.",
    ),
    _rook(
        "cephclient",
        "cephclients",
        "Deletes the Ceph client's key, then removes it.",
        "Delete the client key (ceph auth del) by hand.",
    ),
    # pkg/operator/ceph/cluster/mon/mon.go:107 DisasterProtectionFinalizerName, on the mon Secret and the
    # mon endpoints ConfigMap of the cluster's namespace; cluster/controller.go:600-640 removes it when
    # the CephCluster goes
    CatalogueEntry(
        finalizer="ceph.rook.io/disaster-protection",
        prefix=False,
        project="Rook/Ceph",
        owner=ROOK_OWNER,
        runtime=ROOK,
        resources=(("", "secrets"), ("", "configmaps")),
        open_resources=False,
        cleanup="Removes it from the mon Secret and endpoints ConfigMap once their CephCluster is deleted.",
        creates_in_namespace=False,
        manual_cleanup="Delete the CephCluster first; the mon keys are lost with these objects.",
        source="rook/rook:pkg/operator/ceph/cluster/mon/mon.go:107",
    ),
    # The cleanup differs per kind (replicas' data on the nodes, backups in the backup target...);
    # datastore/longhorn.go:1464-1490 shows the volume's; what else each kind's deletion creates was not
    # read: unknown.
    CatalogueEntry(
        finalizer="longhorn.io",
        prefix=False,
        project="Longhorn",
        owner=Owner("the Longhorn manager", markers=("longhorn-manager", "longhorn")),
        runtime=LONGHORN,
        resources=tuple(
            ("longhorn.io", plural)
            for plural in (
                "volumes",
                "engines",
                "replicas",
                "engineimages",
                "nodes",
                "backingimages",
                "backingimagedatasources",
                "backingimagemanagers",
                "backups",
                "backupbackingimages",
                "backuptargets",
                "backupvolumes",
                "orphans",
                "sharemanagers",
                "snapshots",
                "supportbundles",
                "systembackups",
                "volumeattachments",
            )
        ),
        open_resources=False,
        cleanup="Deletes what the Longhorn object stands for (replica data, backups, engines), then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Uninstall Longhorn with its uninstall job (deleting-confirmation-flag) rather than by hand.",
        source="longhorn/longhorn-manager:datastore/longhorn.go:49",
    ),
    # vmware-tanzu/velero:pkg/controller/restore_controller.go:96 ExternalResourcesFinalizer
    CatalogueEntry(
        finalizer="restores.velero.io/external-resources-finalizer",
        prefix=False,
        project="Velero",
        owner=VELERO_OWNER,
        runtime=VELERO,
        resources=(("velero.io", "restores"),),
        open_resources=False,
        cleanup="Deletes the restore's logs and results from the backup storage location, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the restore's files from the object storage bucket by hand.",
        source="vmware-tanzu/velero:pkg/controller/restore_controller.go:96",
    ),
    # pkg/controller/data_upload_controller.go:61, on DataUploads and DataDownloads, reconciled by the
    # node-agent (pkg/cmd/cli/nodeagent/server.go:432)
    CatalogueEntry(
        finalizer="velero.io/data-upload-download-finalizer",
        prefix=False,
        project="Velero",
        owner=Owner("the Velero node-agent", markers=("velero",)),
        runtime=NODE_AGENT,
        resources=(("velero.io", "datauploads"), ("velero.io", "datadownloads")),
        open_resources=False,
        cleanup="Cancels the data movement and removes it once it has stopped (data_upload_controller.go:190-219).",
        creates_in_namespace=False,
        manual_cleanup="Delete the data mover's leftover pods and volumes in the velero namespace.",
        source="vmware-tanzu/velero:pkg/controller/data_upload_controller.go:61",
    ),
    # pkg/controller/pod_volume_backup_controller.go:57 PodVolumeFinalizer, also on PodVolumeRestores
    # (pod_volume_restore_controller.go:152), reconciled by the node-agent (server.go:388)
    CatalogueEntry(
        finalizer="velero.io/pod-volume-finalizer",
        prefix=False,
        project="Velero",
        owner=Owner("the Velero node-agent", markers=("velero",)),
        runtime=NODE_AGENT,
        resources=(("velero.io", "podvolumebackups"), ("velero.io", "podvolumerestores")),
        open_resources=False,
        cleanup="Cancels the file-system backup or restore of the pod's volume, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the backup or restore of that volume is only left incomplete.",
        source="vmware-tanzu/velero:pkg/controller/pod_volume_backup_controller.go:57",
    ),
    # pkg/syncer/cnsoperator/types/types.go:21-54
    CatalogueEntry(
        finalizer="cns.vmware.com",
        prefix=False,
        project="vSphere CSI",
        owner=CNS_OWNER,
        runtime=CNS,
        resources=(
            ("cns.vmware.com", "cnsnodevmattachments"),
            ("cns.vmware.com", "cnsvolumemetadatas"),
            ("cns.vmware.com", "cnsfileaccessconfigs"),
        ),
        open_resources=False,
        cleanup="Detaches the CNS volume or revokes the file-share access the object stands for, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Detach the volume from the VM (or revoke the file share) in vCenter by hand.",
        source=CNS_SOURCE,
    ),
    CatalogueEntry(
        finalizer="cns.vmware.com/pvc-protection",
        prefix=False,
        project="vSphere CSI",
        owner=CNS_OWNER,
        runtime=CNS,
        resources=(("", "persistentvolumeclaims"),),
        open_resources=False,
        cleanup="Removes it from a Supervisor PVC once the CNS volume is detached from the VM.",
        creates_in_namespace=False,
        manual_cleanup="Detach the volume from the VM in vCenter by hand.",
        source=CNS_SOURCE,
    ),
    CatalogueEntry(
        finalizer="cns.vmware.com/pvc-delete-protection",
        prefix=False,
        project="vSphere CSI",
        owner=CNS_OWNER,
        runtime=CNS,
        resources=(("", "persistentvolumeclaims"),),
        open_resources=False,
        cleanup="Removes it from a Supervisor PVC once the guest cluster's PVC that uses it is gone.",
        creates_in_namespace=False,
        manual_cleanup="Delete the guest cluster's PVC first.",
        source=CNS_SOURCE,
    ),
    CatalogueEntry(
        finalizer="cns.vmware.com/volumesnapshot-protection",
        prefix=False,
        project="vSphere CSI",
        owner=CNS_OWNER,
        runtime=CNS,
        resources=(("snapshot.storage.k8s.io", "volumesnapshots"),),
        open_resources=False,
        cleanup="Removes it from a Supervisor VolumeSnapshot once the guest cluster's snapshot is gone.",
        creates_in_namespace=False,
        manual_cleanup="Delete the guest cluster's VolumeSnapshot first.",
        source=CNS_SOURCE,
    ),
)
