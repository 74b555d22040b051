"""Server-side printing (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``) for the columns
kubectl shows by default. Ages are computed on the emulator's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .clock import parse_rfc3339
from .registry import ResourceType

if TYPE_CHECKING:
    from .apiserver import Cluster

NAME_COL = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
AGE_COL = {
    "name": "Age",
    "type": "string",
    "format": "",
    "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
    "priority": 0,
}


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _col(name: str, type_: str = "string", priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": "", "priority": priority}


def _age(cluster: Cluster, obj: dict[str, Any]) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    return human_duration((cluster.clock.now() - parse_rfc3339(ts)).total_seconds())


def _pod_row(obj: dict[str, Any]) -> list[Any]:
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    containers = spec.get("containers") or []
    cstatuses = status.get("containerStatuses") or []
    ready = sum(1 for c in cstatuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cstatuses)
    reason = status.get("reason") or status.get("phase") or ""
    for c in cstatuses:
        st = c.get("state") or {}
        if st.get("waiting", {}).get("reason"):
            reason = st["waiting"]["reason"]
        elif st.get("terminated", {}).get("reason"):
            reason = st["terminated"]["reason"]
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    ip = status.get("podIP") or "<none>"
    node = spec.get("nodeName") or "<none>"
    return [f"{ready}/{len(containers)}", reason, restarts, ip, node, "<none>", "<none>"]


def _node_status(obj: dict[str, Any]) -> str:
    """pkg/printers/internalversion/printers.go, printNode: `Ready` when the Ready condition is True,
    `NotReady` for False and Unknown alike (a lost kubelet's node reads NotReady), `Unknown` without one."""
    conds = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    text = "Unknown"
    if ready is not None:
        text = "Ready" if ready.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: dict[str, Any]) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    return ",".join(roles) or "<none>"


