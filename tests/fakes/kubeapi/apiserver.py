"""What the API server does with a request once it is routed: the generic registry store, the
type strategies that matter for deletion, and the namespace/CRD/APIService special cases.

Every method is called with the store lock NOT held and takes it itself; nothing here sleeps.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import admission, events_v1, rbac, webhookcalls
from . import discovery as discovery_versions
from .clock import Clock, go_time, parse_rfc3339, rfc3339
from .errors import (
    ApiError,
    FieldError,
    already_exists,
    bad_request,
    conflict,
    go_quote,
    go_string_slice,
    invalid,
    method_not_allowed,
    method_not_supported,
    not_found,
    optimistic_lock,
)
from .knobs import Knobs
from .patching import PatchError, json_patch, merge_patch, strategic_merge_patch
from .registry import BUILTIN_TYPES, AggregatedBackend, ResourceType, crd_types, version_priority_key
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .store import Entry, Store, canonical, dumps

# types served outside pkg/apis/core validation (apiextensions-apiserver, kube-aggregator): their
# finalizer names only need to be qualified names (e.g. customresourcecleanup.apiextensions.k8s.io)
GENERIC_META_VALIDATION = frozenset(
    {("apiextensions.k8s.io", "customresourcedefinitions"), ("apiregistration.k8s.io", "apiservices")}
)
CREATE_ON_UPDATE = frozenset({"endpoints", "events"})  # strategies with AllowCreateOnUpdate() true
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
NAMESPACES = ("", "namespaces")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
APISERVICES = ("apiregistration.k8s.io", "apiservices")

# (groupPriorityMinimum, versionPriority) of the built-in APIServices, as kube-apiserver registers them
BUILTIN_PRIORITIES: dict[str, tuple[int, int]] = {
    "": (18000, 1),
    "apiregistration.k8s.io": (18000, 15),
    "apps": (17800, 15),
    "events.k8s.io": (17750, 15),
    "authentication.k8s.io": (17700, 15),
    "authorization.k8s.io": (17600, 15),
    "autoscaling": (17500, 30),
    "batch": (17400, 15),
    "certificates.k8s.io": (17300, 15),
    "networking.k8s.io": (17200, 15),
    "policy": (17100, 15),
    "rbac.authorization.k8s.io": (17000, 15),
    "storage.k8s.io": (16800, 15),
    "admissionregistration.k8s.io": (16700, 15),
    "apiextensions.k8s.io": (16700, 15),
    "scheduling.k8s.io": (16600, 15),
    "coordination.k8s.io": (16500, 15),
    "node.k8s.io": (16300, 15),
    "discovery.k8s.io": (16200, 15),
    "flowcontrol.apiserver.k8s.io": (16100, 21),
}

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@dataclass
class Ctx:
    """Per-request context."""

    user: str
    dry_run: bool = False
    admin: bool = False
    warnings: list[str] = field(default_factory=list)
    identity: rbac.UserInfo | None = None  # the (possibly impersonated) user with its groups
    # the field manager of a write: `?fieldManager=`, else the User-Agent up to its first "/"
    manager: str = ""
    operation: str = "Update"  # Apply for server-side apply
    collection: bool = False  # a delete-collection's item: admission sees no name
    admitted: bool = False  # admission already ran (a namespace DELETE's webhooks, called outside the lock)


_MANAGED_META = ("labels", "annotations", "finalizers", "ownerReferences")


def _changed_fields(new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """The fields a write set or changed, as a FieldsV1 set two levels deep (`f:status: {f:conditions: {}}`)."""
    before = old or {}
    out: dict[str, Any] = {}
    new_meta, old_meta = new.get("metadata") or {}, before.get("metadata") or {}
    meta = {f"f:{k}": {} for k in _MANAGED_META if new_meta.get(k) and new_meta.get(k) != old_meta.get(k)}
    if meta:
        out["f:metadata"] = meta
    for key, value in new.items():
        if key in ("apiVersion", "kind", "metadata") or value is None or value == before.get(key):
            continue
        was = before.get(key)
        if isinstance(value, dict):
            out[f"f:{key}"] = {f"f:{k}": {} for k, v in value.items() if not isinstance(was, dict) or was.get(k) != v}
        else:
            out[f"f:{key}"] = {}
    return out


def record_managed_fields(
    rt: ResourceType, new: dict[str, Any], old: dict[str, Any] | None, *, ctx: Ctx, sub: str | None, now: str
) -> None:
    """What the field manager of the real API server keeps in `metadata.managedFields`: per manager,
    operation and subresource, the fields it set and when it last changed one (its `time`). Managed
    fields sent with the write replace the stored ones (as the API server accepts them); ownership is
    not taken from other managers (the emulator has no conflict detection)."""
    meta = new["metadata"]
    sent = meta.get("managedFields")
    kept = (old or {}).get("metadata", {}).get("managedFields") or []
    entries = [dict(e) for e in (sent if sent and sent != kept else kept) if isinstance(e, dict)]
    changed = _changed_fields(new, old)
    if changed:
        subresource = sub if sub in ("status", "scale", "finalize") else ""
        api_version = f"{rt.group}/{rt.version}" if rt.group else rt.version
        same = next(
            (
                e
                for e in entries
                if e.get("manager", "") == ctx.manager
                and e.get("operation") == ctx.operation
                and e.get("subresource", "") == subresource
            ),
            None,
        )
        if same is None:
            same = {"manager": ctx.manager, "operation": ctx.operation, "apiVersion": api_version}
            if subresource:
                same["subresource"] = subresource
            entries.append(same)
        fields = dict(same.get("fieldsV1") or {})
        for key, value in changed.items():
            fields[key] = {**(fields.get(key) or {}), **value}
        same.update({"apiVersion": api_version, "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


@dataclass
class Result:
    code: int
    body: Any  # dict or bytes (already serialised JSON)
    warnings: list[str] = field(default_factory=list)


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    uid: str | None = None
    resource_version: str | None = None

    def as_options(self, *, dry_run: bool) -> dict[str, Any]:
        """The DeleteOptions an AdmissionReview carries as ``options`` (meta.k8s.io/v1, the fields set)."""
        out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period_seconds is not None:
            out["gracePeriodSeconds"] = self.grace_period_seconds
        pre = {k: v for k, v in (("uid", self.uid), ("resourceVersion", self.resource_version)) if v is not None}
        if pre:
            out["preconditions"] = pre
        if self.orphan_dependents is not None:
            out["orphanDependents"] = self.orphan_dependents
        if self.propagation_policy:
            out["propagationPolicy"] = self.propagation_policy
        if dry_run:
            out["dryRun"] = ["All"]
        return out

    @classmethod
    def parse(cls, body: dict[str, Any] | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        opts = cls()
        gps = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        if gps is not None and gps != "":
            try:
                opts.grace_period_seconds = int(gps)
            except (TypeError, ValueError) as exc:
                raise bad_request(f"invalid gracePeriodSeconds: {gps}") from exc
        opts.propagation_policy = body.get("propagationPolicy", query.get("propagationPolicy")) or None
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if isinstance(orphan, str):
            orphan = orphan.lower() == "true"
        opts.orphan_dependents = orphan
        pre = body.get("preconditions") or {}
        opts.uid = pre.get("uid")
        opts.resource_version = pre.get("resourceVersion")
        errs: list[FieldError] = []
        if opts.orphan_dependents is not None and opts.propagation_policy is not None:
            errs.append(
                FieldError(
                    "propagationPolicy",
                    "Invalid value",
                    "orphanDependents and deletionPropagation cannot be both set",
                    go_quote(opts.propagation_policy),
                )
            )
        if opts.propagation_policy is not None and opts.propagation_policy not in (
            "Foreground",
            "Background",
            "Orphan",
        ):
            errs.append(
                FieldError(
                    "propagationPolicy",
                    "Unsupported value",
                    'supported values: "Foreground", "Background", "Orphan"',
                    go_quote(opts.propagation_policy),
                )
            )
        if errs:
            raise invalid("DeleteOptions", "meta.k8s.io", "", errs)
        return opts


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _strip_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def _spec_part(obj: dict[str, Any], with_status: bool = False) -> dict[str, Any]:
    """Everything a generation bump looks at (custom resources without a status subresource: status too)."""
    skip = ("metadata", "apiVersion", "kind") if with_status else ("metadata", "status", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


class Cluster:
    """The state of the emulated cluster and the API semantics over it."""

    def __init__(self, clock: Clock, knobs: Knobs, seed: int = 0, server_address: str = "127.0.0.1:6443") -> None:
        self.clock = clock
        self.knobs = knobs
        self.store = Store(seed=seed)
        self.server_address = server_address
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.backends: dict[tuple[str, str], AggregatedBackend] = {}
        self.tokens: dict[str, str] = {}  # token -> user, shared with the emulator
        self.options: dict[str, Any] = {}  # the emulator's options, shared
        self.admin_users: set[str] = set()
        self.rbac = False  # emu.enable_rbac(): authorize by the stored RBAC objects (rbac.py)
        # (namespace, service, port) -> (host, port): where a webhook's Service is served (emu.route_service)
        self.service_routes: dict[tuple[str, str, int], tuple[str, int]] = {}
        self._next_ip = 10
        for rt in BUILTIN_TYPES:
            self.types[(rt.group, rt.version, rt.plural)] = rt
        self._bootstrap()

    # -- bootstrap --------------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        ctx = Ctx(user="system:apiserver")
        for name in ("default", "kube-node-lease", "kube-public", "kube-system"):
            self.create(self.rt("", "v1", "namespaces"), "", {"metadata": {"name": name}}, ctx)
        versions = sorted({(rt.group, rt.version) for rt in BUILTIN_TYPES})
        for group, version in versions:
            self._ensure_local_apiservice(group, version)
        self.create(
            self.rt("", "v1", "services"),
            "default",
            {
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {
                    "clusterIP": "10.96.0.1",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                },
            },
            ctx,
        )
        self.register_aggregated_backend(
            "metrics.k8s.io",
            "v1beta1",
            [
                {
                    "name": "nodes",
                    "singularName": "",
                    "namespaced": False,
                    "kind": "NodeMetrics",
                    "verbs": ["get", "list"],
                },
                {
                    "name": "pods",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "PodMetrics",
                    "verbs": ["get", "list"],
                },
            ],
        )

    def _ensure_local_apiservice(self, group: str, version: str, *, automanaged: str = "onstart") -> None:
        name = f"{version}.{group}"
        with self.store.lock:
            if self.store.get(APISERVICES, "", name) is not None:
                return
            gpm, vp = BUILTIN_PRIORITIES.get(group, (1000, 100))
            spec: dict[str, Any] = {"version": version, "groupPriorityMinimum": gpm, "versionPriority": vp}
            if group:
                spec = {"group": group, **spec}
            obj = {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {
                    "name": name,
                    "labels": {"kube-aggregator.kubernetes.io/automanaged": automanaged},
                },
                "spec": spec,
            }
            self.create(self.rt("apiregistration.k8s.io", "v1", "apiservices"), "", obj, Ctx(user="system:apiserver"))

    def register_aggregated_backend(
        self, group: str, version: str, resources: list[dict[str, Any]], *, honours_discovery_accept: bool = True
    ) -> None:
        with self.store.lock:
            self.backends[(group, version)] = AggregatedBackend(
                group, version, [dict(r) for r in resources], honours_discovery_accept
            )

    def backend(self, group: str, version: str) -> AggregatedBackend | None:
        """The backend of a non-Local APIService: one registered, or one the option `aggregated_backends`
        declares (a list of {group, version, resources, honours_discovery_accept}; the corpus sets it)."""
        found = self.backends.get((group, version))
        if found is not None:
            return found
        for spec in self.options.get("aggregated_backends") or ():
            if spec.get("group") == group and spec.get("version") == version:
                return AggregatedBackend(
                    group,
                    version,
                    [dict(r) for r in spec.get("resources") or ()],
                    bool(spec.get("honours_discovery_accept", True)),
                )
        return None

    # -- type lookup ------------------------------------------------------------------------------
    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        return self.types[(group, version, plural)]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        found = self.types.get((group, version, plural))
        return found if found is not None and self.serves(found) else None

    def serves(self, rt: ResourceType) -> bool:
        """Whether a server of the emulated version (option `server_version`) serves the type."""
        if not rt.since_minor:
            return True
        minor, _ = discovery_versions.minor_patch(self.options.get("server_version"))
        return minor is None or minor >= rt.since_minor

    def types_for(self, group: str, version: str) -> list[ResourceType]:
        return sorted(
            (rt for k, rt in self.types.items() if k[0] == group and k[1] == version and self.serves(rt)),
            key=lambda r: r.plural,
        )

    def served_versions(self, group: str) -> list[str]:
        return sorted(
            {k[1] for k, rt in self.types.items() if k[0] == group and self.serves(rt)}, key=version_priority_key
        )

    def now(self) -> str:
        return rfc3339(self.clock.now())

    def apiservice(self, group: str, version: str) -> dict[str, Any] | None:
        entry = self.store.get(APISERVICES, "", f"{version}.{group}")
        return entry.obj if entry else None

    # -- validation helpers -------------------------------------------------------------------------
    def _finalizer_errors(
        self, rt: ResourceType, finalizers: list[Any], path: str, ctx: Ctx, old: list[Any] | None = None
    ) -> list[FieldError]:
        errs: list[FieldError] = []
        # custom resources: WarningsOnCreate/Update warn about the (newly added) names, as a sorted set
        warn_for = sorted({f for f in finalizers if isinstance(f, str)} - {f for f in old or [] if isinstance(f, str)})
        for i, fin in enumerate(finalizers):
            fpath = f"{path}[{i}]"
            if not isinstance(fin, str):
                errs.append(FieldError(fpath, "Invalid value", "must be a string", json.dumps(fin)))
                continue
            prefix, _, name_part = fin.rpartition("/")
            if (prefix and not _DNS1123_SUBDOMAIN.match(prefix)) or not _QUALIFIED_NAME.match(name_part or ""):
                detail = QUALIFIED_NAME_MSG
                if prefix and not _DNS1123_SUBDOMAIN.match(prefix):
                    detail = (
                        "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                        "characters, "
                        "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                        "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                    )
                errs.append(FieldError(fpath, "Invalid value", detail, go_quote(fin)))
                continue
            if "/" in fin or fin in STANDARD_FINALIZERS:
                continue
            if (rt.group, rt.plural) in GENERIC_META_VALIDATION:
                continue  # validated by apimachinery's ValidateObjectMeta only: any qualified name
            if rt.custom:
                continue
            errs.append(
                FieldError(
                    fpath,
                    "Invalid value",
                    "name is neither a standard finalizer name nor is it fully qualified",
                    go_quote(fin),
                )
            )
        if rt.custom:
            for fin in warn_for:
                if "/" in fin or fin in STANDARD_FINALIZERS or not _QUALIFIED_NAME.match(fin):
                    continue
                if "." in fin:
                    ctx.warnings.append(
                        f"metadata.finalizers: {go_quote(fin)}: prefer a domain-qualified finalizer name including a "
                        "path (/) to avoid accidental conflicts with other finalizer writers"
                    )
                else:
                    ctx.warnings.append(
                        f"metadata.finalizers: {go_quote(fin)}: prefer a domain-qualified finalizer name to avoid "
                        "accidental conflicts with other finalizer writers"
                    )
        strs = [f for f in finalizers if isinstance(f, str)]
        if ORPHAN in strs and FOREGROUND in strs and path == "metadata.finalizers":
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    "finalizer orphan and foregroundDeletion cannot be both set",
                    go_string_slice(strs),
                )
            )
        return errs

    def _validate_meta(
        self, rt: ResourceType, obj: dict[str, Any], ctx: Ctx, old: dict[str, Any] | None = None
    ) -> list[FieldError]:
        meta = _meta(obj)
        fins = meta.get("finalizers") or []
        if not isinstance(fins, list):
            return [FieldError("metadata.finalizers", "Invalid value", "must be a list", json.dumps(fins))]
        old_fins = ((old or {}).get("metadata") or {}).get("finalizers") or []
        return self._finalizer_errors(rt, fins, "metadata.finalizers", ctx, old_fins)

    def _validate_type(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        if rt.group == "" and rt.plural == "pods" and old is None and not spec.get("containers"):
            errs.append(FieldError("spec.containers", "Required value"))
        if rt.group == "" and rt.plural == "namespaces":
            for i, fin in enumerate(spec.get("finalizers") or []):
                if isinstance(fin, str) and "/" not in fin and fin not in STANDARD_FINALIZERS:
                    errs.append(
                        FieldError(
                            f"spec.finalizers[{i}]",
                            "Invalid value",
                            "name is neither a standard finalizer name nor is it fully qualified",
                            go_quote(fin),
                        )
                    )
        if rt.group == "admissionregistration.k8s.io" and rt.kind in admission.WEBHOOK_CONFIG_KINDS:
            # admissionregistration/validation: the only check of a webhook the emulator makes
            for i, hook in enumerate(obj.get("webhooks") or []):
                timeout = hook.get("timeoutSeconds") if isinstance(hook, dict) else None
                if isinstance(timeout, int) and not 1 <= timeout <= 30:
                    errs.append(
                        FieldError(
                            f"webhooks[{i}].timeoutSeconds",
                            "Invalid value",
                            "the timeout value must be between 1 and 30 seconds",
                            str(timeout),
                        )
                    )
        if rt.group == "apiregistration.k8s.io" and rt.plural == "apiservices":
            name = obj["metadata"].get("name", "")
            expected = f"{spec.get('version', '')}.{spec.get('group', '')}"
            if name != expected:
                errs.append(
                    FieldError(
                        "metadata.name", "Invalid value", 'must be `spec.version+"."+spec.group`', go_quote(name)
                    )
                )
            gpm = spec.get("groupPriorityMinimum") or 0
            if not (0 < gpm <= 20000):
                errs.append(
                    FieldError(
                        "spec.groupPriorityMinimum", "Invalid value", "must be positive and less than 20000", str(gpm)
                    )
                )
            vp = spec.get("versionPriority") or 0
            if not (0 < vp <= 1000):
                errs.append(
                    FieldError("spec.versionPriority", "Invalid value", "must be positive and less than 1000", str(vp))
                )
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            names = spec.get("names") or {}
            name = obj["metadata"].get("name", "")
            if name != f"{names.get('plural', '')}.{spec.get('group', '')}":
                errs.append(
                    FieldError(
                        "metadata.name", "Invalid value", 'must be spec.names.plural+"."+spec.group', go_quote(name)
                    )
                )
            if not spec.get("versions"):
                errs.append(
                    FieldError(
                        "spec.versions",
                        "Invalid value",
                        "must have exactly one version marked as storage version",
                        "null",
                    )
                )
        return errs

    # -- reads --------------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> Result:
        with self.store.lock:
            entry = self.store.get(rt.key, namespace if rt.namespaced else "", name)
            if entry is None:
                raise not_found(rt, name)
            return Result(200, self._as_version(rt, entry, item=False))

    def _as_version(self, rt: ResourceType, entry: Entry, *, item: bool) -> bytes:
        if rt.group == events_v1.GROUP:
            obj = events_v1.to_events_v1(entry.obj)
            return dumps({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} if item else obj)
        if rt.custom and entry.obj.get("apiVersion") != rt.api_version:
            obj = entry.copy()
            obj["apiVersion"] = rt.api_version
            return dumps(obj)
        return entry.item_raw(item and not rt.custom)

    def list_objects(
        self,
        rt: ResourceType,
        namespace: str | None,
        query: dict[str, str],
    ) -> Result:
        label_reqs = parse_label_selector(query.get("labelSelector", ""))
        field_reqs = parse_field_selector(query.get("fieldSelector", ""), rt.kind, rt.custom)
        limit = int(query.get("limit") or 0)
        cont = query.get("continue") or ""
        start: tuple[str, str] | None = None
        if cont:
            try:
                token = json.loads(base64.b64decode(cont))
                start = (token["ns"], token["name"])
            except (ValueError, KeyError, TypeError) as exc:
                raise bad_request("continue key is not valid: illegal base64 data") from exc
        with self.store.lock:
            rv = self.store.rv
            entries = self.store.items(rt.key, namespace if rt.namespaced else None)
            chunks: list[bytes] = []
            last: tuple[str, str] | None = None
            remaining = 0
            for entry in entries:
                meta = entry.obj["metadata"]
                k = (meta.get("namespace", ""), meta["name"])
                if start is not None and k <= start:
                    continue
                if label_reqs and not labels_match(label_reqs, meta.get("labels")):
                    continue
                if field_reqs and not fields_match(field_reqs, entry.obj):
                    continue
                if limit and len(chunks) >= limit:
                    remaining += 1
                    continue
                chunks.append(self._as_version(rt, entry, item=True))
                last = k
        list_meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if remaining and last is not None:
            list_meta["continue"] = base64.b64encode(
                json.dumps({"rv": rv, "ns": last[0], "name": last[1]}).encode()
            ).decode()
            list_meta["remainingItemCount"] = remaining
        head = dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": list_meta})
        body = head[:-1] + b',"items":[' + b",".join(chunks) + b"]}"
        return Result(200, body)

    # -- create -------------------------------------------------------------------------------------
    def create(self, rt: ResourceType, namespace: str, body: Any, ctx: Ctx) -> Result:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj = copy.deepcopy(body)
        self._check_type_meta(rt, obj)
        meta = _meta(obj)
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if rt.group in ("authentication.k8s.io", "authorization.k8s.io"):
            return self._review(rt, namespace, obj, ctx)
        with self.store.lock:
            if rt.custom:
                crd = self.store.get(CRDS, "", f"{rt.plural}.{rt.group}")
                if crd is not None and crd.obj["metadata"].get("deletionTimestamp"):
                    raise method_not_supported(rt.plural, rt.group, "create")
            # mutating admission
            admission.namespace_lifecycle_create(self, rt, namespace, meta.get("name", ""))
            admission.run_webhooks(
                self, "mutating", "CREATE", rt, sub=None, namespace=namespace, obj=obj, dry_run=ctx.dry_run
            )
            # rest.BeforeCreate
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + self.store.random_suffix()
                else:
                    raise invalid(
                        rt.kind,
                        rt.group,
                        "",
                        [FieldError("metadata.name", "Required value", "name or generateName is required")],
                    )
            name = meta["name"]
            sent_rv = str(meta.pop("resourceVersion", "") or "")
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                meta.pop(k, None)
            meta["uid"] = self.store.new_uid()
            meta["creationTimestamp"] = self.now()
            if rt.uses_generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            self._prepare_for_create(rt, obj)
            errs = _name_errors(rt, name) + self._validate_meta(rt, obj, ctx) + self._validate_type(rt, obj, None)
            if errs:
                raise invalid(rt.kind, rt.group, name, errs)
            admission.run_webhooks(
                self, "validating", "CREATE", rt, sub=None, namespace=namespace, obj=obj, dry_run=ctx.dry_run
            )
            if sent_rv not in ("", "0"):
                # etcd3 store.Create; not a Status error, so the handler answers 500 with reason Unknown
                raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
            if self.store.get(rt.key, namespace if rt.namespaced else "", name) is not None:
                raise already_exists(rt, name)
            record_managed_fields(rt, obj, None, ctx=ctx, sub=None, now=self.now())
            if ctx.dry_run:
                return Result(201, canonical(obj), ctx.warnings)
            entry = self.store.put(rt.key, obj, created=True)
            self._after_write(rt, entry.obj, None)
            return Result(201, self._as_version(rt, entry, item=False), ctx.warnings)

    def _review(self, rt: ResourceType, namespace: str, obj: dict[str, Any], ctx: Ctx) -> Result:
        """Access and identity reviews: answered from the identities and ``knobs.forbid``, never stored."""
        spec = obj.get("spec") or {}
        meta = obj["metadata"]
        meta.setdefault("creationTimestamp", None)
        identity = ctx.identity or rbac.authenticated_user(ctx.user)
        if rt.plural in ("subjectaccessreviews", "localsubjectaccessreviews") and spec.get("user"):
            groups = [str(g) for g in spec.get("groups") or []]
            identity = rbac.UserInfo(str(spec["user"]), tuple(groups), str(spec.get("uid") or ""))
        user = identity.name
        if rt.plural == "selfsubjectreviews":
            obj["status"] = {"userInfo": identity.as_dict()}
        elif rt.plural == "tokenreviews":
            who = self.tokens.get(str(spec.get("token") or ""))
            obj["status"] = (
                {"authenticated": True, "user": rbac.authenticated_user(who).as_dict(), "audiences": []}
                if who
                else {"user": {}, "error": "invalid bearer token"}
            )
        elif rt.plural == "selfsubjectrulesreviews":
            if self.rbac:
                obj["status"] = rbac.rules_review(self, identity, str(spec.get("namespace") or ""))
            else:
                obj["status"] = {"resourceRules": [], "nonResourceRules": [], "incomplete": True}
        else:
            attrs = spec.get("resourceAttributes")
            non_resource = spec.get("nonResourceAttributes")
            allowed = True
            reason = ""
            privileged = user in self.admin_users or rbac.MASTERS in identity.groups
            if attrs and not privileged:
                ns = attrs.get("namespace") or (namespace if rt.namespaced else None) or None
                resource = attrs.get("resource", "")
                if attrs.get("subresource"):
                    resource = f"{resource}/{attrs['subresource']}"
                allowed = not self.knobs.is_forbidden(resource, attrs.get("group", ""), attrs.get("verb", ""), ns)
                if allowed and self.rbac:
                    decision = rbac.authorize(
                        self,
                        rbac.Attributes(
                            identity,
                            str(attrs.get("verb", "")),
                            group=str(attrs.get("group", "")),
                            resource=str(attrs.get("resource", "")),
                            subresource=str(attrs.get("subresource", "")),
                            namespace=str(ns or ""),
                            name=str(attrs.get("name", "")),
                        ),
                    )
                    allowed, reason = decision.allowed, decision.reason
            elif non_resource and not privileged and self.rbac:
                decision = rbac.authorize(
                    self,
                    rbac.Attributes(
                        identity,
                        str(non_resource.get("verb", "")),
                        resource_request=False,
                        path=str(non_resource.get("path", "")),
                    ),
                )
                allowed, reason = decision.allowed, decision.reason
            obj["status"] = {"allowed": allowed}
            if not allowed:
                obj["status"]["denied"] = False
            if reason:
                obj["status"]["reason"] = reason
        return Result(201, canonical(obj))

    def _check_type_meta(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        av = obj.get("apiVersion")
        if av and av.split("/")[0] != rt.api_version.split("/")[0] and rt.group:
            raise bad_request(
                f"the API version in the data ({av}) does not match the expected API version ({rt.api_version})"
            )
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version if not av or rt.custom else av
        if not rt.custom:
            obj["apiVersion"] = rt.api_version

    def _prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        g, p = rt.group, rt.plural
        if rt.status_subresource and not (g == "" and p == "nodes"):
            obj.pop("status", None)
        if g == "" and p == "namespaces":
            spec = obj.setdefault("spec", {})
            fins = list(spec.get("finalizers") or [])
            if "kubernetes" not in fins:
                fins.append("kubernetes")
            spec["finalizers"] = fins
            obj["status"] = {"phase": "Active"}
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        elif g == "" and p == "pods":
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("serviceAccountName", "default")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("enableServiceLinks", True)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            spec.setdefault("priority", 0)
            spec.setdefault("securityContext", {})
            spec.setdefault("tolerations", [])
            for c in spec.get("containers") or []:
                if isinstance(c, dict):
                    c.setdefault("imagePullPolicy", "IfNotPresent")
                    c.setdefault("resources", {})
                    c.setdefault("terminationMessagePath", "/dev/termination-log")
                    c.setdefault("terminationMessagePolicy", "File")
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif g == "" and p == "persistentvolumeclaims":
            fins = list(meta.get("finalizers") or [])
            if PVC_PROTECTION not in fins:
                fins.append(PVC_PROTECTION)
            meta["finalizers"] = fins
            obj["status"] = {"phase": "Pending"}
        elif g == "" and p == "persistentvolumes":
            fins = list(meta.get("finalizers") or [])
            if PV_PROTECTION not in fins:
                fins.append(PV_PROTECTION)
            meta["finalizers"] = fins
            obj["status"] = {"phase": "Pending"}
        elif g == "" and p == "secrets":
            obj.setdefault("type", "Opaque")
        elif g == "" and p == "services":
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
                spec["clusterIP"] = self._allocate_ip()
            if spec.get("clusterIP") and spec.get("clusterIP") != "None":
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("sessionAffinity", "None")
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
            for port in spec.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
                    port.setdefault("targetPort", port.get("port"))
            obj["status"] = {"loadBalancer": {}}
        elif g == "apiextensions.k8s.io" and p == "customresourcedefinitions":
            spec = obj.setdefault("spec", {})
            names = dict(spec.get("names") or {})
            names.setdefault("singular", str(names.get("kind", "")).lower())
            names.setdefault("listKind", f"{names.get('kind', '')}List")
            spec["names"] = names
            spec.setdefault("scope", "Namespaced")
            versions = spec.get("versions") or []
            stored = [v.get("name") for v in versions if isinstance(v, dict) and v.get("storage")]
            if not stored and versions:
                stored = [versions[0].get("name")]
            now = self.now()
            obj["status"] = {
                "conditions": [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "lastTransitionTime": now,
                        "reason": "NoConflicts",
                        "message": "no conflicts found",
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "lastTransitionTime": now,
                        "reason": "InitialNamesAccepted",
                        "message": "the initial names have been accepted",
                    },
                ],
                "acceptedNames": names,
                "storedVersions": stored,
            }
        elif g == "apiregistration.k8s.io" and p == "apiservices":
            spec = obj.get("spec") or {}
            if not spec.get("service"):
                obj["status"] = {
                    "conditions": [
                        {
                            "type": "Available",
                            "status": "True",
                            "lastTransitionTime": self.now(),
                            "reason": "Local",
                            "message": "Local APIServices are always available",
                        }
                    ]
                }
            else:
                obj["status"] = {}

    def _allocate_ip(self) -> str:
        self._next_ip += 1
        n = self._next_ip
        return f"10.96.{n // 250}.{n % 250 + 1}"

    # -- update -------------------------------------------------------------------------------------
    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, *, sub: str | None, ctx: Ctx) -> Result:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        with self.store.lock:
            ns = namespace if rt.namespaced else ""
            entry = self.store.get(rt.key, ns, name)
            if entry is None:
                if sub is None and rt.group == "" and rt.plural in CREATE_ON_UPDATE:
                    if _meta(body).get("name", name) != name:
                        raise bad_request(
                            f"the name of the object ({body['metadata'].get('name')}) does not match the name on the "
                            f"URL ({name})"
                        )
                    return self.create(rt, namespace, {**body, "metadata": {**body["metadata"], "name": name}}, ctx)
                raise not_found(rt, name)
            return self._update_locked(rt, ns, name, copy.deepcopy(body), entry=entry, sub=sub, ctx=ctx)

    def scale(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        verb: str,
        body: Any,
        content_type: str,
        ctx: Ctx,
    ) -> Result:
        """The ``scale`` subresource: an ``autoscaling/v1`` Scale view of ``spec.replicas``."""
        with self.store.lock:
            entry = self.store.get(rt.key, namespace, name)
            if entry is None:
                raise not_found(rt, name)
            current = self._scale_of(entry.obj)
            if verb == "get":
                return Result(200, current)
            if verb == "patch":
                raw = body if isinstance(body, bytes) else b"null"
                try:
                    doc = json.loads(raw or b"null")
                    ptype = content_type.split(";", maxsplit=1)[0].strip()
                    wanted = (
                        json_patch(current, doc)
                        if ptype == "application/json-patch+json"
                        else merge_patch(current, doc)
                    )
                except (ValueError, PatchError) as exc:
                    raise ApiError(
                        422, "Invalid", "the server rejected our request due to an error in our request", {}
                    ) from exc
            else:
                wanted = body if isinstance(body, dict) else {}
            rv = str((wanted.get("metadata") or {}).get("resourceVersion") or "")
            if rv and rv != entry.obj["metadata"]["resourceVersion"]:
                raise optimistic_lock(rt, name)
            replicas = (wanted.get("spec") or {}).get("replicas")
            obj = entry.copy()
            obj.setdefault("spec", {})["replicas"] = replicas
            result = self._update_locked(rt, namespace, name, obj, entry=entry, sub=None, ctx=ctx)
            out = json.loads(result.body) if isinstance(result.body, bytes) else result.body
            return Result(200, self._scale_of(out))

    @staticmethod
    def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        selector = ",".join(f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items())
        out_status: dict[str, Any] = {"replicas": status.get("replicas", 0)}
        if selector:
            out_status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
            },
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": out_status,
        }

    def create_subresource(
        self, rt: ResourceType, namespace: str, name: str, sub: str, *, body: Any, ctx: Ctx
    ) -> Result:
        """POST to pods/binding, pods/eviction and serviceaccounts/token."""
        body = body if isinstance(body, dict) else {}
        with self.store.lock:
            entry = self.store.get(rt.key, namespace, name)
            if entry is None:
                raise not_found(rt, name)
            if rt.plural == "pods" and sub == "binding":
                pod = entry.copy()
                node = ((body.get("target") or {}).get("name")) or ""
                current = (pod.get("spec") or {}).get("nodeName")
                if current:
                    raise conflict(rt.plural, "", name, f'pod {name} is already assigned to node "{current}"')
                if pod["metadata"].get("deletionTimestamp"):
                    raise conflict(rt.plural, "", name, f"pod {name} is being deleted, cannot be assigned to a host")
                pod.setdefault("spec", {})["nodeName"] = node
                if not ctx.dry_run:
                    self.store.put(rt.key, pod, created=False)
                return Result(
                    201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                )
            if rt.plural == "pods" and sub == "eviction":
                opts = DeleteOptions.parse(body.get("deleteOptions") or {}, {})
                self._store_delete(rt, namespace, name, entry=entry, opts=opts, ctx=ctx)
                return Result(
                    201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                )
            if rt.plural == "serviceaccounts" and sub == "token":
                seconds = int((body.get("spec") or {}).get("expirationSeconds") or 3600)
                token = f"sa-{self.store.random_suffix(16)}"
                self.tokens[token] = f"system:serviceaccount:{namespace}:{name}"
                expires = rfc3339(self.clock.now() + timedelta(seconds=seconds))
                out = {
                    "kind": "TokenRequest",
                    "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
                    "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": seconds},
                    "status": {"token": token, "expirationTimestamp": expires},
                }
                return Result(201, out)
        raise method_not_allowed()

    def _update_locked(
        self, rt: ResourceType, ns: str, name: str, new: dict[str, Any], *, entry: Entry, sub: str | None, ctx: Ctx
    ) -> Result:
        old = entry.copy()
        old_meta = old["metadata"]
        self._check_type_meta(rt, new)
        meta = _meta(new)
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        # optimistic concurrency (GuaranteedUpdate)
        new_rv = str(meta.get("resourceVersion") or "")
        if new_rv in ("", "0"):
            if rt.custom:
                raise invalid(
                    rt.plural,
                    rt.group,
                    name,
                    [FieldError("metadata.resourceVersion", "Invalid value", "must be specified for an update", "0")],
                )
            meta["resourceVersion"] = old_meta["resourceVersion"]
        elif new_rv != old_meta["resourceVersion"]:
            raise optimistic_lock(rt, name)
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta.get('uid')}",
            )
        # strategy.PrepareForUpdate
        new = self._prepare_for_update(rt, sub, new, old)
        meta = new["metadata"]
        # rest.BeforeUpdate
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"]
        else:
            meta.pop("generation", None)
        with_status = rt.custom and not rt.status_subresource
        if rt.uses_generation and sub is None and _spec_part(new, with_status) != _spec_part(old, with_status):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        meta.setdefault("uid", old_meta.get("uid"))
        if old_meta.get("creationTimestamp"):
            meta["creationTimestamp"] = old_meta["creationTimestamp"]
        if old_meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        if old_meta.get("deletionGracePeriodSeconds") is not None and meta.get("deletionGracePeriodSeconds") is None:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        errs = self._validate_update_meta(rt, new, old, ctx)
        if sub == "status" and rt.group == "" and rt.plural == "namespaces":
            errs += self._validate_namespace_status(new)
        elif sub == "finalize":
            errs += self._validate_type(rt, new, old)
        else:
            errs += self._validate_type(rt, new, old)
        if errs:
            raise invalid(rt.kind, rt.group, name, errs)
        for webhook_phase in ("mutating", "validating"):
            admission.run_webhooks(
                self, webhook_phase, "UPDATE", rt, sub=sub, namespace=ns, obj=new, old=old, dry_run=ctx.dry_run
            )
        if self._should_delete_during_update(rt, new, old):
            if not ctx.dry_run:
                self.store.remove(rt.key, ns, name)
                self._after_delete(rt, old)
            return Result(200, canonical(new), ctx.warnings)
        if _strip_volatile(canonical(new)) == _strip_volatile(old):
            return Result(200, self._as_version(rt, entry, item=False), ctx.warnings)
        record_managed_fields(rt, new, old, ctx=ctx, sub=sub, now=self.now())
        if ctx.dry_run:
            meta["resourceVersion"] = old_meta["resourceVersion"]
            return Result(200, canonical(new), ctx.warnings)
        stored = self.store.put(rt.key, new, created=False)
        self._after_write(rt, stored.obj, old)
        return Result(200, self._as_version(rt, stored, item=False), ctx.warnings)

    def _prepare_for_update(
        self, rt: ResourceType, sub: str | None, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        g, p = rt.group, rt.plural
        is_ns = g == "" and p == "namespaces"
        if sub == "status":
            if is_ns or (g == "apiextensions.k8s.io" and p == "customresourcedefinitions"):
                # namespaces and CRDs take metadata edits through /status (CRDs: ResetObjectMetaForStatus no-op)
                if "spec" in old:
                    new["spec"] = old["spec"]
                else:
                    new.pop("spec", None)
                return new
            out = copy.deepcopy(old)
            out["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"]
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            return out
        if sub == "finalize":
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
            return new
        if rt.status_subresource:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if is_ns:
            spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
            assert isinstance(spec, dict)
            old_fins = (old.get("spec") or {}).get("finalizers")
            if old_fins is None:
                spec.pop("finalizers", None)
            else:
                spec["finalizers"] = old_fins
            new["spec"] = spec
        return new

    def _validate_update_meta(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], ctx: Ctx
    ) -> list[FieldError]:
        meta, old_meta = new["metadata"], old["metadata"]
        errs: list[FieldError] = []
        if meta.get("uid") != old_meta.get("uid"):
            errs.append(
                FieldError("metadata.uid", "Invalid value", "field is immutable", go_quote(str(meta.get("uid"))))
            )
        if meta.get("deletionTimestamp") != old_meta.get("deletionTimestamp"):
            value = go_time(parse_rfc3339(meta["deletionTimestamp"])) if meta.get("deletionTimestamp") else '"null"'
            errs.append(FieldError("metadata.deletionTimestamp", "Invalid value", "field is immutable", value))
        if meta.get("deletionGracePeriodSeconds") != old_meta.get("deletionGracePeriodSeconds"):
            value = meta.get("deletionGracePeriodSeconds")
            errs.append(
                FieldError(
                    "metadata.deletionGracePeriodSeconds",
                    "Invalid value",
                    "field is immutable",
                    '"null"' if value is None else str(value),
                )
            )
        fins = meta.get("finalizers") or []
        if old_meta.get("deletionTimestamp"):
            added = [f for f in fins if f not in (old_meta.get("finalizers") or [])]
            if added:
                errs.append(
                    FieldError(
                        "metadata.finalizers",
                        "Forbidden",
                        "no new finalizers can be added if the object is being deleted, found new finalizers "
                        + go_string_slice([str(f) for f in added]),
                    )
                )
        errs += self._validate_meta(rt, new, ctx, old)
        return errs

    def _validate_namespace_status(self, new: dict[str, Any]) -> list[FieldError]:
        phase = str((new.get("status") or {}).get("phase") or "")
        if not new["metadata"].get("deletionTimestamp"):
            if phase != "Active":
                return [
                    FieldError(
                        "status.Phase",
                        "Invalid value",
                        "may only be 'Active' if `deletionTimestamp` is empty",
                        go_quote(phase),
                    )
                ]
        elif phase != "Terminating":
            return [
                FieldError(
                    "status.Phase",
                    "Invalid value",
                    "may only be 'Terminating' if `deletionTimestamp` is not empty",
                    go_quote(phase),
                )
            ]
        return []

    def _should_delete_during_update(self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> bool:
        old_meta = old["metadata"]
        if not old_meta.get("deletionTimestamp"):
            return False
        if new["metadata"].get("finalizers"):
            return False
        if old_meta.get("deletionGracePeriodSeconds") not in (None, 0):
            return False
        return not (rt.group == "" and rt.plural == "namespaces" and (new.get("spec") or {}).get("finalizers"))

    # -- patch --------------------------------------------------------------------------------------
    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        content_type: str,
        raw: bytes,
        sub: str | None,
        ctx: Ctx,
        query: dict[str, str] | None = None,
    ) -> Result:
        ptype = content_type.split(";", maxsplit=1)[0].strip().lower()
        if ptype not in (
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
            "application/apply-patch+cbor",
        ) or (ptype == "application/strategic-merge-patch+json" and rt.custom):
            accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            if not rt.custom:
                accepted += ", application/strategic-merge-patch+json"
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: {accepted}",
            )
        try:
            if ptype == "application/apply-patch+yaml":
                import yaml

                patch_doc = yaml.safe_load(raw.decode() or "null")
            else:
                patch_doc = json.loads(raw or b"null")
        except ValueError as exc:
            raise bad_request(f"error decoding patch: {exc}") from exc
        with self.store.lock:
            ns = namespace if rt.namespaced else ""
            entry = self.store.get(rt.key, ns, name)
            if entry is None:
                if ptype == "application/apply-patch+yaml" and sub is None:
                    if not (query or {}).get("fieldManager"):
                        raise invalid(
                            "PatchOptions",
                            "meta.k8s.io",
                            "",
                            [FieldError("fieldManager", "Required value", "is required for apply patch")],
                        )
                    obj = patch_doc if isinstance(patch_doc, dict) else {}
                    _meta(obj)["name"] = name
                    return self.create(rt, namespace, obj, ctx)
                raise not_found(rt, name)
            current = entry.copy()
            try:
                if ptype == "application/merge-patch+json":
                    patched = merge_patch(current, patch_doc)
                elif ptype == "application/json-patch+json":
                    patched = json_patch(current, patch_doc)
                elif ptype == "application/strategic-merge-patch+json":
                    patched = strategic_merge_patch(current, patch_doc)
                else:
                    patched = (
                        strategic_merge_patch(current, patch_doc) if not rt.custom else merge_patch(current, patch_doc)
                    )
            except PatchError as exc:
                raise ApiError(
                    422, "Invalid", "the server rejected our request due to an error in our request", {}
                ) from exc
            if not isinstance(patched, dict):
                raise bad_request("the patched object is not an object")
            return self._update_locked(rt, ns, name, patched, entry=entry, sub=sub, ctx=ctx)

    # -- delete -------------------------------------------------------------------------------------
    def delete(self, rt: ResourceType, namespace: str, name: str, opts: DeleteOptions, ctx: Ctx) -> Result:
        if rt.group == "" and rt.plural == "namespaces" and not ctx.admitted:
            self._admit_namespace_delete(rt, name, opts, ctx)
        with self.store.lock:
            ns = namespace if rt.namespaced else ""
            entry = self.store.get(rt.key, ns, name)
            if entry is None:
                raise not_found(rt, name)
            if rt.group == "" and rt.plural == "namespaces":
                return self._delete_namespace(rt, name, entry, opts, ctx)
            if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
                self._uid_rv_preconditions(rt, name, entry, opts)
                if not entry.obj["metadata"].get("deletionTimestamp"):
                    return self._delete_crd_first(rt, name, entry, opts, ctx)
            return self._store_delete(rt, ns, name, entry=entry, opts=opts, ctx=ctx)

    def _admit_namespace_delete(self, rt: ResourceType, name: str, opts: DeleteOptions, ctx: Ctx) -> None:
        """Admission of the first DELETE of a namespace: NamespaceLifecycle and the simulated webhooks
        under the lock, then the webhooks the emulator calls for real (webhookcalls.py) outside it, as
        they may call this API server back. Their warnings go on the answer."""
        with self.store.lock:
            entry = self.store.get(rt.key, "", name)
            if entry is None or entry.obj["metadata"].get("deletionTimestamp"):
                return  # the write path answers (404, or a later DELETE, which admission does not see)
            self._uid_rv_preconditions(rt, name, entry, opts)
            admission.namespace_lifecycle_delete(rt, name)
            identity = ctx.identity
            review = webhookcalls.Review(
                name=name,
                old_object=canonical(entry.copy()),
                user_info=identity.as_dict() if identity is not None else {"username": ctx.user},
                options=opts.as_options(dry_run=ctx.dry_run),
                dry_run=ctx.dry_run,
            )
            for webhook_phase in ("mutating", "validating"):
                admission.run_webhooks(
                    self,
                    webhook_phase,
                    "DELETE",
                    rt,
                    sub=None,
                    namespace="",
                    obj=entry.obj,
                    dry_run=ctx.dry_run,
                    review=review,
                )
        if review.remote:
            ctx.warnings.extend(webhookcalls.dispatch(review))
        ctx.admitted = True

    def _uid_rv_preconditions(self, rt: ResourceType, name: str, entry: Entry, opts: DeleteOptions) -> None:
        """Namespace/CRD REST.Delete: precondition failures worded on the resource."""
        meta = entry.obj["metadata"]
        if opts.uid is not None and opts.uid != meta.get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {opts.uid}, UID in object meta: {meta.get('uid')}",
            )
        if opts.resource_version is not None and opts.resource_version != meta.get("resourceVersion"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: ResourceVersion in precondition: {opts.resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )

    def _status_code(self, opts: DeleteOptions, deleted: bool) -> int:
        return 202 if not deleted and opts.orphan_dependents is False else 200

    def _delete_namespace(self, rt: ResourceType, name: str, entry: Entry, opts: DeleteOptions, ctx: Ctx) -> Result:
        self._uid_rv_preconditions(rt, name, entry, opts)
        obj = entry.copy()
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            if not ctx.admitted:
                admission.namespace_lifecycle_delete(rt, name)
                for webhook_phase in ("mutating", "validating"):
                    admission.run_webhooks(
                        self, webhook_phase, "DELETE", rt, sub=None, namespace="", obj=obj, dry_run=ctx.dry_run
                    )
            meta["deletionTimestamp"] = self.now()
            obj.setdefault("status", {})["phase"] = "Terminating"
            fins = list(meta.get("finalizers") or [])
            want_orphan = (
                opts.orphan_dependents
                if opts.orphan_dependents is not None
                else (opts.propagation_policy == "Orphan" if opts.propagation_policy else ORPHAN in fins)
            )
            want_fg = (
                (opts.orphan_dependents is False)
                if opts.orphan_dependents is not None
                else (opts.propagation_policy == "Foreground" if opts.propagation_policy else FOREGROUND in fins)
            )
            for fin, want in ((ORPHAN, want_orphan), (FOREGROUND, want_fg)):
                if want and fin not in fins:
                    fins.append(fin)
                elif not want and fin in fins:
                    fins.remove(fin)
            if fins:
                meta["finalizers"] = fins
            else:
                meta.pop("finalizers", None)
            if ctx.dry_run:
                return Result(self._status_code(opts, False), canonical(obj), ctx.warnings)
            stored = self.store.put(rt.key, obj, created=False)
            return Result(self._status_code(opts, False), stored.raw, ctx.warnings)
        if (obj.get("spec") or {}).get("finalizers"):
            if self.options.get("legacy_namespace_delete_conflict"):
                # servers before 1.17 (kubernetes/kubernetes#84122) answered a repeated delete with 409
                raise conflict(
                    "namespaces",
                    "",
                    name,
                    "The system is ensuring all content is removed from this namespace.  Upon completion, this "
                    "namespace will automatically be purged by the system.",
                )
            return Result(self._status_code(opts, False), entry.raw)
        return self._store_delete(rt, "", name, entry=entry, opts=opts, ctx=ctx)

    def _delete_crd_first(self, rt: ResourceType, name: str, entry: Entry, opts: DeleteOptions, ctx: Ctx) -> Result:
        obj = entry.copy()
        for webhook_phase in ("mutating", "validating"):
            admission.run_webhooks(
                self, webhook_phase, "DELETE", rt, sub=None, namespace="", obj=obj, dry_run=ctx.dry_run
            )
        meta = obj["metadata"]
        meta["deletionTimestamp"] = self.now()
        fins = list(meta.get("finalizers") or [])
        if CRD_CLEANUP not in fins:
            fins.append(CRD_CLEANUP)
        meta["finalizers"] = fins
        set_condition(
            obj.setdefault("status", {}),
            "Terminating",
            "True",
            reason="InstanceDeletionPending",
            message="CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            now=self.now(),
        )
        if ctx.dry_run:
            return Result(self._status_code(opts, False), canonical(obj))
        stored = self.store.put(rt.key, obj, created=False)
        return Result(self._status_code(opts, False), stored.raw)

    def _finalize_delete(self, rt: ResourceType, obj: dict[str, Any] | bytes) -> Any:
        if rt.return_deleted_object:
            return obj
        o = json.loads(obj) if isinstance(obj, bytes) else obj
        details: dict[str, Any] = {"name": o["metadata"]["name"]}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = o["metadata"].get("uid", "")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _store_delete(
        self, rt: ResourceType, ns: str, name: str, *, entry: Entry, opts: DeleteOptions, ctx: Ctx
    ) -> Result:
        """``genericregistry.Store.Delete`` (k8s.io/apiserver/pkg/registry/generic/registry/store.go)."""
        obj = entry.copy()
        meta = obj["metadata"]
        # rest.BeforeDelete: preconditions, worded on the Kind
        if opts.uid is not None and opts.uid != meta.get("uid"):
            raise conflict(
                rt.kind,
                rt.group,
                name,
                f"the UID in the precondition ({opts.uid}) does not match the UID in record ({meta.get('uid')}). "
                "The object might have been deleted and then recreated",
            )
        if opts.resource_version is not None and opts.resource_version != meta.get("resourceVersion"):
            raise conflict(
                rt.kind,
                rt.group,
                name,
                f"the ResourceVersion in the precondition ({opts.resource_version}) does not match the ResourceVersion "
                f"in record ({meta.get('resourceVersion')}). The object might have been modified",
            )
        grace = opts.grace_period_seconds
        if grace is not None and grace < 0:
            grace = 1
        graceful = False
        pending = False
        now = self.clock.now()
        if rt.graceful:
            if meta.get("deletionTimestamp"):
                dgs = meta.get("deletionGracePeriodSeconds")
                if dgs in (None, 0):
                    pass
                elif grace is not None:
                    if grace >= dgs:
                        pending = True
                    else:
                        ts = (
                            parse_rfc3339(meta["deletionTimestamp"]) - timedelta(seconds=dgs) + timedelta(seconds=grace)
                        )
                        meta["deletionTimestamp"] = rfc3339(ts)
                        meta["deletionGracePeriodSeconds"] = grace
                        graceful = True
                else:
                    pending = True
            else:
                spec = obj.get("spec") or {}
                period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
                phase = (obj.get("status") or {}).get("phase")
                if not spec.get("nodeName") or phase in ("Failed", "Succeeded"):
                    period = 0
                grace = period
                meta["deletionTimestamp"] = rfc3339(now + timedelta(seconds=period))
                meta["deletionGracePeriodSeconds"] = period
                if meta.get("generation"):
                    meta["generation"] = int(meta["generation"]) + 1
                graceful = True
        if pending:
            return Result(self._status_code(opts, False), self._finalize_delete(rt, entry.raw))
        old_fins = list(meta.get("finalizers") or [])
        needs_update, new_fins = self._gc_finalizers(old_fins, opts)
        if graceful or old_fins or needs_update:
            admission.compiled_in_plugins(self, "DELETE", rt, ns, "" if ctx.collection else name)
            for webhook_phase in ("mutating", "validating"):
                admission.run_webhooks(
                    self, webhook_phase, "DELETE", rt, sub=None, namespace=ns, obj=entry.obj, dry_run=ctx.dry_run
                )
            if needs_update:
                meta["finalizers"] = new_fins
                if not new_fins:
                    meta.pop("finalizers", None)
            pending_finalizers = bool(meta.get("finalizers"))
            if not graceful:
                if pending_finalizers:
                    self._mark_as_deleting(meta, now)
                    return self._write_deleting(rt, obj, entry, opts, ctx)
                # errDeleteNow: fall through to the real delete
            else:
                if pending_finalizers or (grace or 0) > 0:
                    return self._write_deleting(rt, obj, entry, opts, ctx)
                if not ctx.dry_run:
                    entry = self.store.put(rt.key, obj, created=False)
                    obj = entry.copy()
        else:
            admission.compiled_in_plugins(self, "DELETE", rt, ns, "" if ctx.collection else name)
            for webhook_phase in ("mutating", "validating"):
                admission.run_webhooks(
                    self, webhook_phase, "DELETE", rt, sub=None, namespace=ns, obj=entry.obj, dry_run=ctx.dry_run
                )
        if ctx.dry_run:
            return Result(200, self._finalize_delete(rt, canonical(obj)))
        last = self.store.remove(rt.key, ns, name)
        self._after_delete(rt, obj)
        return Result(200, self._finalize_delete(rt, last.raw if last else canonical(obj)))

    def _write_deleting(
        self, rt: ResourceType, obj: dict[str, Any], entry: Entry, opts: DeleteOptions, ctx: Ctx
    ) -> Result:
        code = self._status_code(opts, False)
        if ctx.dry_run:
            obj["metadata"]["resourceVersion"] = entry.obj["metadata"]["resourceVersion"]
            return Result(code, canonical(obj))
        if _strip_volatile(canonical(obj)) == _strip_volatile(entry.obj):
            return Result(code, self._as_version(rt, entry, item=False))
        stored = self.store.put(rt.key, obj, created=False)
        return Result(code, self._as_version(rt, stored, item=False))

    @staticmethod
    def _mark_as_deleting(meta: dict[str, Any], now: Any) -> None:
        existing = meta.get("deletionTimestamp")
        if not existing and meta.get("generation"):
            meta["generation"] = int(meta["generation"]) + 1
        if not existing or parse_rfc3339(existing) > now:
            meta["deletionTimestamp"] = rfc3339(now)
        meta["deletionGracePeriodSeconds"] = 0

    @staticmethod
    def _gc_finalizers(fins: list[str], opts: DeleteOptions) -> tuple[bool, list[str]]:
        """``deletionFinalizersForGarbageCollection`` for a type whose default policy is DeleteDependents."""
        if opts.orphan_dependents is not None:
            orphan = opts.orphan_dependents
        elif opts.propagation_policy:
            orphan = opts.propagation_policy == "Orphan"
        elif ORPHAN in fins or FOREGROUND in fins:
            orphan = next(f for f in fins if f in (ORPHAN, FOREGROUND)) == ORPHAN
        else:
            orphan = False
        if opts.orphan_dependents is not None:
            foreground = not opts.orphan_dependents
        elif opts.propagation_policy:
            foreground = opts.propagation_policy == "Foreground"
        elif FOREGROUND in fins or ORPHAN in fins:
            foreground = next(f for f in fins if f in (ORPHAN, FOREGROUND)) == FOREGROUND
        else:
            foreground = False
        new = [f for f in fins if f not in (ORPHAN, FOREGROUND)]
        if orphan:
            new.append(ORPHAN)
        if foreground:
            new.append(FOREGROUND)
        if set(new) == set(fins):
            return False, fins
        return True, new

    def delete_collection(
        self, rt: ResourceType, namespace: str | None, opts: DeleteOptions, query: dict[str, str], ctx: Ctx
    ) -> Result:
        if "deletecollection" not in rt.verbs:
            raise method_not_allowed()
        label_reqs = parse_label_selector(query.get("labelSelector", ""))
        field_reqs = parse_field_selector(query.get("fieldSelector", ""), rt.kind, rt.custom)
        with self.store.lock:
            rv = self.store.rv
            entries = [
                e
                for e in self.store.items(rt.key, namespace if rt.namespaced else None)
                if labels_match(label_reqs, e.obj["metadata"].get("labels")) and fields_match(field_reqs, e.obj)
            ]
            items = [json.loads(self._as_version(rt, e, item=True)) for e in entries]
            for e in entries:
                meta = e.obj["metadata"]
                current = self.store.get(rt.key, meta.get("namespace", ""), meta["name"])
                if current is None:
                    continue
                try:
                    self._store_delete(
                        rt,
                        meta.get("namespace", ""),
                        meta["name"],
                        entry=current,
                        opts=opts,
                        ctx=Ctx(ctx.user, ctx.dry_run, collection=True),
                    )
                except ApiError as err:
                    if err.code != 404:
                        raise
        return Result(
            200,
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )

    # -- hooks after writes -------------------------------------------------------------------------
    def _after_write(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            self._sync_crd_types(obj, old)

    def _after_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            self._sync_crd_types(None, obj)
        if rt.group == "apiregistration.k8s.io" and rt.plural == "apiservices":
            # the crdregistration controller keeps its ("automanaged: true") APIServices; the built-in
            # ones ("onstart") are only registered at start-up, so a deleted one stays deleted
            labels = obj["metadata"].get("labels") or {}
            spec = obj.get("spec") or {}
            group, version = spec.get("group", ""), spec.get("version", "")
            crd_served = any(t.custom for k, t in self.types.items() if k[0] == group and k[1] == version)
            if labels.get("kube-aggregator.kubernetes.io/automanaged") == "true" and crd_served:
                self._ensure_local_apiservice(group, version, automanaged="true")

    def _sync_crd_types(self, crd: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
        old_types = crd_types(old) if old else []
        new_types = crd_types(crd) if crd else []
        # copy-on-write: readers iterate self.types without the lock
        types = dict(self.types)
        for t in old_types:
            types.pop((t.group, t.version, t.plural), None)
        for t in new_types:
            types[(t.group, t.version, t.plural)] = t
        self.types = types
        if crd is None and old is not None:
            spec = old.get("spec") or {}
            plural = (spec.get("names") or {}).get("plural", "")
            self.store.drop_bucket((spec.get("group", ""), plural))
        # the crdregistration controller keeps one Local APIService per served group/version
        for t in new_types:
            self._ensure_local_apiservice(t.group, t.version, automanaged="true")
        for t in old_types:
            if not any(k[0] == t.group and k[1] == t.version for k in self.types):
                svc = self.store.get(APISERVICES, "", f"{t.version}.{t.group}")
                if svc is not None and not (svc.obj.get("spec") or {}).get("service"):
                    self.store.remove(APISERVICES, "", f"{t.version}.{t.group}")


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
PATH_SEGMENT_TYPES = frozenset(
    {
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ("apiregistration.k8s.io", "apiservices"),
    }
)


def _name_errors(rt: ResourceType, name: str) -> list[FieldError]:
    """``metadata.name`` validation: DNS label (namespaces), DNS-1035 (services), path segment (RBAC,
    APIServices), DNS subdomain (everything else)."""
    quoted = go_quote(name)
    if (rt.group, rt.plural) in PATH_SEGMENT_TYPES:
        for bad in ("/", "%"):
            if bad in name:
                return [FieldError("metadata.name", "Invalid value", f"may not contain '{bad}'", quoted)]
        if name in (".", ".."):
            return [FieldError("metadata.name", "Invalid value", f"may not be '{name}'", quoted)]
        return []
    if rt.group == "" and rt.plural in ("namespaces", "services"):
        pattern, message = (_DNS1123_LABEL, LABEL_MSG) if rt.plural == "namespaces" else (_DNS1035_LABEL, DNS1035_MSG)
        errs = []
        if len(name) > 63:
            errs.append(FieldError("metadata.name", "Invalid value", "must be no more than 63 characters", quoted))
        if not pattern.match(name):
            errs.append(FieldError("metadata.name", "Invalid value", message, quoted))
        return errs
    errs = []
    if len(name) > 253:
        errs.append(FieldError("metadata.name", "Invalid value", "must be no more than 253 characters", quoted))
    if not _DNS1123_SUBDOMAIN.match(name):
        errs.append(FieldError("metadata.name", "Invalid value", SUBDOMAIN_MSG, quoted))
    return errs


def set_condition(status: dict[str, Any], ctype: str, cstatus: str, *, reason: str, message: str, now: str) -> None:
    conds = status.setdefault("conditions", [])
    for cond in conds:
        if cond.get("type") == ctype:
            if cond.get("status") != cstatus:
                cond["lastTransitionTime"] = now
            cond["status"] = cstatus
            cond["reason"] = reason
            cond["message"] = message
            return
    conds.append({"type": ctype, "status": cstatus, "lastTransitionTime": now, "reason": reason, "message": message})
