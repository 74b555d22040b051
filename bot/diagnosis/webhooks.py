"""webhook_blocks_delete: an admission or conversion webhook that fails closed blocks deletes or lists.

The namespace controller's DELETE calls go through admission like anyone's. A webhook with
`failurePolicy: Fail` whose rules match DELETE on something in the namespace, and whose backend
cannot answer, turns every such delete into a 500. A CRD conversion webhook that cannot answer
makes listing that resource fail.
"""

from __future__ import annotations

from typing import Any

from bot.diagnosis import remedies
from bot.diagnosis.admission import DELETE, Write, webhook_matches
from bot.diagnosis.context import Context
from bot.diagnosis.reading import backend, matches_selector, pod_is_ready
from bot.domain.findings import Action, Cause, Finding
from bot.domain.refs import KubeObject, ObjectRef, name_of
from bot.domain.snapshot import labels_of


def intercepted(ctx: Context, webhook: dict[str, Any]) -> tuple[list[str], list[ObjectRef]]:
    """The resource types with objects in the namespace whose DELETE this webhook intercepts, and
    those objects: what the namespace controller cannot delete while the webhook cannot answer."""
    types: list[str] = []
    objects: list[ObjectRef] = []
    namespace_labels = labels_of(ctx.namespace_obj)
    for held in ctx.remaining:
        rtype = held.rtype
        write = Write(
            operation=DELETE,
            group=rtype.group,
            version=rtype.version,
            resource=rtype.resource,
            namespace=ctx.snapshot.namespace,
            labels=labels_of(held.obj),
            namespace_labels=namespace_labels,
        )
        if webhook_matches(webhook, write) is None:
            continue
        if rtype.key not in types:
            types.append(rtype.key)
        objects.append(held.ref)
    return types, objects


def _resource_of(config: KubeObject) -> str:
    return (
        "validatingwebhookconfigurations"
        if config.get("kind", "").startswith("Validating")
        else "mutatingwebhookconfigurations"
    )


def findings(ctx: Context) -> list[Finding]:
    out = []
    namespace_labels = labels_of(ctx.namespace_obj)
    named_failing = set(ctx.facts.failing_webhooks)
    named_denying = set(ctx.facts.denying_webhooks) | {d.name for d in ctx.facts.denials if d.kind == "webhook"}
    for config in ctx.snapshot.webhook_configurations:
        config_ref = ObjectRef.of(config, resource=_resource_of(config))
        for webhook in config.get("webhooks") or ():
            name = str(webhook.get("name", ""))
            policy = webhook.get("failurePolicy", "Fail")
            matched, leftovers = intercepted(ctx, webhook)
            in_scope = matches_selector(namespace_labels, webhook.get("namespaceSelector"))
            named = name in named_failing
            denies = name in named_denying
            if not (named or denies or (matched and in_scope and policy == "Fail")):
                continue
            evidence = []
            line = ctx.facts.line("NamespaceDeletionContentFailure")
            if line and (named or denies):
                evidence.append(line)
            evidence.append(
                f"{config.get('kind')} {name_of(config)}, webhook {name}: failurePolicy {policy}, "
                f"intercepts DELETE of {', '.join(matched) if matched else 'resources in this namespace'}"
            )
            if leftovers:
                shown = ", ".join(o.display for o in leftovers[:10])
                more = f" and {len(leftovers) - 10} more" if len(leftovers) > 10 else ""
                evidence.append(f"left in the namespace because the webhook intercepts their DELETE: {shown}{more}")
            client = webhook.get("clientConfig") or {}
            service = client.get("service") or {}
            healthy = True
            uninstalled = False
            commands: list[str] = []
            if service:
                chain = backend(ctx.snapshot, str(service.get("namespace", "")), str(service.get("name", "")))
                evidence.extend(chain.evidence)
                healthy = chain.healthy
                uninstalled = not chain.exists or (not chain.pods and not chain.workloads)
                commands = [f"kubectl -n {chain.namespace} get pods,endpointslices -o wide"]
                target = f"{chain.name} in {chain.namespace}"
            else:
                evidence.append(f"the webhook calls {client.get('url', 'an external URL')}; nsstuck cannot check it")
                target = str(client.get("url", "its URL"))
            if denies:
                denial = next((d for d in ctx.facts.denials if d.kind == "webhook" and d.name == name), None)
                quote = denial.quote if denial is not None else f'admission webhook "{name}" denied the request'
                evidence.append(f"the namespace controller's condition quotes the denial: {quote}")
                if healthy or not service:
                    summary = (
                        f"webhook {name} ({config.get('kind')} {name_of(config)}) denies the namespace controller's "
                        f"deletes: its backend answers and refuses ({quote})"
                    )
                else:
                    summary = (
                        f"webhook {name} ({config.get('kind')} {name_of(config)}) refused the namespace controller's "
                        f"deletes ({quote}), and its backend {target} cannot answer now: with failurePolicy {policy} "
                        "the deletes fail either way"
                    )
                first = remedies.investigate(
                    f"Change what {name} refuses: its policy (an exception for the namespace controller, "
                    "system:serviceaccount:kube-system:namespace-controller, or for namespaces being deleted), or the "
                    "object it protects (the label or annotation its denial names); the namespace controller's next "
                    "pass then deletes it. Read the webhook's answer in its backend's log",
                    [f"kubectl get {_resource_of(config)} {name_of(config)} -o yaml", *commands],
                )
            elif healthy and not named:
                continue  # fails closed, but its backend answers: not what blocks
            else:
                summary = (
                    f"webhook {name} ({config.get('kind')} {name_of(config)}) fails closed and its backend "
                    f"{target} cannot answer, so deleting objects in the namespace fails"
                )
                first = remedies.restore(Action.RESTORE_BACKEND, f"Restore the webhook's backend {target}", commands)
            delete = remedies.delete_webhook_configuration(
                config_ref,
                consequence=(
                    f"every check {name_of(config)} enforces stops until it is reinstalled"
                    + ("; it answers, so change its policy first" if denies else "")
                ),
            )
            if uninstalled and not denies:
                evidence.append(f"nothing runs behind {target}: the webhook's backend was uninstalled")
                summary += " (its backend was uninstalled)"
            out.append(
                Finding(
                    cause=Cause.WEBHOOK_BLOCKS_DELETE,
                    blocking=True,
                    summary=summary,
                    objects=(config_ref, *leftovers),
                    evidence=tuple(evidence),
                    remedies=remedies.rank([delete, first] if uninstalled and not denies else [first, delete]),
                )
            )
    out.extend(_conversion_findings(ctx))
    return out


