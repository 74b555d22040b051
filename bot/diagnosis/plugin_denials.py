"""deletion_error, named: an admission plugin of the API server refuses the namespace controller's deletes.

Webhooks (`webhooks.py`) and ValidatingAdmissionPolicies (`policies.py`) have findings of their own. Any
other admission plugin refuses as `admission.NewForbidden` words it (k8s.io/apiserver/pkg/admission/errors.go):
`<resource>[.<group>] "<name>" is forbidden: <why>`, where the name is `Unknown` for a request that carries
none: the items of the namespace controller's delete-collection, which admission sees without a name. The
namespace controller copies that error into its NamespaceDeletionContentFailure condition. RBAC's refusal
is worded alike but names a user (`User "x" cannot delete resource ...`) and is not parsed as a denial
(`conditions.denials`).

The cause stays `deletion_error`: it is the namespace controller's deletion error, now with the plugin
named (or "an admission plugin" when its words do not tell which), the denial quoted (redacted, cut), the
objects it could not delete, and what the denial asks for first.
"""

from __future__ import annotations

import shlex

from bot.diagnosis import remedies
from bot.diagnosis.conditions import Denial
from bot.diagnosis.context import Context, Held
from bot.domain.controller_logs import redact
from bot.domain.findings import Action, Cause, Finding, Remedy, Risk
from bot.domain.refs import ObjectRef

# the name admission.NewForbidden gives a request that has none (a delete-collection's items)
NAMELESS = "Unknown"

# what each known plugin's refusal asks for, safest first: (what to change, commands; NS is the namespace)
_ASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AlwaysDeny": (
        "AlwaysDeny refuses every write, the namespace controller's deletes included: take it out of the API "
        "server's --enable-admission-plugins (it exists for tests); the namespace controller's next pass then "
        "deletes the content",
        ("kubectl -n kube-system get pods -l component=kube-apiserver -o yaml | grep -e '--enable-admission-plugins'",),
    ),
    "ResourceQuota": (
        "Change the ResourceQuota the denial names (raise its limit, or delete it while the namespace goes), or "
        "free what it counts; the namespace controller's next pass then goes through",
        ("kubectl -n NS get resourcequota", "kubectl -n NS describe resourcequota"),
    ),
    "PodSecurity": (
        "Change the object so that it meets the Pod Security level the denial names, or the namespace's "
        "pod-security.kubernetes.io/enforce label (the policy) while it is deleted",
        ("kubectl get namespace NS --show-labels",),
    ),
    "OwnerReferencesPermissionEnforcement": (
        "Give the writer the right the denial names (update on the owner's finalizers subresource), or change the "
        "object's ownerReferences so that it does not set blockOwnerDeletion",
        ("kubectl -n NS get TYPE -o yaml",),
    ),
    "NodeRestriction": (
        "The request came with a node's credentials, which may delete only the pods bound to that node: "
        "kube-controller-manager must run with its own credentials",
        ("kubectl -n kube-system get pods -l component=kube-controller-manager -o yaml",),
    ),
}


def _refused(ctx: Context, denial: Denial) -> tuple[list[ObjectRef], str]:
    """The objects left in the namespace that the denial kept the namespace controller from deleting, and a
    line saying how the message names them."""
    of_type = [h for h in ctx.remaining if h.rtype.key == denial.resource]
    if denial.target and denial.target != NAMELESS:
        named: list[Held] = [h for h in of_type if h.ref.name == denial.target]
        if named:
            return [h.ref for h in named], f"the denial names {named[0].ref.display}, which is still in the namespace"
        return [], f"the denial names {denial.resource}/{denial.target}, which is no longer in the namespace"
    how = (
        f'the name "{NAMELESS}": the API server refused the namespace controller\'s delete-collection of '
        f"{denial.resource}, whose items admission sees without a name"
        if denial.target == NAMELESS
        else f"the denial names no object, only {denial.resource}"
    )
    if not of_type:
        return [], f"{how}; no {denial.resource} is left in the namespace now"
    shown = ", ".join(h.ref.display for h in of_type[:10]) + (
        f" and {len(of_type) - 10} more" if len(of_type) > 10 else ""
    )
    return [h.ref for h in of_type], f"{how}; left in the namespace: {shown}"


