"""What a deleting pod's volumes need before its kubelet can finish it, and which of that is gone (issue 37 §5).

The kubelet deletes a pod only once its volumes are unmounted (pkg/kubelet/status/status_manager.go,
`canBeDeleted`). An unmount needs the volume's backend: an NFS mount whose server is gone hangs in the
kernel (a `hard` mount, the default, retries for ever; kubernetes/kubernetes#31272), a CSI volume needs
its driver's node plugin registered on that node (the CSINode lists the drivers that are), and a CSI
volume attached to the node is detached by the driver's attacher once the kubelet let it go (its
VolumeAttachment, deleted, stays until then). Each backend found gone or unhealthy is said with what
restores it; one that could not be read is not guessed at.

The NFS server is followed where its address names a Service in cluster DNS (`name.namespace.svc...`),
or is the cluster IP of a Service or the IP of a pod that the snapshot holds; any other address (a
server outside the cluster) is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.diagnosis.context import Context
from bot.diagnosis.reading import age, backend, pod_is_ready
from bot.domain.refs import KubeObject, ObjectRef, deletion_time, meta, name_of, service_of_address


@dataclass(frozen=True)
class Broken:
    """One backend a pod's volume needs, found gone or unhealthy: what is wrong, and what restores it."""

    evidence: tuple[str, ...]
    short: str  # in a summary: "NFS server rook-nfs.alp-test.svc.cluster.local is gone"
    restore: str  # the restoring remedy's description
    commands: tuple[str, ...]
    target: ObjectRef  # what the restoring remedy is about


@dataclass(frozen=True)
class Source:
    """One volume of the pod and what serves it."""

    volume: str  # the pod's volume name, with its PersistentVolume where it has one
    nfs_server: str | None = None
    csi_driver: str | None = None


def _claims(pod: KubeObject) -> dict[str, str]:
    """claim name -> the pod's volume name, for persistentVolumeClaim and generic ephemeral volumes."""
    out = {}
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and claim.get("claimName"):
            out[str(claim["claimName"])] = str(volume.get("name"))
        elif isinstance(volume.get("ephemeral"), dict):
            out[f"{name_of(pod)}-{volume.get('name')}"] = str(volume.get("name"))
    return out


def sources(ctx: Context, pod: KubeObject) -> list[Source]:
    """The pod's volumes that have a backend to follow: inline NFS and CSI volumes, and the
    PersistentVolumes (NFS or CSI) bound to its claims."""
    out = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        nfs, csi = volume.get("nfs"), volume.get("csi")
        if isinstance(nfs, dict) and nfs.get("server"):
            out.append(Source(f"volume {volume.get('name')}", nfs_server=str(nfs["server"])))
        if isinstance(csi, dict) and csi.get("driver"):
            out.append(Source(f"volume {volume.get('name')}", csi_driver=str(csi["driver"])))
    claims = _claims(pod)
    namespace = meta(pod).get("namespace")
    for pv in ctx.snapshot.persistent_volumes:
        spec = pv.get("spec") or {}
        claim = spec.get("claimRef") or {}
        if claim.get("namespace") != namespace or str(claim.get("name")) not in claims:
            continue
        what = f"volume {claims[str(claim.get('name'))]} (PersistentVolume {name_of(pv)})"
        nfs, csi = spec.get("nfs"), spec.get("csi")
        if isinstance(nfs, dict) and nfs.get("server"):
            out.append(Source(what, nfs_server=str(nfs["server"])))
        if isinstance(csi, dict) and csi.get("driver"):
            out.append(Source(what, csi_driver=str(csi["driver"])))
    return out


def _unread(ctx: Context, what: str) -> bool:
    """Whether a read about `what` (e.g. "service ns/name") failed: then nothing is said of it."""
    return any(what in gap.what for gap in ctx.snapshot.gaps)


def _nfs(ctx: Context, source: Source, server: str) -> Broken | None:
    service = service_of_address(server)
    if service is None:
        return _nfs_by_ip(ctx, source, server)
    namespace, name = service
    if _unread(ctx, f"service {namespace}/{name}"):
        return None
    chain = backend(ctx.snapshot, namespace, name)
    if chain.healthy:
        return None
    where = f"{namespace} (the namespace being deleted)" if namespace == ctx.snapshot.namespace else namespace
    if not chain.exists:
        state = f"its Service {name} in {where} no longer exists"
        short = f"NFS server {server} is gone"
    else:
        state = f"its Service {name} in {where} has no ready endpoint"
        short = f"NFS server {server} does not answer (no ready endpoint)"
    evidence = (
        f"{source.volume} is an NFS share of server {server}: {state}; an NFS mount whose server is gone cannot "
        "be unmounted (a hard mount retries for ever), so the kubelet cannot finish the pod",
        *(chain.evidence[:4] if chain.exists else ()),
    )
    return Broken(
        evidence=evidence,
        short=short,
        restore=f"Bring the NFS server {server} back (Service {name} in {namespace} and its pods) until the pods "
        "that mount it are gone; the kubelet can then unmount and finish them",
        commands=(
            f"kubectl -n {namespace} get service {name}",
            f"kubectl -n {namespace} get pods,endpointslices -o wide",
        ),
        target=ObjectRef(api_version="v1", kind="Service", name=name, namespace=namespace, resource="services"),
    )


