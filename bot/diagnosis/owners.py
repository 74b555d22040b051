"""Finding a finalizer's controller from the cluster, where the catalogue and the finalizer's name do not
(issue 37 §3): a finalizer not in the catalogue, or one whose catalogue entry finds no workload.

The cluster usually says who runs a custom resource's controller. In this order, the first path that finds a
workload names it (`controller.found_by`); a path that names an owner but finds no workload of it is kept as
evidence:

1. `helm`: the CRD's Helm release (`meta.helm.sh/release-name` and `-namespace` annotations) or its
   `app.kubernetes.io/instance` or `part-of` label, matched to the workloads carrying the same (`managed-by`
   only narrows: every chart says `Helm`). CRDs installed from a chart's `crds/` folder carry none of them.
2. `olm`: the ClusterServiceVersion whose `spec.customresourcedefinitions.owned` lists the CRD, and the
   deployments of its install strategy (a deployment it names that does not exist: the operator is gone).
3. `conversion_webhook`: the CRD's conversion webhook Service, and the workloads whose pods it selects (a
   Service that no longer exists: the controller that served it is gone).
4. `rbac`: the ClusterRoles (and the namespace's Roles) that grant `update` or `patch` on the resource or
   its `finalizers` subresource, naming both its group and the resource; their bindings' service accounts;
   the workloads that run as them. Grants with `*` in their groups or resources (cluster-admin, GitOps
   controllers) are dropped when collected, or every finalizer would find Argo CD or Flux; for a type of
   Kubernetes itself (pods, configmaps...) only a grant on its `finalizers` subresource counts, since many
   controllers update those types for their own ends.

A controller found so is judged alive, dead or unknown by `controllers.judge`, as any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bot.diagnosis import catalogue
from bot.diagnosis.catalogue_model import CatalogueEntry, Owner, RunsIn
from bot.diagnosis.context import Context, Held
from bot.diagnosis.reading import workload_summary
from bot.domain.findings import FoundBy
from bot.domain.refs import KubeObject, meta, name_of
from bot.domain.values import HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE

INSTANCE = "app.kubernetes.io/instance"
PART_OF = "app.kubernetes.io/part-of"
MANAGED_BY = "app.kubernetes.io/managed-by"
# more service accounts or workloads than this found by one path say nothing about which one it is
MAX_FOUND = 4
UPDATE_VERBS = frozenset({"update", "patch", "*"})
# how the collection names the reads only this search makes (`bot.kube.collecting`), and so their gaps
READ_SUFFIX = "(controller discovery)"


@dataclass
class Located:
    """What one path found of a finalizer's controller."""

    found_by: FoundBy
    workloads: list[KubeObject] = field(default_factory=list)
    # how it was found, or what it names that does not run, one sentence each
    evidence: list[str] = field(default_factory=list)
    # what the path says the controller runs as, and no longer exists: it was uninstalled
    gone: list[str] = field(default_factory=list)


def builtin_group(group: str) -> bool:
    """A group of Kubernetes itself (the core group, apps, batch, `*.k8s.io`...)."""
    return group in ("", "apps", "batch", "policy", "autoscaling", "extensions") or group.endswith(".k8s.io")


def known_workloads(owner: Owner, entry: CatalogueEntry | None, workloads: Sequence[KubeObject]) -> list[KubeObject]:
    """The workloads the catalogue (its workloads, images and the owner's markers) or the finalizer's name find."""
    markers = tuple(owner.markers) + (tuple(entry.runtime.images) if entry else ())
    found = catalogue.matching_workloads(markers, tuple(workloads))
    for known in entry.runtime.workloads if entry else ():
        for workload in workloads:
            m = meta(workload)
            if (
                workload.get("kind") == known.kind
                and m.get("name") == known.name
                and m.get("namespace") == known.namespace
                and workload not in found
            ):
                found.append(workload)
    return found


def searched(owner: Owner, entry: CatalogueEntry | None, found: Sequence[KubeObject]) -> bool:
    """Whether the cluster is searched for this finalizer's controller: no controller of Kubernetes itself or
    of no one, and not in the catalogue, or in it as a workload of which none was found."""
    if owner.builtin or owner.handled_by_rule or owner.name.startswith("nothing"):
        return False
    if entry is None:
        return True
    return entry.runtime.runs_in is RunsIn.WORKLOAD and not found


def needs_search(finalizer: str, group: str, workloads: Sequence[KubeObject]) -> bool:
    """For the collection (`CollectOptions.owner_search`): whether a finalizer of an object being deleted makes
    the reads that only this search needs (RBAC, OLM's ClusterServiceVersions) worth making."""
    owner = catalogue.owner_for(finalizer, group)
    entry = catalogue.entry(finalizer)
    if owner.builtin or owner.handled_by_rule or owner.name.startswith("nothing"):
        return False
    if entry is None:
        return True
    return entry.runtime.runs_in is RunsIn.WORKLOAD and not known_workloads(owner, entry, workloads)