def _commands(ctx: Context, denial: Denial, objects: list[ObjectRef]) -> list[str]:
    """A server-side dry run of the namespace controller's request: it goes through admission and deletes
    nothing, so it says whether the plugin still refuses."""
    namespace = shlex.quote(ctx.snapshot.namespace)
    if denial.target and denial.target != NAMELESS and objects:
        target = objects[0]
        return [f"kubectl -n {namespace} delete {target.kubectl_type} {shlex.quote(target.name)} --dry-run=server"]
    rtype = next((h.rtype for h in ctx.remaining if h.rtype.key == denial.resource), None)
    if rtype is None:
        return []
    root = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
    return [f"kubectl delete --raw '{root}/namespaces/{ctx.snapshot.namespace}/{rtype.resource}?dryRun=All'"]


def _finding(ctx: Context, denial: Denial) -> Finding:
    who = f"admission plugin {denial.name}" if denial.name else "an admission plugin"
    objects, named = _refused(ctx, denial)
    evidence = [
        f"namespace condition {c.get('type')} ({c.get('reason')}): {redact(str(c.get('message')))}"
        for c in ctx.facts.conditions
        if c.get("status") == "True" and denial.quote[:60] in redact(str(c.get("message")))
    ]
    evidence.append(f"the namespace controller's condition quotes the denial: {denial.quote}")
    evidence.append(
        f'worded as the API server\'s admission plugins refuse ({denial.resource} "name" is forbidden: ...), '
        "not by a webhook or a ValidatingAdmissionPolicy, and not RBAC's refusal (which names a user)"
        + (
            ""
            if denial.name
            else "; its words do not tell which plugin (one compiled into the API server, or "
            "into the aggregated API server that serves the type)"
        )
    )
    evidence.append(named)
    dry_run = _commands(ctx, denial, objects)
    asked = _ASKS.get(denial.name)
    if asked is not None:
        what, commands = asked
        kubectl_type = objects[0].kubectl_type if objects else denial.resource
        first = remedies.investigate(
            f"{what}. The denial: {denial.quote}",
            [c.replace("NS", shlex.quote(ctx.snapshot.namespace)).replace("TYPE", kubectl_type) for c in commands]
            + dry_run,
        )
    else:
        first = remedies.investigate(
            "Do what the denial asks: change the object it protects or the policy it enforces, then ask the API server "
            f"the namespace controller's request again without deleting anything (a dry run goes through {who}); the "
            f"namespace controller's next pass then deletes the content. The denial: {denial.quote}",
            dry_run,
        )
    later: list[Remedy] = [
        Remedy(
            action=Action.INVESTIGATE,
            risk=Risk.NONE,
            # named, so that it is not taken for the first remedy (a remedy's id is its action and targets)
            targets=(ctx.namespace_ref,),
            description=(
                "Read which admission plugins the API server runs and their configuration (--enable-admission-plugins, "
                "--admission-control-config-file), and the kube-controller-manager log for this namespace"
            ),
            commands=(
                "kubectl -n kube-system get pods -l component=kube-apiserver -o yaml",
                f"kubectl get namespace {shlex.quote(ctx.snapshot.namespace)} -o yaml",
            ),
        )
    ]
    return Finding(
        cause=Cause.DELETION_ERROR,
        blocking=True,
        summary=(
            f"{who} refuses the namespace controller's deletes of {denial.resource}, so they stay: {denial.quote}"
        ),
        objects=tuple(objects),
        evidence=tuple(evidence),
        remedies=remedies.rank([first, *later]),
    )


def findings(ctx: Context) -> list[Finding]:
    return [_finding(ctx, d) for d in ctx.facts.denials if d.kind == "plugin"]
