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
from bot.diagnosis.reading import backend, matches_selector
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
    named_denying = set(ctx.facts.denying_webhooks)
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
                summary = f"webhook {name} denies the deletes of the namespace controller"
                first = remedies.investigate(
                    f"Find out why {name} denies deleting objects in this namespace (its policy, or its logs)",
                    commands,
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
                config_ref, consequence=f"every check {name_of(config)} enforces stops until it is reinstalled"
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
