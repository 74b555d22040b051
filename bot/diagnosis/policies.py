"""webhook_blocks_delete by a ValidatingAdmissionPolicy: a namespace condition quotes its denial.

The API server's CEL admission (k8s.io/apiserver/pkg/admission/plugin/policy/validating) refuses a
request with `ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: <why>`.
nsstuck reads the policy and the binding the denial names and matches them to the writes the namespace
deletion makes, as far as their match rules go (matchConstraints and the binding's matchResources:
resource rules, operations, namespaceSelector); CEL (`matchConditions`, `validations`) is not evaluated,
and the finding says so. One refusal needs no CEL: a binding whose `paramRef` finds no parameter object
and says `parameterNotFoundAction: Deny` refuses every request it matches (kubernetes/kubernetes#129883:
the parameter lived in the namespace being deleted and went first).
"""

from __future__ import annotations

from typing import Any

from bot.diagnosis import remedies
from bot.diagnosis.admission import DELETE, UPDATE, Write, rule_matches, webhook_matches
from bot.diagnosis.conditions import Denial
from bot.diagnosis.context import Context, Held
from bot.domain.findings import Action, Cause, Finding, Remedy, Risk
from bot.domain.refs import KubeObject, ObjectRef, name_of
from bot.domain.snapshot import labels_of

POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
NO_PARAMS = "no params found"


def _named(ctx: Context, kind: str, name: str) -> KubeObject | None:
    return next((o for o in ctx.snapshot.admission_policies if o.get("kind") == kind and name_of(o) == name), None)


def _as_webhook(match: dict[str, Any]) -> dict[str, Any]:
    """A policy's matchConstraints (or a binding's matchResources) in the shape webhook matching reads."""
    return {
        "rules": match.get("resourceRules") or [],
        "namespaceSelector": match.get("namespaceSelector"),
        "objectSelector": match.get("objectSelector"),
        "matchPolicy": match.get("matchPolicy") or "Equivalent",
    }


def _matches(match: dict[str, Any] | None, write: Write, *, everything: bool) -> bool:
    """Whether a matchConstraints/matchResources stanza takes the write; `everything`: an absent stanza
    (a binding without matchResources takes all its policy matches)."""
    if not match:
        return everything
    if match.get("resourceRules") is None and everything:
        hook = {
            **_as_webhook(match),
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}],
        }
    else:
        hook = _as_webhook(match)
    if webhook_matches(hook, write) is None:
        return False
    return not any(rule_matches(rule, write) for rule in match.get("excludeResourceRules") or ())


def _writes(ctx: Context, held: Held) -> list[Write]:
    """The namespace controller's DELETE of the object, and the UPDATE by which a controller removes its finalizer."""
    rtype = held.rtype
    return [
        Write(
            operation=operation,
            group=rtype.group,
            version=rtype.version,
            resource=rtype.resource,
            namespace=ctx.snapshot.namespace,
            labels=labels_of(held.obj),
            namespace_labels=labels_of(ctx.namespace_obj),
        )
        for operation in (DELETE, UPDATE)
    ]


def _refused(ctx: Context, policy: KubeObject | None, binding: KubeObject | None) -> tuple[list[ObjectRef], list[str]]:
    """The objects left in the namespace whose deletion (or finalizer removal) the policy and binding take."""
    if policy is None:
        return [], []
    constraints = (policy.get("spec") or {}).get("matchConstraints")
    resources = (binding.get("spec") or {}).get("matchResources") if binding is not None else None
    objects: list[ObjectRef] = []
    operations: list[str] = []
    for held in ctx.remaining:
        taken = [
            w.operation
            for w in _writes(ctx, held)
            if _matches(constraints, w, everything=False) and _matches(resources, w, everything=True)
        ]
        if taken:
            objects.append(held.ref)
            operations.extend(o for o in taken if o not in operations)
    return objects, operations


def _policy_evidence(policy: KubeObject) -> list[str]:
    spec = policy.get("spec") or {}
    lines = []
    constraints = spec.get("matchConstraints") or {}
    rules = [
        f"{'/'.join(r.get('operations') or ['?'])} of {','.join(r.get('resources') or ['?'])}"
        for r in constraints.get("resourceRules") or ()
    ]
    lines.append(
        f"{POLICY} {name_of(policy)}: failurePolicy {spec.get('failurePolicy', 'Fail')}, matches "
        + ("; ".join(rules) if rules else "no resource rules")
        + (f", paramKind {(spec.get('paramKind') or {}).get('kind')}" if spec.get("paramKind") else "")
    )
    cel = [str(c.get("name", "?")) for c in spec.get("matchConditions") or ()]
    if cel:
        lines.append(f"its matchConditions ({', '.join(cel)}) are CEL that nsstuck does not evaluate")
    checks = [str(v.get("expression", "")) for v in spec.get("validations") or ()]
    if checks:
        shown = "; ".join(c if len(c) <= 120 else c[:119] + "\u2026" for c in checks[:3])
        lines.append(f"its validations are CEL that nsstuck does not evaluate: {shown}")
    return lines