def locate(ctx: Context, finalizer: str, held: Sequence[Held]) -> Located | None:
    """The first path that finds a workload of the controller; else the first that names an owner without one."""
    types = sorted({(h.rtype.group, h.rtype.resource) for h in held})
    crds = [crd for group, resource in types if (crd := _crd(ctx, group, resource)) is not None]
    words = catalogue.domain_words(finalizer, types[0][0] if types else "")
    named: Located | None = None
    for path in (_helm(ctx, crds, words), _olm(ctx, crds, words), _conversion(ctx, crds, words)):
        if path is None:
            continue
        if path.workloads:
            return path
        named = named or path
    rbac = _rbac(ctx, types, words)
    if rbac is not None and rbac.workloads:
        return rbac
    return named or rbac


def nothing_found(ctx: Context, held: Sequence[Held]) -> str | None:
    """What the search looked at and did not find, when it found nothing (None: its reads were not made)."""
    if "rbac" not in ctx.snapshot.owner_reads:
        return None
    types = ", ".join(sorted({h.rtype.key for h in held}))
    return (
        f"the cluster says nothing of who runs it: no Helm release or app.kubernetes.io labels on the CRD of "
        f"{types}, no ClusterServiceVersion owns it, no conversion webhook, and no ClusterRole or Role lets a "
        "service account update it by name (grants on `*` are not counted)"
    )


def describe(found_by: FoundBy) -> str:
    """How it was found, in a few words."""
    return found_by.said


def _crd(ctx: Context, group: str, resource: str) -> KubeObject | None:
    return ctx.crds_by_type.get((group, resource))


def _listed(workloads: Iterable[KubeObject], limit: int = 3) -> str:
    items = [f"{workload_summary(w)} in {meta(w).get('namespace')}" for w in workloads]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _narrowed(found: list[KubeObject], words: Sequence[str]) -> list[KubeObject]:
    """Of several workloads, those whose identity names a word of the finalizer's domain, when any does."""
    if len(found) <= 1 or not words:
        return found
    best = catalogue.matching_workloads(tuple(words), tuple(found))
    return best or found


def _labels(obj: KubeObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in (meta(obj).get("labels") or {}).items()}


def _annotations(obj: KubeObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in (meta(obj).get("annotations") or {}).items()}


def _helm(ctx: Context, crds: list[KubeObject], words: Sequence[str]) -> Located | None:
    for crd in crds:
        annotations, labels = _annotations(crd), _labels(crd)
        release, release_ns = annotations.get(HELM_RELEASE_NAME), annotations.get(HELM_RELEASE_NAMESPACE)
        instance, part_of, managed = labels.get(INSTANCE), labels.get(PART_OF), labels.get(MANAGED_BY)
        if release:
            where = f"{release_ns}/{release}" if release_ns else release
            said = f"CRD {name_of(crd)} was installed by Helm release {where} (its meta.helm.sh annotations)"
            found = [w for w in ctx.snapshot.workloads if _of_release(w, release, release_ns)]
        elif instance or part_of:
            key, value = (INSTANCE, instance) if instance else (PART_OF, part_of)
            said = f"CRD {name_of(crd)} carries {key}={value}"
            found = [
                w
                for w in ctx.snapshot.workloads
                if _labels(w).get(key) == value and (not managed or _labels(w).get(MANAGED_BY, managed) == managed)
            ]
        else:
            continue
        located = _result(FoundBy.HELM, said, _narrowed(found, words))
        if release and not found and release_ns == ctx.snapshot.namespace:
            # a release's workloads live in its namespace: deleting that namespace deleted them first
            located.gone = [
                f"the release's namespace, {release_ns}, is the one being deleted: its workloads went with it"
            ]
        return located
    return None


def _of_release(workload: KubeObject, release: str, namespace: str | None) -> bool:
    annotations, labels = _annotations(workload), _labels(workload)
    if annotations.get(HELM_RELEASE_NAME) != release and labels.get(INSTANCE) != release:
        return False
    if namespace is None:
        return True
    return meta(workload).get("namespace") == namespace or annotations.get(HELM_RELEASE_NAMESPACE) == namespace


def _result(found_by: FoundBy, said: str, found: list[KubeObject]) -> Located:
    if len(found) > MAX_FOUND:
        return Located(
            found_by,
            evidence=[f"{said}; {len(found)} workloads carry the same, too many to tell which one is its controller"],
        )
    if found:
        return Located(found_by, found, [f"{said}; its workloads: {_listed(found)}"])
    return Located(found_by, evidence=[f"{said}; no Deployment, StatefulSet or DaemonSet carries it"])


