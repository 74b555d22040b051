"""Remedies and the exact kubectl commands they amount to, ranked from safest to last resort."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii

from bot.domain.findings import Action, Remedy, Risk
from bot.domain.refs import ObjectRef


def rank(remedies: Iterable[Remedy]) -> tuple[Remedy, ...]:
    """The rule's own order (it knows what fixes the cause in its situation), without duplicates,
    and force-finalizing the namespace always last."""
    unique: dict[str, Remedy] = {}
    for remedy in remedies:
        unique.setdefault(remedy.id, remedy)
    return tuple(sorted(unique.values(), key=lambda r: r.action is Action.FORCE_FINALIZE_NAMESPACE))


def _ns(ref: ObjectRef) -> str:
    return f" -n {shlex.quote(ref.namespace)}" if ref.namespace else ""


def restore(action: Action, description: str, commands: Iterable[str] = ()) -> Remedy:
    return Remedy(action=action, risk=Risk.NONE, description=description, commands=tuple(commands))


def investigate(description: str, commands: Iterable[str] = ()) -> Remedy:
    return Remedy(action=Action.INVESTIGATE, risk=Risk.NONE, description=description, commands=tuple(commands))


def wait(description: str) -> Remedy:
    return Remedy(action=Action.WAIT, risk=Risk.NONE, description=description)


def delete_apiservice(apiservice: ObjectRef, *, risk: Risk, consequence: str) -> Remedy:
    return Remedy(
        action=Action.DELETE_APISERVICE,
        risk=risk,
        description=f"Delete the APIService {apiservice.name}",
        targets=(apiservice,),
        commands=(f"kubectl delete apiservice {shlex.quote(apiservice.name)}",),
        leaves_behind=(consequence,),
    )


def finalizer_patch(obj: ObjectRef, finalizer: str) -> str:
    """A JSON patch that removes exactly `finalizer` from metadata.finalizers, and fails (the `test`)
    if the list changed since the diagnosis, instead of removing whatever now sits at that index."""
    index = obj.finalizers.index(finalizer) if finalizer in obj.finalizers else 0
    # the text `json.dumps(patch, separators=(",", ":"))` gives of
    # [{"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
    #  {"op": "remove", "path": f"/metadata/finalizers/{index}"}], written out: made for every object
    # held (thousands), where json.dumps costs most of the remedy (tests/diagnosis/test_rules.py)
    return (
        f'[{{"op":"test","path":"/metadata/finalizers/{index}","value":{encode_basestring_ascii(finalizer)}}},'
        f'{{"op":"remove","path":"/metadata/finalizers/{index}"}}]'
    )


def remove_finalizer(obj: ObjectRef, finalizer: str, *, risk: Risk, consequence: str) -> Remedy:
    """Remove exactly one finalizer from one object, guarded by a JSON patch `test`."""
    command = (
        f"kubectl patch {obj.kubectl_type} {shlex.quote(obj.name)}{_ns(obj)} --type=json "
        f"-p {shlex.quote(finalizer_patch(obj, finalizer))}"
    )
    return Remedy(
        action=Action.REMOVE_FINALIZER,
        risk=risk,
        description=f"Remove {finalizer} from {obj.display}",
        targets=(obj,),
        commands=(command,),
        leaves_behind=(consequence,),
        finalizer=finalizer,
    )


def remove_namespace_finalizer(
    namespace: ObjectRef, finalizer: str, *, in_spec: bool, consequence: str, risk: Risk = Risk.MEDIUM
) -> Remedy:
    """Removing one finalizer of the namespace itself; `consequence` is what then goes undone (empty:
    nothing, for a token no controller acts on)."""
    if in_spec:
        filt = f'.spec.finalizers -= ["{finalizer}"]'
        command = (
            f"kubectl get namespace {shlex.quote(namespace.name)} -o json | jq {shlex.quote(filt)} | "
            f"kubectl replace --raw /api/v1/namespaces/{namespace.name}/finalize -f -"
        )
        where = "spec.finalizers"
    else:
        command = (
            f"kubectl patch namespace {shlex.quote(namespace.name)} --type=json "
            f"-p {shlex.quote(finalizer_patch(namespace, finalizer))}"
        )
        where = "metadata.finalizers"
    return Remedy(
        action=Action.REMOVE_NAMESPACE_FINALIZER,
        risk=risk,
        description=f"Remove {finalizer} from the namespace's {where}",
        targets=(namespace,),
        commands=(command,),
        leaves_behind=(consequence,) if consequence else (),
        finalizer=finalizer,
    )


def force_delete_pod(pod: ObjectRef, *, risk: Risk, consequence: str) -> Remedy:
    return Remedy(
        action=Action.FORCE_DELETE_POD,
        risk=risk,
        description=f"Force-delete pod {pod.name} (grace period 0)",
        targets=(pod,),
        commands=(f"kubectl delete pod {shlex.quote(pod.name)}{_ns(pod)} --grace-period=0 --force",),
        leaves_behind=(consequence,),
    )


def delete_webhook_configuration(config: ObjectRef, *, consequence: str) -> Remedy:
    kind = "validatingwebhookconfiguration" if config.kind.startswith("Validating") else "mutatingwebhookconfiguration"
    return Remedy(
        action=Action.DELETE_WEBHOOK_CONFIGURATION,
        risk=Risk.HIGH,
        description=f"Delete the {config.kind} {config.name} ({consequence})",
        targets=(config,),
        commands=(f"kubectl delete {kind} {shlex.quote(config.name)}",),
        leaves_behind=(consequence,),
    )


def force_finalize(namespace: ObjectRef, orphans: Iterable[str]) -> Remedy:
    left = tuple(orphans)
    name = namespace.name
    return Remedy(
        action=Action.FORCE_FINALIZE_NAMESPACE,
        risk=Risk.HIGH,
        description=(
            f"Last resort: force-finalize namespace {name} (empties spec.finalizers"
            + (f"; {len(left)} object(s) would be left orphaned in etcd" if left else "")
            + ")"
        ),
        targets=(namespace,),
        commands=(
            f"kubectl get namespace {shlex.quote(name)} -o json | jq '.spec.finalizers = []' | "
            f"kubectl replace --raw /api/v1/namespaces/{name}/finalize -f -",
        ),
        leaves_behind=left or ("nothing known: the namespace looks empty",),
        finalizer="kubernetes",
    )
