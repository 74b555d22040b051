"""What `precheck` answers of an Active namespace's prediction, the same at every door: the command line's exit
code (contract §1) and the MCP tool's verdict with that code."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, NamespaceState, Prediction
from bot.domain.refs import IMMORTAL_NAMESPACES
from bot.errors import NsstuckError, UserError

CLEAR = 0  # nothing would hold the deletion
WOULD_BLOCK = 4  # deleting it now would get stuck
INCOMPLETE = 5  # the evidence is incomplete: it cannot be said that nothing would hold it


def verdict(prediction: Prediction) -> tuple[str, int]:
    """`would_block` (4) when a reason would hold it, else `incomplete` (5) when evidence is missing, else
    `clear` (0)."""
    if any(f.blocking for f in prediction.findings):
        return "would_block", WOULD_BLOCK
    if not prediction.complete:
        return "incomplete", INCOMPLETE
    return "clear", CLEAR


def refuse_immortal(namespace: str) -> None:
    """UserError for a namespace the API server never deletes: nothing to predict (checked before collecting)."""
    if namespace in IMMORTAL_NAMESPACES:
        raise UserError(f"the API server never deletes namespace {namespace} (NamespaceLifecycle admission)")


def predicted(diagnosis: Diagnosis, cluster: str, *, use_instead: str) -> Prediction:
    """The prediction of an Active namespace; a UserError for one that is gone or being deleted already
    (`use_instead`: what to use for that one, as the door names it)."""
    namespace = diagnosis.namespace
    if diagnosis.state is NamespaceState.NOT_FOUND:
        raise UserError(f"namespace {namespace} not found on {cluster}: nothing to delete")
    if diagnosis.state is NamespaceState.TERMINATING:
        raise UserError(f"namespace {namespace} on {cluster} is already being deleted: use {use_instead}")
    if diagnosis.prediction is None:  # an Active namespace is always collected for its prediction
        raise NsstuckError(f"no prediction was made for {namespace} on {cluster}")
    return diagnosis.prediction