def _nfs_by_ip(ctx: Context, source: Source, server: str) -> Broken | None:
    """An NFS server given by IP: a Service's cluster IP or a pod's IP that the snapshot holds, if any."""
    for service in ctx.snapshot.services:
        if (service.get("spec") or {}).get("clusterIP") == server:
            m = meta(service)
            return _nfs(ctx, source, f"{m.get('name')}.{m.get('namespace')}.svc")
    pods = [*ctx.snapshot.objects("pods"), *ctx.snapshot.backend_pods]
    for pod in pods:
        if (pod.get("status") or {}).get("podIP") != server:
            continue
        if deletion_time(pod) is None and pod_is_ready(pod):
            return None
        state = "is being deleted" if deletion_time(pod) is not None else "is not Ready"
        namespace = str(meta(pod).get("namespace"))
        return Broken(
            evidence=(
                f"{source.volume} is an NFS share of server {server}, which is pod {name_of(pod)} in {namespace}: "
                f"it {state}; an NFS mount whose server is gone cannot be unmounted",
            ),
            short=f"NFS server {server} (pod {name_of(pod)}) {state}",
            restore=f"Bring the NFS server {server} (pod {name_of(pod)} in {namespace}) back until the pods that "
            "mount it are gone",
            commands=(f"kubectl -n {namespace} get pod {name_of(pod)} -o wide",),
            target=ObjectRef(api_version="v1", kind="Pod", name=name_of(pod), namespace=namespace, resource="pods"),
        )
    return None


def _csi(ctx: Context, source: Source, driver: str, node: str) -> Broken | None:
    if node not in ctx.snapshot.csi_nodes:
        return None  # not read (a gap says why)
    csi_node = ctx.snapshot.csi_nodes[node]
    registered = [str(d.get("name")) for d in ((csi_node or {}).get("spec") or {}).get("drivers") or ()]
    if driver in registered:
        return None
    if csi_node is None:
        state = f"node {node} has no CSINode: no CSI node plugin is registered there"
    else:
        state = (
            f"CSINode {node} lists {', '.join(registered)}, not {driver}"
            if registered
            else f"CSINode {node} lists no driver"
        )
    return Broken(
        evidence=(
            f"{source.volume} is served by CSI driver {driver}, which has no node plugin on node {node} ({state}): "
            "the kubelet cannot unmount the volume without it",
        ),
        short=f"CSI driver {driver} has no node plugin on node {node}",
        restore=f"Bring back the node plugin of CSI driver {driver} on node {node} (its DaemonSet's pod there); "
        "the kubelet then unmounts the volume and finishes the pod",
        commands=(
            f"kubectl get csinode {node} -o yaml",
            f"kubectl get pods -A -o wide --field-selector spec.nodeName={node}",
        ),
        target=ObjectRef(api_version="storage.k8s.io/v1", kind="CSIDriver", name=driver, resource="csidrivers"),
    )


def _detaching(attachment: KubeObject, node: str, now: datetime, bound: timedelta) -> Broken | None:
    deleted = deletion_time(attachment)
    if deleted is None or now - deleted <= bound:
        return None
    spec = attachment.get("spec") or {}
    volume = (spec.get("source") or {}).get("persistentVolumeName")
    attacher = spec.get("attacher") or "its CSI driver"
    name = name_of(attachment)
    return Broken(
        evidence=(
            f"VolumeAttachment {name} (volume {volume} on node {node}) has been detaching for {age(deleted, now)} "
            f"(deleted at {meta(attachment).get('deletionTimestamp')}, still attached: "
            f"{bool((attachment.get('status') or {}).get('attached'))}): {attacher} has not finished the detach",
        ),
        short=f"VolumeAttachment {name} has been stuck detaching for {age(deleted, now)}",
        restore=f"Make {attacher} finish detaching volume {volume} from node {node} (its controller plugin and "
        "external-attacher must run; the volume must be unmounted on the node)",
        commands=(f"kubectl describe volumeattachment {name}", f"kubectl get volumeattachment {name} -o yaml"),
        target=ObjectRef(
            api_version="storage.k8s.io/v1", kind="VolumeAttachment", name=name, resource="volumeattachments"
        ),
    )


def broken_backends(
    ctx: Context, pod: KubeObject, node: str, attachments: list[KubeObject], bound: timedelta
) -> list[Broken]:
    """The backends the pod's volumes need that are gone or unhealthy, each once."""
    out: list[Broken] = []
    for source in sources(ctx, pod):
        found = None
        if source.nfs_server:
            found = _nfs(ctx, source, source.nfs_server)
        elif source.csi_driver:
            found = _csi(ctx, source, source.csi_driver, node)
        if found is not None and found.target not in [b.target for b in out]:
            out.append(found)
    for attachment in attachments:
        found = _detaching(attachment, node, ctx.now, bound)
        if found is not None:
            out.append(found)
    return out


def unread_volume_reads(ctx: Context, pods: list[KubeObject], node: str) -> list[str]:
    """The gaps among the reads of what these pods' volumes need: the PersistentVolumes, the node's CSINode,
    the Services (and their pods) of their NFS servers."""
    services = {
        f"{s[0]}/{s[1]}"
        for pod in pods
        for source in sources(ctx, pod)
        if source.nfs_server and (s := service_of_address(source.nfs_server))
    }
    wanted = {"list persistentvolumes", f"get csinode {node}"}
    for service in services:
        wanted |= {f"get service {service}", f"list pods of service {service}"}
    return [str(gap) for gap in ctx.snapshot.gaps if gap.what in wanted]
