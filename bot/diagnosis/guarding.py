"""Every remedy that writes, checked against admission before it is offered.

A validating or mutating webhook with `failurePolicy: Fail` whose backend cannot answer rejects
every write it intercepts (`failed calling webhook ...`). A remedy whose write it intercepts is
marked `blocked_by` that webhook; repairing the webhook's backend or deleting its configuration
(which no webhook ever intercepts) is ranked before it in the same finding, whose evidence and
objects name the webhook.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from bot.diagnosis import remedies
from bot.diagnosis.admission import DELETE, UPDATE, Write, webhook_matches
from bot.diagnosis.context import Context
from bot.diagnosis.reading import Backend, backend
from bot.domain.findings import Action, BlockedBy, Finding, Remedy
from bot.domain.refs import KubeObject, ObjectRef, meta, name_of
from bot.domain.snapshot import labels_of


@dataclass(frozen=True)
class DeadWebhook:
    """A fail-closed webhook whose backend cannot answer: it rejects every write it intercepts."""

    config: KubeObject
    webhook: dict[str, Any]
    chain: Backend

    @property
    def blocker(self) -> BlockedBy:
        return BlockedBy(kind=str(self.config.get("kind", "")), configuration=name_of(self.config), webhook=self.name)

    @property
    def name(self) -> str:
        return str(self.webhook.get("name", ""))

    @property
    def config_ref(self) -> ObjectRef:
        return ObjectRef.of(self.config, resource=config_resource(self.config))

    @property
    def uninstalled(self) -> bool:
        return not self.chain.exists or (not self.chain.pods and not self.chain.workloads)


def config_resource(config: KubeObject) -> str:
    return (
        "validatingwebhookconfigurations"
        if str(config.get("kind", "")).startswith("Validating")
        else "mutatingwebhookconfigurations"
    )


def dead_webhooks(ctx: Context) -> list[DeadWebhook]:
    out = []
    for config in ctx.snapshot.webhook_configurations:
        for webhook in config.get("webhooks") or ():
            if (webhook.get("failurePolicy") or "Fail") != "Fail":
                continue
            service = (webhook.get("clientConfig") or {}).get("service") or {}
            if not service:
                continue  # a URL webhook: nothing nsstuck can check (url_webhooks says so)
            chain = backend(ctx.snapshot, str(service.get("namespace", "")), str(service.get("name", "")))
            if not chain.healthy:
                out.append(DeadWebhook(config, dict(webhook), chain))
    return out


def url_webhooks(ctx: Context) -> list[tuple[KubeObject, dict[str, Any]]]:
    """Fail-closed webhooks called at a URL: whether they answer, nsstuck cannot check."""
    return [
        (config, dict(webhook))
        for config in ctx.snapshot.webhook_configurations
        for webhook in config.get("webhooks") or ()
        if (webhook.get("failurePolicy") or "Fail") == "Fail" and not (webhook.get("clientConfig") or {}).get("service")
    ]


def _labels(ctx: Context, ref: ObjectRef) -> dict[str, str]:
    for _, obj in ctx.snapshot.all_contents():
        m = meta(obj)
        if (ref.uid and m.get("uid") == ref.uid) or (
            not ref.uid and m.get("name") == ref.name and m.get("namespace") == ref.namespace
        ):
            return labels_of(obj)
    for obj in (*ctx.snapshot.crds, *ctx.snapshot.apiservices):
        if name_of(obj) == ref.name and obj.get("kind") == ref.kind:
            return labels_of(obj)
    return {}


def _served(ctx: Context, group: str, resource: str) -> tuple[str, ...]:
    for crd in ctx.snapshot.crds:
        spec = crd.get("spec") or {}
        if spec.get("group") == group and (spec.get("names") or {}).get("plural") == resource:
            return tuple(str(v.get("name")) for v in spec.get("versions") or () if v.get("served", True))
    return ()


def _write(ctx: Context, operation: str, ref: ObjectRef, subresource: str = "") -> Write:
    group = ref.group
    resource = ref.plural
    is_namespace = group == "" and resource == "namespaces"
    namespace = ref.name if is_namespace else (ref.namespace or "")
    labels = labels_of(ctx.namespace_obj) if is_namespace and ref.name == ctx.snapshot.namespace else _labels(ctx, ref)
    return Write(
        operation=operation,
        group=group,
        version=ref.api_version.rpartition("/")[2],
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        labels=labels,
        namespace_labels=labels_of(ctx.namespace_obj) if namespace == ctx.snapshot.namespace else {},
        served_versions=_served(ctx, group, resource),
    )


def writes_of(ctx: Context, remedy: Remedy) -> list[Write]:
    """The requests a remedy sends, as admission sees them (the executor's reads are never admitted)."""
    action = remedy.action
    out = []
    for ref in remedy.targets:
        if action is Action.REMOVE_FINALIZER:
            out.append(_write(ctx, UPDATE, ref))  # a JSON patch of metadata.finalizers
        elif action is Action.REMOVE_NAMESPACE_FINALIZER:
            in_spec = remedy.finalizer in ((ctx.namespace_obj.get("spec") or {}).get("finalizers") or ())
            out.append(_write(ctx, UPDATE, ref, "finalize" if in_spec else ""))
        elif action is Action.FORCE_FINALIZE_NAMESPACE:
            out.append(_write(ctx, UPDATE, ref, "finalize"))  # PUT /api/v1/namespaces/NAME/finalize
        elif action in (Action.DELETE_APISERVICE, Action.FORCE_DELETE_POD, Action.DELETE_WEBHOOK_CONFIGURATION):
            out.append(_write(ctx, DELETE, ref))
    return out


def _repairs(dead: DeadWebhook) -> list[Remedy]:
    target = f"{dead.chain.name} in {dead.chain.namespace}"
    restore = remedies.restore(
        Action.RESTORE_BACKEND,
        f"Restore the backend {target} of webhook {dead.name}, which rejects the fixes below",
        [f"kubectl -n {dead.chain.namespace} get pods,endpointslices -o wide"],
    )
    delete = remedies.delete_webhook_configuration(
        dead.config_ref, consequence=f"every check {name_of(dead.config)} enforces stops until it is reinstalled"
    )
    return [delete, restore] if dead.uninstalled else [restore, delete]


def _guard_finding(
    ctx: Context, finding: Finding, dead: list[DeadWebhook], urls: list[tuple[KubeObject, Any]]
) -> Finding:
    guarded: list[Remedy] = []
    blockers: dict[str, DeadWebhook] = {}
    lines: list[str] = []
    for remedy in finding.remedies:
        if not remedy.action.changes_cluster:
            guarded.append(remedy)
            continue
        blocked: list[BlockedBy] = []
        for write in writes_of(ctx, remedy):
            for hook in dead:
                match = webhook_matches(hook.webhook, write)
                if match is None:
                    continue
                if hook.blocker not in blocked:
                    blocked.append(hook.blocker)
                blockers.setdefault(f"{hook.blocker}", hook)
                lines.append(
                    f"{hook.config.get('kind')} {name_of(hook.config)}, webhook {hook.name}: failurePolicy Fail, "
                    f"intercepts {write.shown}, so it would reject: {remedy.description}"
                    + "".join(f" ({note})" for note in match.notes)
                )
            for config, webhook in urls:
                if webhook_matches(webhook, write) is not None:
                    lines.append(
                        f"{config.get('kind')} {name_of(config)}, webhook {webhook.get('name')}: failurePolicy Fail, "
                        f"intercepts {write.shown} and calls "
                        f"{(webhook.get('clientConfig') or {}).get('url', 'a URL')}; nsstuck cannot check whether it "
                        "answers"
                    )
        guarded.append(replace(remedy, blocked_by=tuple(blocked)) if blocked else remedy)
    if not lines:
        return finding
    evidence = list(finding.evidence)
    for hook in blockers.values():
        lines.extend(hook.chain.evidence)
        if hook.uninstalled:
            lines.append(
                f"nothing runs behind {hook.chain.name} in {hook.chain.namespace}: "
                "the webhook's backend was uninstalled"
            )
    evidence.extend(line for line in dict.fromkeys(lines) if line not in evidence)
    objects = list(finding.objects)
    objects.extend(h.config_ref for h in blockers.values() if h.config_ref not in objects)
    # the webhook's repair first; a finding that already offers deleting that configuration has it in place
    offered = {r.id for r in guarded if r.action is Action.DELETE_WEBHOOK_CONFIGURATION}
    head: list[Remedy] = []
    for hook in blockers.values():
        repairs = _repairs(hook)
        if not any(r.id in offered for r in repairs if r.action is Action.DELETE_WEBHOOK_CONFIGURATION):
            head.extend(r for r in repairs if r not in head)
    return replace(finding, evidence=tuple(evidence), objects=tuple(objects), remedies=(*head, *guarded))


def guard(ctx: Context, found: Iterable[Finding]) -> list[Finding]:
    """Each finding with its writing remedies checked against every webhook configuration."""
    dead = dead_webhooks(ctx)
    urls = url_webhooks(ctx)
    if not dead and not urls:
        return list(found)
    return [_guard_finding(ctx, finding, dead, urls) for finding in found]