def _olm(ctx: Context, crds: list[KubeObject], words: Sequence[str]) -> Located | None:
    names = {name_of(crd) for crd in crds}
    if not names:
        return None
    for csv in ctx.snapshot.cluster_service_versions:
        spec = csv.get("spec") or {}
        owned = {str(o.get("name")) for o in (spec.get("customresourcedefinitions") or {}).get("owned") or ()}
        crd = next((n for n in sorted(names) if n in owned), None)
        if crd is None:
            continue
        namespace = str(meta(csv).get("namespace") or "")
        deployments = [
            str(d.get("name"))
            for d in ((spec.get("install") or {}).get("spec") or {}).get("deployments") or ()
            if isinstance(d, dict) and d.get("name")
        ]
        said = f"ClusterServiceVersion {namespace}/{name_of(csv)} (OLM) owns CRD {crd}"
        found = [
            w
            for w in ctx.snapshot.workloads
            if w.get("kind") == "Deployment" and meta(w).get("namespace") == namespace and name_of(w) in deployments
        ]
        located = _result(FoundBy.OLM, said, _narrowed(found, words))
        have = {name_of(w) for w in found}
        located.gone = [
            f"Deployment {namespace}/{d}, which ClusterServiceVersion {name_of(csv)} installs, does not exist"
            for d in deployments
            if d not in have
        ]
        if not deployments:
            located.evidence.append(f"ClusterServiceVersion {name_of(csv)} names no deployment")
        return located
    return None


def _conversion(ctx: Context, crds: list[KubeObject], words: Sequence[str]) -> Located | None:
    for crd in crds:
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        client = (conversion.get("webhook") or {}).get("clientConfig") or {}
        service = client.get("service") or {}
        if conversion.get("strategy") != "Webhook" or not service:
            continue
        namespace, name = str(service.get("namespace") or ""), str(service.get("name") or "")
        said = f"CRD {name_of(crd)} converts through a webhook at Service {namespace}/{name}"
        found_service = next(
            (s for s in ctx.snapshot.services if meta(s).get("namespace") == namespace and name_of(s) == name), None
        )
        if found_service is None:
            if any(g.what == f"get service {namespace}/{name}" for g in ctx.snapshot.gaps):
                return Located(FoundBy.CONVERSION_WEBHOOK, evidence=[f"{said}, which could not be read"])
            return Located(
                FoundBy.CONVERSION_WEBHOOK,
                evidence=[said],
                gone=[f"the conversion webhook of CRD {name_of(crd)} points at Service {namespace}/{name}, "
                      "which no longer exists"],
            )  # fmt: skip
        selector = (found_service.get("spec") or {}).get("selector") or {}
        found = [
            w
            for w in ctx.snapshot.workloads
            if selector and meta(w).get("namespace") == namespace and _selects(selector, w)
        ]
        return _result(FoundBy.CONVERSION_WEBHOOK, said + " (the pods it selects)", _narrowed(found, words))
    return None


def _selects(selector: dict[str, object], workload: KubeObject) -> bool:
    template = (((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
    return all(template.get(k) == v for k, v in selector.items())


def grants(role: KubeObject, group: str, resource: str) -> list[str]:
    """What of `resource` (or its finalizers) in `group` a role lets update or patch, naming both explicitly."""
    out: list[str] = []
    for rule in role.get("rules") or ():
        groups, resources = rule.get("apiGroups") or (), rule.get("resources") or ()
        verbs = [v for v in rule.get("verbs") or () if v in UPDATE_VERBS]
        if not verbs or "*" in groups or group not in groups or rule.get("resourceNames"):
            continue
        wanted = (f"{resource}/finalizers",) if builtin_group(group) else (resource, f"{resource}/finalizers")
        out.extend(f"{'/'.join(verbs)} {r}" for r in resources if r in wanted)
    return out


def _rbac(ctx: Context, types: Sequence[tuple[str, str]], words: Sequence[str]) -> Located | None:
    snapshot = ctx.snapshot
    if "rbac" not in snapshot.owner_reads:
        return None
    roles: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> what it grants
    for role in snapshot.roles:
        granted = [g for group, resource in types for g in grants(role, group, resource)]
        if granted:
            key = (str(role.get("kind")), str(meta(role).get("namespace") or ""), name_of(role))
            roles[key] = ", ".join(granted)
    accounts: dict[tuple[str, str], list[str]] = {}
    for binding in snapshot.role_bindings:
        ref = binding.get("roleRef") or {}
        binding_ns = str(meta(binding).get("namespace") or "")
        kind = str(ref.get("kind"))
        key = (kind, binding_ns if kind == "Role" else "", str(ref.get("name")))
        if key not in roles:
            continue
        via = f"{binding.get('kind')} {name_of(binding)} binds {kind} {key[2]} ({roles[key]})"
        for subject in binding.get("subjects") or ():
            if subject.get("kind") == "ServiceAccount":
                account = (str(subject.get("namespace") or binding_ns), str(subject.get("name")))
                accounts.setdefault(account, []).append(via)
    if not accounts:
        return None
    listed = [f"{ns}/{sa}" for ns, sa in sorted(accounts)]
    names = ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")
    first = sorted(accounts)[0]
    said = (
        f"RBAC lets ServiceAccount{'s' if len(listed) > 1 else ''} {names} update these objects ({accounts[first][0]})"
    )
    found = [w for w in snapshot.workloads if _runs_as(w) in accounts]
    located = _result(FoundBy.RBAC, said, _narrowed(found, words))
    if not found:
        located.evidence = [
            f"{said}; no Deployment, StatefulSet or DaemonSet runs as {'them' if len(listed) > 1 else 'it'} "
            "(it may run outside the cluster)"
        ]
    return located


def _runs_as(workload: KubeObject) -> tuple[str, str]:
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    return str(meta(workload).get("namespace") or ""), str(account)
