"""Admission: the NamespaceLifecycle plugin and admission webhooks.

Most webhook backends are simulated: a webhook is reachable when its Service exists, has a ready
endpoint (EndpointSlice or Endpoints) and is not listed in ``knobs.unreachable_services``; its answer
is ``knobs.webhook_verdict[name]`` ("allow" by default, or "deny:<message>"). For the first DELETE of
a namespace, a validating webhook the emulator can reach (a loopback ``url``, or a Service routed
with ``emu.route_service``) is called for real instead (``webhookcalls.py``), after its
``matchConditions`` (``celsubset.py``). The errors are worded as
``k8s.io/apiserver/pkg/admission/plugin/webhook`` words them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import webhookcalls
from .celsubset import CelError, evaluate
from .errors import ApiError, bad_request, forbidden, internal, not_found_resource
from .registry import ResourceType
from .selectors import labels_match, selector_from_label_selector

if TYPE_CHECKING:
    from .apiserver import Cluster

IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
WEBHOOK_CONFIG_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
ENDPOINTSLICES = ("discovery.k8s.io", "endpointslices")
ENDPOINTS = ("", "endpoints")
SERVICES = ("", "services")
NAMESPACES = ("", "namespaces")


def namespace_lifecycle_create(cluster: Cluster, rt: ResourceType, namespace: str, name: str) -> None:
    """Creating namespaced content: 404 when the namespace is missing, 403 when it is terminating."""
    if not rt.namespaced:
        return
    entry = cluster.store.get(NAMESPACES, "", namespace)
    if entry is None:
        raise not_found_resource("namespaces", "", namespace)
    ns = entry.obj
    if (ns.get("status") or {}).get("phase") == "Terminating" or ns["metadata"].get("deletionTimestamp"):
        raise forbidden(
            rt.plural,
            rt.group,
            name,
            f"unable to create new content in namespace {namespace} because it is being terminated",
            causes=[
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        )


def namespace_lifecycle_delete(rt: ResourceType, name: str) -> None:
    if rt.group == "" and rt.plural == "namespaces" and name in IMMORTAL_NAMESPACES:
        raise forbidden("namespaces", "", name, "this namespace may not be deleted")


def compiled_in_plugins(cluster: Cluster, op: str, rt: ResourceType, namespace: str, name: str) -> None:
    """A compiled-in admission plugin's refusal (``knobs.deny_admission``), as ``admission.NewForbidden``
    words it: the request's name, else ``Unknown`` (the items of a delete-collection carry neither a name
    nor an object)."""
    reason = cluster.knobs.plugin_denial_for(rt.plural, rt.group, op, namespace)
    if reason is not None:
        raise forbidden(rt.plural, rt.group, name or "Unknown", reason)


def _rule_matches(rule: dict[str, Any], op: str, rt: ResourceType, sub: str | None, version: str | None = None) -> bool:
    """predicates/rules/rules.go: operations, groups, versions (``version``: the request's in another
    version, for matchPolicy Equivalent), scope, and resources as ``res/sub`` where ``*`` is every
    resource without a subresource and ``sub`` ``*`` is every subresource and the resource itself."""
    ops = rule.get("operations") or []
    if "*" not in ops and op not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and (version or rt.version) not in versions:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and not rt.namespaced:
        return False
    if scope == "Cluster" and rt.namespaced:
        return False
    for res in rule.get("resources") or []:
        res_name, _, res_sub = str(res).partition("/")
        if res_name in ("*", rt.plural) and res_sub in ("*", sub or ""):
            return True
    return False


def _hook_matches(cluster: Cluster, hook: dict[str, Any], op: str, rt: ResourceType, sub: str | None) -> bool:
    """generic/webhook.go ShouldCallHook: the rules against the request, then (matchPolicy Equivalent,
    the default) against the same resource in each other version it is served in."""
    rules = hook.get("rules") or []
    if any(_rule_matches(r, op, rt, sub) for r in rules):
        return True
    if (hook.get("matchPolicy") or "Equivalent") != "Equivalent":
        return False
    for version in cluster.served_versions(rt.group):
        served = version != rt.version and cluster.lookup(rt.group, version, rt.plural) is not None
        if served and any(_rule_matches(r, op, rt, sub, version) for r in rules):
            return True
    return False


def _service_problem(cluster: Cluster, namespace: str, name: str) -> str | None:
    """Why the API server cannot reach ``namespace/name`` (None when it can)."""
    svc = cluster.store.get(SERVICES, namespace, name)
    if svc is None:
        return f'service "{name}" not found'
    if f"{namespace}/{name}" in cluster.knobs.unreachable_services:
        ip = ((svc.obj.get("spec") or {}).get("clusterIP")) or "10.96.0.1"
        return f"dial tcp {ip}:443: connect: connection refused"
    if not _has_ready_endpoints(cluster, namespace, name):
        return f'no endpoints available for service "{name}"'
    return None


def _has_ready_endpoints(cluster: Cluster, namespace: str, name: str) -> bool:
    for entry in cluster.store.items(ENDPOINTSLICES, namespace):
        if ((entry.obj.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/service-name") != name:
            continue
        for ep in entry.obj.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is not False and ep.get("addresses"):
                return True
    ep = cluster.store.get(ENDPOINTS, namespace, name)
    if ep is not None:
        for subset in ep.obj.get("subsets") or []:
            if subset.get("addresses"):
                return True
    return False


def webhook_url(hook: dict[str, Any]) -> str:
    cfg = hook.get("clientConfig") or {}
    if cfg.get("url"):
        return str(cfg["url"])
    svc = cfg.get("service") or {}
    path = svc.get("path") or ""
    port = svc.get("port") or 443
    return f"https://{svc.get('name', '')}.{svc.get('namespace', '')}.svc:{port}{path}"


def run_webhooks(
    cluster: Cluster,
    phase: str,
    op: str,
    rt: ResourceType,
    *,
    sub: str | None,
    namespace: str,
    obj: dict[str, Any] | None,
    dry_run: bool,
    old: dict[str, Any] | None = None,
    review: webhookcalls.Review | None = None,
) -> None:
    """Call the matching webhooks of ``phase`` ("mutating" | "validating") for one request. With
    ``review`` (a namespace DELETE), ``matchConditions`` apply and the validating webhooks the emulator
    can reach are added to ``review.remote``, to be called outside the store lock."""
    if rt.kind in WEBHOOK_CONFIG_KINDS and rt.group == "admissionregistration.k8s.io":
        return
    config_plural = "mutatingwebhookconfigurations" if phase == "mutating" else "validatingwebhookconfigurations"
    configs = cluster.store.items(("admissionregistration.k8s.io", config_plural))
    if not configs:
        return
    obj_labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    # predicates/object: the selector matches the new object or the old one
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    if rt.namespaced:
        ns_entry = cluster.store.get(NAMESPACES, "", namespace)
        ns_labels = ((ns_entry.obj.get("metadata") or {}).get("labels") or {}) if ns_entry else {}
    elif rt.group == "" and rt.plural == "namespaces":
        ns_labels = obj_labels
    else:
        ns_labels = {}
    for cfg in configs:
        for hook in cfg.obj.get("webhooks") or []:
            if not _hook_matches(cluster, hook, op, rt, sub):
                continue
            ns_sel = hook.get("namespaceSelector")
            if (
                ns_sel
                and (rt.namespaced or rt.plural == "namespaces")
                and not labels_match(selector_from_label_selector(ns_sel), ns_labels)
            ):
                continue
            obj_sel = hook.get("objectSelector")
            if obj_sel and not any(
                labels_match(selector_from_label_selector(obj_sel), labels) for labels in (obj_labels, old_labels)
            ):
                continue
            if review is not None and not _conditions_match(hook, review):
                continue
            where = webhookcalls.endpoint(cluster, hook) if review is not None and phase == "validating" else None
            _call(cluster, hook, dry_run=dry_run, remote=None if where is None or review is None else (review, where))


def _conditions_match(hook: dict[str, Any], review: webhookcalls.Review) -> bool:
    """matchconditions/matcher.go: a condition that is false skips the webhook; otherwise an error
    (an expression outside the supported subset is one) refuses the request with failurePolicy Fail
    (403, generic/webhook.go ShouldCallHook) and skips the webhook with Ignore."""
    conditions = hook.get("matchConditions") or []
    if not conditions:
        return True
    env = {"request": review.request(""), "object": None, "oldObject": review.old_object}
    errors: list[str] = []
    for condition in conditions:
        expression = str(condition.get("expression") or "")
        try:
            value = evaluate(expression, env)
        except CelError as exc:
            errors.append(f"expression '{expression}' resulted in error: {exc}")
            continue
        if value is False:
            return False
        if value is not True:
            errors.append(f"expression '{expression}' resulted in error: no such overload")
    if not errors:
        return True
    if (hook.get("failurePolicy") or "Fail") == "Ignore":
        return False
    message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    raise forbidden("namespaces", "", review.name, message)


def _call(
    cluster: Cluster,
    hook: dict[str, Any],
    *,
    dry_run: bool,
    remote: tuple[webhookcalls.Review, webhookcalls.Endpoint] | None = None,
) -> None:
    name = hook.get("name", "")
    if remote is None and dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
        raise bad_request(f'admission webhook "{name}" does not support dry run')
    cfg = hook.get("clientConfig") or {}
    svc = cfg.get("service")
    problem: str | None = None
    if svc:
        problem = _service_problem(cluster, svc.get("namespace", ""), svc.get("name", ""))
    elif cfg.get("url") and str(cfg["url"]) in cluster.knobs.unreachable_services:
        problem = "context deadline exceeded"
    if problem is not None:
        if (hook.get("failurePolicy") or "Fail") == "Ignore":
            return
        timeout = hook.get("timeoutSeconds") or 10
        url = webhook_url(hook)
        raise internal(
            f'failed calling webhook "{name}": failed to call webhook: Post "{url}?timeout={timeout}s": {problem}'
        )
    if remote is not None:
        review, where = remote
        review.remote.append((hook, where))
        return
    verdict = cluster.knobs.webhook_verdict.get(name, "allow")
    if verdict.startswith("deny"):
        message = verdict.partition(":")[2]
        text = f'admission webhook "{name}" denied the request'
        text = f"{text}: {message}" if message else f"{text} without explanation"
        raise ApiError(400, "", text)