def _binding_evidence(ctx: Context, binding: KubeObject, policy: KubeObject | None, denial: Denial) -> list[str]:
    spec = binding.get("spec") or {}
    lines = [
        f"{BINDING} {name_of(binding)}: policy {spec.get('policyName')}, validationActions "
        f"{', '.join(spec.get('validationActions') or ['?'])}"
    ]
    param = spec.get("paramRef") or {}
    if param:
        where = param.get("namespace") or ""
        kind = ((policy or {}).get("spec") or {}).get("paramKind") or {}
        lines.append(
            f"its paramRef: {kind.get('kind', 'a parameter')} "
            + (f"named {param['name']}" if param.get("name") else f"selected by {param.get('selector')}")
            + (f" in {where}" if where else " in the namespace of each request (here: this namespace)")
            + f", parameterNotFoundAction {param.get('parameterNotFoundAction', 'Deny')}"
        )
        if NO_PARAMS in denial.quote:
            lines.append(
                "the binding finds no parameter object, and with parameterNotFoundAction Deny it refuses every "
                "request it matches before any expression is evaluated"
                + (
                    "; the parameter is looked up in this namespace, whose content is being deleted"
                    if not where
                    else ""
                )
            )
    selector = (spec.get("matchResources") or {}).get("namespaceSelector")
    if selector:
        lines.append(f"its matchResources.namespaceSelector: {selector}")
    return lines


def _finding(ctx: Context, denial: Denial) -> Finding:
    policy = _named(ctx, POLICY, denial.name)
    binding = _named(ctx, BINDING, denial.binding)
    evidence = [
        line
        for c in ctx.facts.conditions
        if c.get("status") == "True" and denial.quote[:60] in str(c.get("message"))
        for line in [f"namespace condition {c.get('type')} ({c.get('reason')}): {c.get('message')}"]
    ]
    evidence.append(f"the namespace controller's condition quotes the denial: {denial.quote}")
    objects: list[ObjectRef] = []
    gaps = [g for g in ctx.snapshot.gaps if "validatingadmissionpolic" in g.what]
    if policy is not None:
        objects.append(ObjectRef.of(policy, resource="validatingadmissionpolicies"))
        evidence.extend(_policy_evidence(policy))
    else:
        evidence.append(
            f"{POLICY} {denial.name} could not be read ({gaps[0]})"
            if gaps
            else f"{POLICY} {denial.name} is not in the cluster now"
        )
    if binding is not None:
        objects.append(ObjectRef.of(binding, resource="validatingadmissionpolicybindings"))
        evidence.extend(_binding_evidence(ctx, binding, policy, denial))
    elif not gaps:
        evidence.append(f"{BINDING} {denial.binding} is not in the cluster now")
    refused, operations = _refused(ctx, policy, binding)
    if refused:
        shown = ", ".join(o.display for o in refused[:10]) + (
            f" and {len(refused) - 10} more" if len(refused) > 10 else ""
        )
        evidence.append(
            f"left in the namespace, matched by the policy's rules for {' and '.join(operations)} "
            f"(as far as its match rules go): {shown}"
        )
    elif policy is not None:
        evidence.append(
            "no object left in the namespace is matched by the policy's resource rules as nsstuck reads them"
        )
    commands = [f"kubectl get validatingadmissionpolicy {denial.name} -o yaml"]
    if denial.binding:
        commands.append(f"kubectl get validatingadmissionpolicybinding {denial.binding} -o yaml")
    first = remedies.investigate(
        f"Change the policy {denial.name} or its binding {denial.binding} so that it lets the deletion of this "
        "namespace through (parameterNotFoundAction Allow, a matchCondition that skips objects being deleted, or a "
        "namespaceSelector that leaves this namespace out), or restore what it needs (its parameter object); the "
        "namespace controller's next pass then finishes",
        commands,
    )
    later: list[Remedy] = []
    if binding is not None:
        later.append(
            Remedy(
                action=Action.INVESTIGATE,
                risk=Risk.HIGH,
                description=(
                    f"Later, at higher risk, by hand: delete the binding {denial.binding} (every check {denial.name} "
                    "enforces through it stops until it is recreated)"
                ),
                # named, so that it is not taken for the first remedy (a remedy's id is its action and targets)
                targets=(ObjectRef.of(binding, resource="validatingadmissionpolicybindings"),),
                commands=(f"kubectl delete validatingadmissionpolicybinding {denial.binding}",),
            )
        )
    return Finding(
        cause=Cause.WEBHOOK_BLOCKS_DELETE,
        blocking=True,
        summary=(
            f"{POLICY} {denial.name} (binding {denial.binding}) denies the namespace's deletion: "
            f"the API server refuses ({denial.quote})"
        ),
        objects=(*objects, *refused),
        evidence=tuple(evidence),
        remedies=remedies.rank([first, *later]),
    )


def findings(ctx: Context) -> list[Finding]:
    return [_finding(ctx, d) for d in ctx.facts.denials if d.kind == "policy"]
