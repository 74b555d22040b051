"""GitOps owners (issue 38 §5): an Argo CD Application or a Flux Kustomization/HelmRelease that manages the
namespace or its content re-creates what the delete removes, on its next sync. Not a block: a warning that
names the owner to delete or suspend first, said the same in `precheck` (the prediction) and `diagnose`.

The marks (`bot.domain.gitops`) are the claim; the owner object is the confirmation:
- Argo CD: an Application whose instance name is the one the tracking annotation or the instance label names,
  and whose `spec.destination.namespace` is this namespace. The `app.kubernetes.io/instance` label alone is
  weak: Helm charts set it too. A mark that no Application confirms is said as unconfirmed.
- Flux: the Kustomization or HelmRelease the `<group>/name` and `<group>/namespace` labels name, found.

Whether the tool re-creates (read from the CRDs' types: argo-cd pkg/apis/application/v1alpha1/types.go,
kustomize-controller api/v1/kustomization_types.go, helm-controller api/v2/helmrelease_types.go):
- an Application with `spec.syncPolicy.automated` (not `enabled: false`): self-heal re-applies what went
  missing on its next reconciliation; without self-heal, automated sync applies it again on the next revision;
  `CreateNamespace=true` in `syncOptions` re-creates the namespace itself;
- a Kustomization not `suspend`ed: it re-applies its content every `interval`;
- a HelmRelease not `suspend`ed with `driftDetection.mode: enabled` (`warn` only reports the drift).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from bot.diagnosis.context import Context
from bot.domain.findings import Action, Cause, Finding, Remedy, Risk
from bot.domain.gitops import (
    APPLICATIONS,
    HELM_RELEASES,
    INSTANCE,
    KUSTOMIZATIONS,
    OWNER_KINDS,
    TRACKING_ID,
    OwnerKind,
    parse_tracking_id,
)
from bot.domain.refs import KubeObject, ObjectRef, meta
from bot.domain.snapshot import ResourceType

MAX_OBJECTS = 10
CREATE_NAMESPACE = "CreateNamespace=true"
# how the remedy of an owner that re-creates begins (`first` and `recreating` know it by that)
RECREATES_REMEDY = "Delete or suspend"


@dataclass
class _Claim:
    """The objects whose marks name one owner: (kind, namespace of the owner or "" when not said, name)."""

    kind: OwnerKind
    namespace: str
    name: str
    objects: list[ObjectRef] = field(default_factory=list)
    # how the marks were read: "tracking-id", "instance label", "labels"
    how: set[str] = field(default_factory=set)


def _marks(obj: KubeObject, ref: ObjectRef) -> Iterable[tuple[OwnerKind, str, str, str]]:
    data = meta(obj)
    labels = data.get("labels") or {}
    annotations = data.get("annotations") or {}
    tracking = parse_tracking_id(str(annotations.get(TRACKING_ID, ""))) if TRACKING_ID in annotations else None
    if tracking is not None:
        yield APPLICATIONS, "", tracking.app, "tracking-id"
    elif INSTANCE in labels and str(labels[INSTANCE]):
        yield APPLICATIONS, "", str(labels[INSTANCE]), "instance label"
    for kind in (KUSTOMIZATIONS, HELM_RELEASES):
        name = str(labels.get(kind.name_label) or "")
        if name:
            yield kind, str(labels.get(kind.namespace_label) or ref.namespace or ""), name, "labels"


def _claims(ctx: Context) -> list[_Claim]:
    claims: dict[tuple[str, str, str], _Claim] = {}
    namespaces = ResourceType(group="", version="v1", resource="namespaces", kind="Namespace", namespaced=False)
    every = [(namespaces, ctx.namespace_obj), *ctx.snapshot.all_contents()]
    for rtype, obj in every:
        ref = ctx.namespace_ref if obj is ctx.namespace_obj else ObjectRef.of(obj, resource=rtype.resource)
        for kind, namespace, name, how in _marks(obj, ref):
            claim = claims.setdefault((kind.resource, namespace, name), _Claim(kind, namespace, name))
            claim.objects.append(ref)
            claim.how.add(how)
    return [claims[k] for k in sorted(claims)]


def _instance_names(app: KubeObject) -> set[str]:
    name = str(meta(app).get("name", ""))
    return {name, f"{meta(app).get('namespace', '')}_{name}"}


def _owners(ctx: Context, kind: OwnerKind) -> list[KubeObject]:
    return [o for o in ctx.snapshot.gitops_owners if o.get("kind") == kind.kind]


def _unread(ctx: Context, kind: OwnerKind) -> str | None:
    """Why the owners of this kind were not read, or None when they were."""
    if kind.resource in ctx.snapshot.gitops_reads:
        return None
    label = f"list {kind.resource}.{kind.group}"
    gap = next((g for g in ctx.snapshot.gaps if g.what.startswith(label)), None)
    if gap is not None:
        return f"the list of {kind.kind}s could not be read ({gap.reason}; see gaps)"
    return f"this cluster serves no {kind.kind}s ({kind.resource}.{kind.group}/{kind.version} is not installed)"


@dataclass(frozen=True)
class Recreation:
    """Whether an owner re-creates what the delete removes on its next sync, and why, in words (the last line
    of the finding's evidence)."""

    recreates: bool
    why: str


SELF_HEAL = "selfHeal: it re-applies what went missing on its next reconciliation"
NO_SELF_HEAL = "no selfHeal: it applies everything again on its next revision"
RE_CREATES_NAMESPACE = f"{CREATE_NAMESPACE}: it re-creates the namespace itself"
INTERVAL = "not suspended: it re-applies its content every "
DRIFT = "not suspended, with drift detection enabled: it corrects what went missing on its next check"


def _recreates(kind: OwnerKind, owner: KubeObject) -> Recreation:
    """Whether the owner re-creates what the delete removes on its next sync, and why, in words."""
    spec = owner.get("spec") or {}
    if kind is APPLICATIONS:
        policy = spec.get("syncPolicy") or {}
        automated = policy.get("automated")
        options = [str(o) for o in policy.get("syncOptions") or ()]
        creates = CREATE_NAMESPACE in options
        if not isinstance(automated, dict) or automated.get("enabled") is False:
            return Recreation(
                False,
                "no automated sync (spec.syncPolicy.automated is not set): it syncs only when asked"
                + (f", then with {CREATE_NAMESPACE}" if creates else ""),
            )
        heals = automated.get("selfHeal") is True
        said = ["automated sync", SELF_HEAL if heals else NO_SELF_HEAL]
        if automated.get("prune") is True:
            said.append("prune")
        if creates:
            said.append(RE_CREATES_NAMESPACE)
        return Recreation(True, ", ".join(said))
    if spec.get("suspend") is True:
        return Recreation(False, "it is suspended (spec.suspend: true): it applies nothing until resumed")
    if kind is KUSTOMIZATIONS:
        interval = str(spec.get("interval") or "interval")
        return Recreation(True, INTERVAL + interval)
    mode = str((spec.get("driftDetection") or {}).get("mode") or "disabled")
    if mode == "enabled":
        return Recreation(True, DRIFT)
    return Recreation(
        False,
        f"drift detection is {mode}: it does not re-create what went missing until its next upgrade"
        if mode != "warn"
        else "drift detection is warn: it only reports what went missing, until its next upgrade",
    )


def _commands(kind: OwnerKind, namespace: str, name: str) -> list[str]:
    if kind is APPLICATIONS:
        return [
            f"kubectl -n {namespace} patch applications.argoproj.io {name} --type merge "
            '-p \'{"spec":{"syncPolicy":{"automated":null}}}\'',
            f"argocd app delete {namespace}/{name}",
        ]
    short = "kustomization" if kind is KUSTOMIZATIONS else "helmrelease"
    return [
        f"flux suspend {short} {name} -n {namespace}",
        f"kubectl -n {namespace} delete {kind.resource}.{kind.group} {name}",
    ]


def findings(ctx: Context, *, predicting: bool) -> list[Finding]:
    """One finding per owner the marks name: confirmed (and whether it re-creates), or unconfirmed."""
    return [_finding(ctx, claim, predicting=predicting) for claim in _claims(ctx)]


def _match(ctx: Context, claim: _Claim) -> tuple[KubeObject | None, list[KubeObject]]:
    """The owner that confirms the claim, and the objects of the same name that do not (Argo CD: another
    destination)."""
    owners = _owners(ctx, claim.kind)
    if claim.kind is APPLICATIONS:
        named = [a for a in owners if claim.name in _instance_names(a)]
        here = [
            a
            for a in named
            if ((a.get("spec") or {}).get("destination") or {}).get("namespace") == ctx.snapshot.namespace
        ]
        return (here[0] if here else None), [a for a in named if a not in here]
    found = [o for o in owners if meta(o).get("name") == claim.name and meta(o).get("namespace") == claim.namespace]
    return (found[0] if found else None), []


def _owner_finding(summary: str, objects: tuple[ObjectRef, ...], evidence: list[str], remedy: Remedy) -> Finding:
    """The one shape of every GitOps owner's finding, whichever the tool and whatever was found: never
    blocking, the owner (when found) then the objects it marks, one remedy."""
    return Finding(
        cause=Cause.GITOPS_OWNER,
        blocking=False,
        summary=summary,
        objects=objects[:MAX_OBJECTS],
        evidence=tuple(evidence),
        remedies=(remedy,),
    )


def _finding(ctx: Context, claim: _Claim, *, predicting: bool) -> Finding:
    kind = claim.kind
    ns = ctx.snapshot.namespace
    marked = ", ".join(r.display for r in claim.objects[:3]) + (
        f" and {len(claim.objects) - 3} more" if len(claim.objects) > 3 else ""
    )
    marks = {
        "tracking-id": f"annotation {TRACKING_ID}",
        "instance label": f"label {INSTANCE}={claim.name}",
        "labels": f"labels {kind.name_label}={claim.name}, {kind.namespace_label}={claim.namespace}",
    }
    carry = "carries" if len(claim.objects) == 1 else "carry"
    evidence = [
        f"{marked} {carry} the {' and '.join(marks[h] for h in sorted(claim.how))}, naming {kind.tool} "
        f"{kind.kind} {claim.name}"
    ]
    owner, elsewhere = _match(ctx, claim)
    if owner is None:
        words = f"{kind.tool} {kind.kind} {claim.name}" + (f" in {claim.namespace}" if claim.namespace else "")
        evidence.extend(_unconfirmed(ctx, claim, elsewhere))
        return _owner_finding(
            f"unconfirmed: {marked} {carry} the marks of {words}, but no {kind.kind} was found to confirm it; "
            f"if {kind.tool} manages it, it may re-create what the delete removes",
            tuple(claim.objects),
            evidence,
            Remedy(
                action=Action.INVESTIGATE,
                risk=Risk.NONE,
                description=f"Find out whether {words} manages namespace {ns} (and delete or suspend it first)",
                commands=tuple(_lookups(kind, claim.name)),
            ),
        )
    owner_ns = str(meta(owner).get("namespace", ""))
    owner_name = str(meta(owner).get("name", ""))
    words = f"{kind.tool} {kind.kind} {owner_ns}/{owner_name}"
    if kind is APPLICATIONS:
        dest = (owner.get("spec") or {}).get("destination") or {}
        where = dest.get("server") or dest.get("name") or "its cluster"
        evidence.append(f"confirmed: {kind.kind} {owner_ns}/{owner_name} deploys to namespace {ns} ({where})")
    else:
        evidence.append(f"confirmed: {kind.kind} {owner_ns}/{owner_name} exists")
    recreation = _recreates(kind, owner)
    evidence.append(recreation.why)
    objects = (ObjectRef.of(owner, resource=kind.resource), *claim.objects)
    commands = _commands(kind, owner_ns, owner_name)
    if not recreation.recreates:
        return _owner_finding(
            f"{words} manages {marked}; it would not re-create it on its own ({recreation.why.split(':')[0]}), but "
            "it stays and shows it missing",
            objects,
            evidence,
            Remedy(
                action=Action.INVESTIGATE,
                risk=Risk.NONE,
                description=f"Delete {words} too, when the namespace is meant to go for good",
                commands=tuple(commands[1:]),
            ),
        )
    verb = "would re-create" if predicting else "re-creates"
    return _owner_finding(
        f"{words} manages {marked} and {verb} what the delete removes on its next sync: delete or suspend "
        f"the {kind.kind} {owner_ns}/{owner_name} first",
        objects,
        evidence,
        owner_remedy(kind, owner_ns, owner_name, ns, commands, predicting=predicting),
    )


def _unconfirmed(ctx: Context, claim: _Claim, elsewhere: list[KubeObject]) -> list[str]:
    """Why no owner confirms the claim, in words."""
    kind = claim.kind
    said = []
    why = _unread(ctx, kind)
    if why is not None:
        said.append(why)
    for other in elsewhere:
        dest = ((other.get("spec") or {}).get("destination") or {}).get("namespace") or "no namespace"
        said.append(
            f"Application {meta(other).get('namespace')}/{meta(other).get('name')} has that name but deploys to "
            f"{dest}, not {ctx.snapshot.namespace}"
        )
    if why is None and not elsewhere:
        said.append(
            f"no {kind.kind} of that name"
            + (" deploys to this namespace" if kind is APPLICATIONS else f" exists in {claim.namespace}")
        )
    if claim.how == {"instance label"}:
        said.append(f"the {INSTANCE} label alone is weak evidence: Helm charts set it too (to the release's name)")
    return said


def owner_remedy(
    kind: OwnerKind, owner_ns: str, name: str, ns: str, commands: list[str], *, predicting: bool
) -> Remedy:
    return Remedy(
        action=Action.PREPARE if predicting else Action.INVESTIGATE,
        risk=Risk.NONE if not predicting else Risk.LOW,
        description=f"{RECREATES_REMEDY} the {kind.kind} {owner_ns}/{name} first, or {kind.tool} puts back what the "
        f"delete of namespace {ns} removes",
        commands=tuple(commands),
    )


def _lookups(kind: OwnerKind, name: str) -> list[str]:
    if kind is APPLICATIONS:
        return [f"kubectl get applications.argoproj.io -A --field-selector metadata.name={name}"]
    return [f"kubectl get {kind.resource}.{kind.group} -A --field-selector metadata.name={name}"]


def first(found: list[Finding]) -> list[Finding]:
    """The remedies of the owners that re-create ranked before those that delete content: each blocking
    finding whose remedies change the cluster gets them first."""
    owners = [
        f.remedies[0]
        for f in found
        if f.cause is Cause.GITOPS_OWNER and f.remedies and f.remedies[0].description.startswith(RECREATES_REMEDY)
    ]
    if not owners:
        return found
    return [
        replace(f, remedies=(*owners, *f.remedies))
        if f.blocking and any(r.action.changes_cluster or r.action is Action.PREPARE for r in f.remedies)
        else f
        for f in found
    ]


@dataclass(frozen=True)
class Recreating:
    """An owner that re-creates what the delete removes, as a finding of this module names it."""

    tool: str  # Argo CD, Flux
    owner: ObjectRef  # the Application, Kustomization or HelmRelease
    how: str  # in a word or two: `self-heal`, `automated sync, CreateNamespace`, `every 10m`, `drift detection`


def recreating(finding: Finding) -> Recreating | None:
    """The owner a finding of this module names as re-creating what the delete removes; None for any other
    finding (another cause, an owner not confirmed, or one that would not re-create)."""
    if finding.cause is not Cause.GITOPS_OWNER or not finding.objects or not finding.evidence:
        return None
    if not finding.remedies or not finding.remedies[0].description.startswith(RECREATES_REMEDY):
        return None
    owner = finding.objects[0]
    kind = next((k for k in OWNER_KINDS if (k.kind, k.group) == (owner.kind, owner.group)), None)
    how = _how(finding.evidence[-1])
    if kind is None or how is None:
        return None
    return Recreating(kind.tool, owner, how)


def _how(why: str) -> str | None:
    """`self-heal`, `every 10m`, ...: the words of `_recreates` for an owner that re-creates, shortened."""
    if why.startswith("automated sync, "):
        said = ["self-heal" if SELF_HEAL in why else "automated sync"]
        return ", ".join(said + (["CreateNamespace"] if RE_CREATES_NAMESPACE in why else []))
    if why.startswith(INTERVAL):
        return "every " + why.removeprefix(INTERVAL)
    if why == DRIFT:
        return "drift detection"
    return None


__all__ = ["OWNER_KINDS", "Recreating", "findings", "first", "recreating"]
