"""deletion_error: the namespace controller reports delete failures that no other rule explains; an
admission plugin's refusal among them is named (`plugin_denials`)."""

from __future__ import annotations

import re

from bot.diagnosis import plugin_denials, remedies
from bot.diagnosis.context import Context
from bot.domain.controller_logs import redact
from bot.domain.findings import Cause, Finding

# the namespace controller's condition: `Failed to delete all resource types, N remaining: <aggregate>`
_COUNT = re.compile(r"^Failed to delete all resource types, (\d+) remaining: ")


def findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """`found` holds the other rules' findings; webhook messages are theirs, and so is the controller's
    "unexpected items still remain ... Resource=pods" once a finding names the pods (lost, failing
    or still being torn down by their kubelet: the message says only that they outlived its estimate).
    Each admission plugin's refusal is a finding of its own; the generic one is left out when those
    refusals are every error the message counts."""
    named = plugin_denials.findings(ctx)
    message = ctx.facts.content_failure
    if not message:
        return named
    explained = {f.cause for f in found}
    if Cause.WEBHOOK_BLOCKS_DELETE in explained and ("webhook" in message or "ValidatingAdmissionPolicy" in message):
        return named
    pods_explained = any(o.kind == "Pod" for f in found for o in f.objects)
    if pods_explained and "Resource=pods" in message and message.count("Resource=") == 1:
        return named
    count = _COUNT.match(message)
    quoted = [d for d in ctx.facts.denials if d.kind == "plugin" and d.quote[:60] in redact(message)]
    if named and count is not None and len(quoted) >= int(count.group(1)):
        return named
    return [
        *named,
        Finding(
            cause=Cause.DELETION_ERROR,
            blocking=True,
            summary="the namespace controller fails to delete some content",
            evidence=(ctx.facts.line("NamespaceDeletionContentFailure") or redact(message),),
            remedies=(
                remedies.investigate(
                    "Read the error above and the kube-controller-manager log for this namespace",
                    [f"kubectl get namespace {ctx.snapshot.namespace} -o yaml"],
                ),
            ),
        ),
    ]
