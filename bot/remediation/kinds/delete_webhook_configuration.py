"""Deleting a validating or mutating webhook configuration whose webhook refuses the deletes the
namespace needs, with the uid and resourceVersion checked as DeleteOptions preconditions."""

from __future__ import annotations

from bot.diagnosis.reading import backend
from bot.domain.access import Rule
from bot.domain.findings import Action
from bot.domain.refs import KubeObject, name_of
from bot.domain.snapshot import NamespaceSnapshot
from bot.remediation.kinds import _ops
from bot.remediation.kinds.base import Recheck, RemedyKind


def _services(config: KubeObject) -> list[tuple[str, str, str]]:
    """(webhook, service namespace, service name) for each webhook that calls a Service."""
    out = []
    for webhook in config.get("webhooks") or ():
        service = (webhook.get("clientConfig") or {}).get("service") or {}
        if service:
            out.append((str(webhook.get("name", "")), str(service.get("namespace", "")), str(service.get("name", ""))))
    return out


def _config_in(snapshot: NamespaceSnapshot, live: KubeObject) -> KubeObject:
    name, kind = name_of(live), live.get("kind")
    return next((c for c in snapshot.webhook_configurations if name_of(c) == name and c.get("kind") == kind), live)


def _cause_gone(check: Recheck) -> str | None:
    """The webhook's backend still down. The namespace controller's condition may still name the
    webhook after its backend came back (it is rewritten at the controller's next sync), so a backend
    that had no ready endpoint when the change was requested and has some now ends it too."""
    config = _config_in(check.now, check.live)
    services = _services(config)
    came_back = []
    for webhook, namespace, name in services:
        now = backend(check.now, namespace, name)
        if not now.healthy:
            continue
        then = backend(check.then, namespace, name) if check.then is not None else None
        if then is not None and not then.healthy:
            came_back.append(
                f"the backend of webhook {webhook} ({name} in {namespace}) has {now.ready_addresses} ready "
                "endpoint(s) again"
            )
    every_backend_answers = bool(services) and all(backend(check.now, ns, n).healthy for _, ns, n in services)
    where = f"the {check.live.get('kind')} {name_of(check.live)} was left alone"
    if came_back and every_backend_answers:
        return f"{'; '.join(came_back)}: {where}"
    if _ops.still_proposed(check):
        return None
    if every_backend_answers:
        ready = ", ".join(f"{n} in {ns}" for _, ns, n in services)
        return f"the backend of its webhooks ({ready}) has ready endpoints: {where}"
    return _ops.no_longer_proposed(check)


KIND = RemedyKind(
    action=Action.DELETE_WEBHOOK_CONFIGURATION,
    doing="Deleting a webhook configuration",
    rules=(
        Rule(
            ("admissionregistration.k8s.io",),
            ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
            ("get", "delete"),
        ),
    ),
    min_approvals=1,
    needs_finalizer=False,
    needs_complete_diagnosis=False,
    rests_on="a webhook of the configuration still fails closed on the namespace's deletes (its backend still down)",
    cause_gone=_cause_gone,
    needs_fresh_evidence=False,
    stale_reason=_ops.nothing_else_to_recheck,
    operation=_ops.plain_delete,
    took_effect=_ops.deleting_took_effect,
    target_verbs=("get", "delete"),
)