def collections_intercepted(ctx: Context, webhook: dict[str, Any]) -> list[str]:
    """The namespaced types whose delete-collection in this namespace the webhook receives.

    The namespace controller asks every deletable namespaced type that supports it for a
    deletecollection, empty or not; the API server sends that request to admission once, with no name
    and no object (k8s.io/apiserver/pkg/endpoints/handlers/delete.go), so a webhook with an
    objectSelector never sees it, and one whose code expects an object may refuse it."""
    if webhook.get("objectSelector") and (webhook.get("objectSelector") or {}) != {}:
        return []
    namespace_labels = labels_of(ctx.namespace_obj)
    out = []
    for rtype in ctx.snapshot.resource_types:
        if not rtype.namespaced or (rtype.verbs and "deletecollection" not in rtype.verbs):
            continue
        write = Write(
            operation=DELETE,
            group=rtype.group,
            version=rtype.version,
            resource=rtype.resource,
            namespace=ctx.snapshot.namespace,
            namespace_labels=namespace_labels,
        )
        if webhook_matches(webhook, write) is not None:
            out.append(rtype.key)
    return out


def collection_suspects(ctx: Context, deleted_for: str) -> list[Finding]:
    """A namespace with no deletion conditions that nothing else explains: the fail-closed webhooks that
    receive the namespace controller's delete-collection requests of this namespace.

    Without a condition nothing quotes a refusal, so the finding says what is seen: the webhook receives
    those requests, and whether its backend answers. Threads where this was the cause: openebs/openebs#2431
    (an admission server that failed on the empty name of a PVC deletecollection), kubermatic#4445 (a Seed
    webhook that refused the collection delete of a namespace holding no Seed)."""
    out = []
    for config in ctx.snapshot.webhook_configurations:
        config_ref = ObjectRef.of(config, resource=_resource_of(config))
        for webhook in config.get("webhooks") or ():
            if webhook.get("failurePolicy", "Fail") != "Fail":
                continue
            types = collections_intercepted(ctx, webhook)
            if not types:
                continue
            name = str(webhook.get("name", ""))
            shown = ", ".join(types[:5]) + (f" and {len(types) - 5} more" if len(types) > 5 else "")
            evidence = [
                f"the namespace has no deletion conditions after {deleted_for}: nothing quotes what refused the "
                "namespace controller (a server before 1.16 writes none)",
                f"{config.get('kind')} {name_of(config)}, webhook {name}: failurePolicy Fail, receives the namespace "
                f"controller's delete-collection of {shown} in this namespace (sent once per type, with no name and "
                "no object, even when the type holds nothing)",
            ]
            client = webhook.get("clientConfig") or {}
            service = client.get("service") or {}
            commands = [f"kubectl get {_resource_of(config)} {name_of(config)} -o yaml"]
            answers: bool | None = None
            if service:
                chain = backend(ctx.snapshot, str(service.get("namespace", "")), str(service.get("name", "")))
                evidence.extend(chain.evidence)
                answers = chain.healthy or any(pod_is_ready(p) for p in chain.pods)
                commands.append(f"kubectl -n {chain.namespace} get pods,endpointslices -o wide")
                target = f"{chain.name} in {chain.namespace}"
            else:
                evidence.append(f"the webhook calls {client.get('url', 'an external URL')}; nsstuck cannot check it")
                target = str(client.get("url", "its URL"))
            first_type = types[0]
            resource, _, group = first_type.partition(".")
            root = f"/apis/{group}/" if group else "/api/"
            version = next((t.version for t in ctx.snapshot.resource_types if t.key == first_type), "v1")
            dry_run = (
                f"kubectl delete --raw '{root}{version}/namespaces/{ctx.snapshot.namespace}/{resource}?dryRun=All'"
            )
            if answers is False:
                summary = (
                    f"webhook {name} ({config.get('kind')} {name_of(config)}) fails closed on the namespace "
                    f"controller's delete-collection of {shown} and its backend {target} cannot answer"
                )
                first = remedies.restore(Action.RESTORE_BACKEND, f"Restore the webhook's backend {target}", commands)
            else:
                summary = (
                    f"webhook {name} ({config.get('kind')} {name_of(config)}) receives the namespace controller's "
                    f"delete-collection of {shown}; its backend answers, and nothing else explains the namespace: "
                    "it is the likely refusal (no condition quotes it)"
                )
                first = remedies.investigate(
                    f"Ask the API server the namespace controller's request without deleting anything (a dry run "
                    f"goes through {name}); if {name} refuses it, change its policy to let the namespace "
                    "controller's delete-collection through (no name, no object)",
                    [dry_run, *commands],
                )
            delete = remedies.delete_webhook_configuration(
                config_ref, consequence=f"every check {name_of(config)} enforces stops until it is reinstalled"
            )
            out.append(
                Finding(
                    cause=Cause.WEBHOOK_BLOCKS_DELETE,
                    blocking=True,
                    summary=summary,
                    objects=(config_ref,),
                    evidence=tuple(evidence),
                    remedies=remedies.rank([first, delete]),
                )
            )
    return out


