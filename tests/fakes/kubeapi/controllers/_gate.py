"""Skip a controller pass when nothing it reads can have changed since the last one.

Real controllers are woken by watch events; these poll. Every write to the emulated store bumps one
global resourceVersion, which a list response reports in ``metadata.resourceVersion``. A controller
whose decisions depend only on stored objects (and, for some, on the clock or on knobs) can skip a
pass when that revision (and those other inputs) are the same as at its previous successful pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ._http import ApiError, KubeHTTP, client_for


class _Reconciler(Protocol):
    name: str

    def reconcile(self, emu: Any) -> bool: ...


def global_revision(client: KubeHTTP) -> str | None:
    try:
        doc = client.get("/api/v1/namespaces", limit="1")
    except ApiError:
        return None
    rv = (doc.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


def store_revision(emu: Any) -> str | None:
    """The store's revision read in-process when the emulator exposes it (saves one request a pass).

    Only an optimisation: the value is the same ``metadata.resourceVersion`` a list returns.
    """
    rv = getattr(getattr(getattr(emu, "cluster", None), "store", None), "rv", None)
    return str(rv) if isinstance(rv, int) else None


class Gated:
    """Runs ``inner`` only when the store revision or ``extra(emu)`` changed since its last pass."""

    def __init__(self, inner: _Reconciler, extra: Callable[[Any], Any] | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self._extra = extra
        self._last: tuple[str, Any] | None = None

    def reconcile(self, emu: Any) -> bool:
        if not getattr(self.inner, "enabled", True):
            return False
        rv = store_revision(emu)
        if rv is None:
            rv = global_revision(client_for(emu))
        key = None if rv is None else (rv, self._extra(emu) if self._extra else None)
        if key is not None and key == self._last:
            return False
        changed = self.inner.reconcile(emu)
        self._last = key
        return changed

    def __repr__(self) -> str:
        return f"Gated({self.inner!r})"
