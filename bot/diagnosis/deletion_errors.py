"""deletion_error: the namespace controller reports delete failures that no other rule explains."""

from __future__ import annotations

from bot.diagnosis import remedies
from bot.diagnosis.context import Context
from bot.domain.findings import Cause, Finding


def findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """`found` holds the other rules' findings; webhook messages are theirs, and so is the controller's
    "unexpected items still remain ... Resource=pods" once a finding names the pods (lost, failing
    or still being torn down by their kubelet: the message says only that they outlived its estimate)."""
    message = ctx.facts.content_failure
    if not message:
        return []
    explained = {f.cause for f in found}
    if Cause.WEBHOOK_BLOCKS_DELETE in explained and ("webhook" in message or "ValidatingAdmissionPolicy" in message):
        return []
    pods_explained = any(o.kind == "Pod" for f in found for o in f.objects)
    if pods_explained and "Resource=pods" in message and message.count("Resource=") == 1:
        return []
    return [
        Finding(
            cause=Cause.DELETION_ERROR,
            blocking=True,
            summary="the namespace controller fails to delete some content",
            evidence=(ctx.facts.line("NamespaceDeletionContentFailure") or message,),
            remedies=(
                remedies.investigate(
                    "Read the error above and the kube-controller-manager log for this namespace",
                    [f"kubectl get namespace {ctx.snapshot.namespace} -o yaml"],
                ),
            ),
        )
    ]