def _jsonpath(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.strip().lstrip(".").split("."):
        if not part:
            continue
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def columns_and_row(cluster: Cluster, rt: ResourceType) -> tuple[list[dict[str, Any]], Any]:
    g, p = rt.group, rt.plural
    if g == "" and p == "namespaces":
        return [NAME_COL, _col("Status"), AGE_COL], lambda o: [(o.get("status") or {}).get("phase", "")]
    if g == "" and p == "pods":
        cols = [
            NAME_COL,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "string"),
            AGE_COL,
            _col("IP", priority=1),
            _col("Node", priority=1),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ]

        def pod_cells(o: dict[str, Any]) -> list[Any]:
            return _pod_row(o)

        return cols, pod_cells
    if g == "" and p == "nodes":
        return [NAME_COL, _col("Status"), _col("Roles"), AGE_COL, _col("Version")], lambda o: [
            _node_status(o),
            _node_roles(o),
            ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
        ]
    if g == "" and p == "services":

        def svc(o: dict[str, Any]) -> list[Any]:
            spec = o.get("spec") or {}
            ports = (
                ",".join(f"{pt.get('port')}/{pt.get('protocol', 'TCP')}" for pt in spec.get("ports") or []) or "<none>"
            )
            return [spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"), "<none>", ports]

        return [NAME_COL, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), AGE_COL], svc
    if g == "" and p == "configmaps":
        return [NAME_COL, _col("Data", "integer"), AGE_COL], lambda o: [
            len(o.get("data") or {}) + len(o.get("binaryData") or {})
        ]
    if g == "" and p == "secrets":
        return [NAME_COL, _col("Type"), _col("Data", "integer"), AGE_COL], lambda o: [
            o.get("type", "Opaque"),
            len(o.get("data") or {}),
        ]
    if g == "" and p == "persistentvolumeclaims":

        def pvc(o: dict[str, Any]) -> list[Any]:
            spec = o.get("spec") or {}
            st = o.get("status") or {}
            phase = "Terminating" if (o.get("metadata") or {}).get("deletionTimestamp") else st.get("phase", "")
            cap = (st.get("capacity") or {}).get("storage", "")
            modes = ",".join(
                {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}.get(
                    m, m
                )
                for m in st.get("accessModes") or []
            )
            return [phase, spec.get("volumeName", ""), cap, modes, spec.get("storageClassName", "<unset>"), "<unset>"]

        return [
            NAME_COL,
            _col("Status"),
            _col("Volume"),
            _col("Capacity"),
            _col("Access Modes"),
            _col("StorageClass"),
            _col("VolumeAttributesClass"),
            AGE_COL,
        ], pvc
    if g == "apps" and p in ("deployments",):

        def dep(o: dict[str, Any]) -> list[Any]:
            st = o.get("status") or {}
            want = (o.get("spec") or {}).get("replicas", 1)
            return [
                f"{st.get('readyReplicas', 0)}/{want}",
                st.get("updatedReplicas", 0),
                st.get("availableReplicas", 0),
            ]

        return [NAME_COL, _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"), AGE_COL], dep
    if g == "apiregistration.k8s.io" and p == "apiservices":

        def apisvc(o: dict[str, Any]) -> list[Any]:
            svc_ref = (o.get("spec") or {}).get("service")
            service = f"{svc_ref.get('namespace')}/{svc_ref.get('name')}" if svc_ref else "Local"
            conds = (o.get("status") or {}).get("conditions") or []
            av = next((c for c in conds if c.get("type") == "Available"), None)
            if av is None:
                avail = "Unknown"
            elif av.get("status") == "True":
                avail = "True"
            else:
                avail = f"{av.get('status')} ({av.get('reason', '')})"
            return [service, avail]

        return [NAME_COL, _col("Service"), _col("Available"), AGE_COL], apisvc
    if g == "storage.k8s.io" and p == "volumeattachments":
        # pkg/printers/internalversion/printers.go printVolumeAttachment
        def attachment(o: dict[str, Any]) -> list[Any]:
            spec = o.get("spec") or {}
            pv = (spec.get("source") or {}).get("persistentVolumeName") or ""
            return [
                spec.get("attacher", ""),
                pv,
                spec.get("nodeName", ""),
                bool((o.get("status") or {}).get("attached")),
            ]

        cols = [NAME_COL, _col("Attacher"), _col("PV"), _col("Node"), _col("Attached", "boolean"), AGE_COL]
        return cols, attachment
    if g == "coordination.k8s.io" and p == "leases":
        # printLease
        return [NAME_COL, _col("Holder"), AGE_COL], lambda o: [(o.get("spec") or {}).get("holderIdentity", "")]
    if g == "apiextensions.k8s.io" and p == "customresourcedefinitions":
        return [NAME_COL, _col("Created At", "date")], lambda o: [
            (o.get("metadata") or {}).get("creationTimestamp", "")
        ]
    if rt.custom:
        crd = cluster.store.get(("apiextensions.k8s.io", "customresourcedefinitions"), "", f"{p}.{g}")
        extra: list[dict[str, Any]] = []
        if crd is not None:
            for v in (crd.obj.get("spec") or {}).get("versions") or []:
                if v.get("name") == rt.version:
                    extra = v.get("additionalPrinterColumns") or []
        if extra:
            cols = [NAME_COL] + [
                _col(c.get("name", ""), c.get("type", "string"), int(c.get("priority") or 0)) for c in extra
            ]

            def cr(o: dict[str, Any]) -> list[Any]:
                out = []
                for c in extra:
                    val = _jsonpath(o, c.get("jsonPath", ""))
                    if c.get("type") == "date" and isinstance(val, str):
                        val = _age(cluster, {"metadata": {"creationTimestamp": val}})
                    out.append(val)
                return out

            return cols, ("custom", cr)
    return [NAME_COL, AGE_COL], lambda o: []


def to_table(
    cluster: Cluster, rt: ResourceType, obj: dict[str, Any], *, is_list: bool, include_object: str
) -> dict[str, Any]:
    cols, fn = columns_and_row(cluster, rt)
    custom_cells = isinstance(fn, tuple)
    cell_fn = fn[1] if custom_cells else fn
    items = obj.get("items") or [] if is_list else [obj]
    rows = []
    with_age = any(c["name"] == "Age" for c in cols)
    for raw_item in items:
        item = raw_item
        if is_list and rt.custom is False:
            item = {"apiVersion": rt.api_version, "kind": rt.kind, **raw_item}
        name = (item.get("metadata") or {}).get("name", "")
        cells: list[Any] = [name, *cell_fn(item)]
        if with_age:
            idx = next(i for i, c in enumerate(cols) if c["name"] == "Age")
            cells.insert(idx, _age(cluster, item))
        while len(cells) < len(cols):
            cells.append("<none>")
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = item
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item.get("metadata") or {},
            }
        rows.append(row)
    meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")} if is_list else {}
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": cols, "rows": rows}
