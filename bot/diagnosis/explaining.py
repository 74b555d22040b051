"""What a cause means and what its remedies risk: the `explain` tool of the agents' door (`nsstuck mcp`).
It lives beside the rules it describes (bot/diagnosis, which alone builds remedies per cause).

The words are nsstuck's own (the causes of contract §2 and the remedies `bot/diagnosis` builds for each);
nothing here comes from a cluster. A remedy's risk in a report is its own, decided by the evidence; the
range given here is what the rules may give it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.domain.findings import Action, Cause, Risk


@dataclass(frozen=True)
class RemedyKind:
    action: Action
    risks: tuple[Risk, ...]  # the risks the rules give this remedy for this cause, safest first
    what: str


@dataclass(frozen=True)
class Explanation:
    cause: Cause
    meaning: str
    lasting_fix: str
    remedies: tuple[RemedyKind, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause.value,
            "meaning": self.meaning,
            "lasting_fix": self.lasting_fix,
            "remedies": [
                {
                    "action": r.action.value,
                    "changes_cluster": r.action.changes_cluster,
                    "risks": [risk.value for risk in r.risks],
                    "requires_approval": r.action.changes_cluster,
                    "what": r.what,
                }
                for r in self.remedies
            ],
            "executed_by": "never by this tool: a remedy that changes the cluster is requested with its button "
            "in the namespace's Slack thread and approved there by someone other than the requester",
        }


_N, _L, _M, _H = Risk.NONE, Risk.LOW, Risk.MEDIUM, Risk.HIGH
_RESTORE_BACKEND = RemedyKind(Action.RESTORE_BACKEND, (_N,), "bring back the Service and pods behind it")
_RESTORE_CONTROLLER = RemedyKind(
    Action.RESTORE_CONTROLLER, (_N,), "reinstall or scale up the controller that owns the finalizer, so it finishes"
)
_INVESTIGATE = RemedyKind(Action.INVESTIGATE, (_N,), "look at what nsstuck cannot see (logs, network, the backend)")
_WAIT = RemedyKind(Action.WAIT, (_N,), "wait: the deletion is progressing")
_FORCE_FINALIZE = RemedyKind(
    Action.FORCE_FINALIZE_NAMESPACE,
    (_H,),
    "the last resort: empty the namespace's spec.finalizers; whatever is left in it is orphaned",
)

EXPLANATIONS: dict[Cause, Explanation] = {
    e.cause: e
    for e in (
        Explanation(
            Cause.APISERVICE_UNAVAILABLE,
            "An aggregated API (an APIService) cannot serve discovery, so the namespace controller cannot list "
            "every resource type and never finishes; this holds every namespace being deleted in the cluster.",
            "Run the API's backend reliably (metrics-server and the like), or remove the APIService with the "
            "component that installed it.",
            (
                _RESTORE_BACKEND,
                RemedyKind(
                    Action.DELETE_APISERVICE,
                    (_L, _M, _H),
                    "delete the APIService (its API disappears until its owner re-creates it)",
                ),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.AGGREGATED_DISCOVERY_DEFECT,
            "The aggregator marks a group version Stale although its backend serves "
            "(kubernetes/kubernetes#119662, an affected release).",
            "Upgrade the control plane to a release with the fix.",
            (_INVESTIGATE, RemedyKind(Action.DELETE_APISERVICE, (_H,), "delete the APIService"), _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.ORPHANED_FINALIZER,
            "Objects in the namespace keep finalizers that no running controller will remove.",
            "Delete a namespace's content (or the custom resources) before uninstalling their controller.",
            (
                _RESTORE_CONTROLLER,
                RemedyKind(
                    Action.REMOVE_FINALIZER,
                    (_L, _M, _H),
                    "remove the finalizer from each object (what the controller would have cleaned up is left behind)",
                ),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.FINALIZER_DEADLOCK,
            "A live controller cannot remove its finalizer: its cleanup must create objects in the terminating "
            "namespace, which the API server forbids.",
            "Fix the controller (or its release) so that its cleanup creates nothing in a terminating namespace.",
            (_INVESTIGATE, RemedyKind(Action.REMOVE_FINALIZER, (_M, _H), "remove the finalizer"), _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.CLEANUP_FAILING,
            "A live controller keeps its finalizer because its cleanup keeps failing (its status, conditions or "
            "log lines say why), with no progress for longer than the bound.",
            "Fix what the cleanup needs (a credential, an external API) so that the controller finishes.",
            (_INVESTIGATE, RemedyKind(Action.REMOVE_FINALIZER, (_M, _H), "remove the finalizer"), _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.NAMESPACE_FINALIZER,
            "The Namespace itself keeps a finalizer (metadata.finalizers, or a non-kubernetes entry of "
            "spec.finalizers) that nothing will remove.",
            "Uninstall or fix the component that adds the finalizer.",
            (
                _WAIT,
                RemedyKind(Action.REMOVE_NAMESPACE_FINALIZER, (_L, _M), "remove that finalizer from the Namespace"),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.WEBHOOK_BLOCKS_DELETE,
            "An admission or conversion webhook (or an admission policy) makes deletes or lists in the namespace "
            "fail: its backend is down and it fails closed, or it is alive and denies.",
            "Run the webhook's backend reliably, scope the webhook away from deletions, or give it "
            "failurePolicy: Ignore where that is safe.",
            (
                _RESTORE_BACKEND,
                _INVESTIGATE,
                RemedyKind(
                    Action.DELETE_WEBHOOK_CONFIGURATION, (_H,), "delete the webhook configuration (its checks stop)"
                ),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.POD_ON_LOST_NODE,
            "Pods with a deletionTimestamp sit on nodes that are NotReady, unreachable or gone, so no kubelet "
            "confirms their deletion.",
            "Remove Node objects of machines that are gone (or run a node lifecycle controller that does).",
            (
                _INVESTIGATE,
                RemedyKind(
                    Action.FORCE_DELETE_POD,
                    (_L, _M, _H),
                    "force-delete the pods (a pod still running on a partitioned node would run on unseen)",
                ),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.POD_NOT_TERMINATING,
            "Pods past their grace period on Ready nodes that the kubelet cannot finish (a volume whose backend "
            "is gone, a runtime error), with no progress for longer than the bound.",
            "Fix the storage backend or the node's runtime.",
            (
                _INVESTIGATE,
                RemedyKind(Action.FORCE_DELETE_POD, (_M, _H), "force-delete the pods"),
                _FORCE_FINALIZE,
            ),
        ),
        Explanation(
            Cause.PVC_IN_USE,
            "A PersistentVolumeClaim keeps kubernetes.io/pvc-protection because a pod still uses it.",
            "Delete the pods that use the claim first (they are usually what holds it).",
            (_WAIT, RemedyKind(Action.REMOVE_FINALIZER, (_L, _H), "remove the protection finalizer"), _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.DISCOVERY_FAILURE,
            "Discovery fails for a reason other than an unavailable APIService (stale or unparsable group versions).",
            "Fix or remove what serves the broken group version.",
            (_INVESTIGATE, _WAIT, _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.DELETION_ERROR,
            "The namespace controller reports delete failures not explained by the other causes.",
            "Read the namespace's conditions and the API server's log for the failing deletes.",
            (_INVESTIGATE, _FORCE_FINALIZE),
        ),
        Explanation(
            Cause.CONTENT_DELETING,
            "Content is still being deleted normally (grace periods, live controllers at work): not stuck yet.",
            "Nothing to fix.",
            (_WAIT,),
        ),
        Explanation(
            Cause.GITOPS_OWNER,
            "An Argo CD Application or a Flux Kustomization/HelmRelease manages the namespace or its content and "
            "would re-create it on its next sync: a warning, not a block.",
            "Delete (or suspend) the GitOps object that manages it first.",
            (_INVESTIGATE,),
        ),
        Explanation(
            Cause.UNKNOWN,
            "Terminating, and not explained by any known cause.",
            "Read the namespace's conditions and its remaining content.",
            (_INVESTIGATE, _FORCE_FINALIZE),
        ),
    )
}


def explain(cause: str) -> Explanation:
    """The explanation of `cause` (one of contract §2's vocabulary); ValueError names the known ones."""
    try:
        return EXPLANATIONS[Cause(cause)]
    except ValueError:
        known = ", ".join(c.value for c in Cause)
        raise ValueError(f"unknown cause {cause[:60]!r}; the causes are: {known}") from None