def _conversion_findings(ctx: Context) -> list[Finding]:
    out = []
    for crd in ctx.snapshot.crds:
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            continue
        client = ((conversion.get("webhook") or {}).get("clientConfig")) or conversion.get("webhookClientConfig") or {}
        service = client.get("service") or {}
        if not service:
            continue
        chain = backend(ctx.snapshot, str(service.get("namespace", "")), str(service.get("name", "")))
        if chain.healthy:
            continue
        spec = crd.get("spec") or {}
        key = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
        gaps = [g for g in ctx.snapshot.gaps if key in g.what]
        if not gaps and not ctx.snapshot.objects(key):
            continue
        evidence = [f"CRD {name_of(crd)} converts versions through a webhook", *chain.evidence]
        evidence.extend(f"listing failed: {g}" for g in gaps)
        out.append(
            Finding(
                cause=Cause.WEBHOOK_BLOCKS_DELETE,
                blocking=True,
                summary=f"the conversion webhook of {key} cannot answer, so {key} cannot be listed or deleted",
                objects=(ObjectRef.of(crd, resource="customresourcedefinitions"),),
                evidence=tuple(evidence),
                remedies=(
                    remedies.restore(
                        Action.RESTORE_BACKEND,
                        f"Restore the conversion webhook's backend {chain.name} in {chain.namespace}",
                    ),
                ),
            )
        )
    return out
