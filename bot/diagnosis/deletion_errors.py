"""deletion_error: the namespace controller reports delete failures that no other rule explains."""

from __future__ import annotations

from bot.diagnosis import remedies
from bot.diagnosis.context import Context
from bot.domain.findings import Cause, Finding


def findings(ctx: Context, explained: set[str]) -> list[Finding]:
    """`explained` holds the causes already found; webhook and lost-pod messages are theirs."""
    message = ctx.facts.content_failure
    if not message:
        return []
    if Cause.WEBHOOK_BLOCKS_DELETE in explained and ("webhook" in message):
        return []
    pods_explained = Cause.POD_ON_LOST_NODE in explained or Cause.DELETION_ERROR in explained
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
