"""An emulator's state as a value: ``capture`` copies it, ``restore`` puts it into another emulator.

What a scenario's build changes is all here: the store (every object as stored, the resourceVersion
counter, the watch events, the random source of uids and generated names), the types the CRDs
registered, the aggregated backends, the options, the identities, the knobs, the pods' logs, the
FakeClock's time, the next ``Audit-Id``, the journal, and the controllers' own memory (what each
remembers between passes, whether it runs, how it is configured). A restored emulator answers every
request as the captured one did when it was captured: the same objects with the same
resourceVersions, the same discovery, the same watch events, and its controllers carry on from where
the captured one's stood (``tests/emulator/test_scenario_states.py`` holds it to that, scenario by
scenario, over HTTP and through kubectl).

Stored objects are immutable (``store.Entry``), so a capture shares them and copies only the maps
that hold them: a capture and a restore cost a few milliseconds where a scenario's build costs a few
hundred. What a capture cannot copy it refuses (``StateError``): a RealClock (time moves on its own),
controllers other than the default set, a routed Service (a live server of the test's).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .clock import FakeClock
from .controllers import DefaultControllers, controllers_of, replace_controllers
from .controllers._gate import Gated
from .journal import Journaled
from .knobs import Knobs
from .store import Entry, Event

_KNOB_FIELDS = tuple(f.name for f in dataclasses.fields(Knobs) if f.name != "_lock")


class StateError(ValueError):
    """The emulator's state cannot be captured, or not restored into that emulator."""


@dataclass(frozen=True)
class EmulatorState:
    """A copy of everything an emulator serves from (see the module docstring). Never mutated: each
    restore copies what it hands over, so one state restores any number of emulators."""

    seed: int
    now: datetime
    install_controllers: bool
    # the store
    rv: int
    first_rv: int
    data: dict[tuple[str, str], dict[tuple[str, str], Entry]]
    events: tuple[Event, ...]
    rng: Any
    # the API server around it
    types: dict[tuple[str, str, str], Any]
    backends: dict[tuple[str, str], Any]
    options: dict[str, Any]
    discovery_error_style: str
    tokens: dict[str, str]
    basic_auth: dict[str, str]
    eks_auth: Any
    admin_users: frozenset[str]
    rbac: bool
    next_ip: int
    knobs: dict[str, Any]
    pod_logs: dict[tuple[str, str, str], tuple[Any, ...]]
    next_audit: int
    journal: tuple[Journaled, ...]
    next_seq: int
    # the controllers: the default set (None: none installed) and each registered gate's last key
    controllers: DefaultControllers | None
    gates: tuple[Any, ...]


def _peek(counter_holder: Any, attr: str) -> int:
    """The next value of an ``itertools.count`` held at ``counter_holder.attr``, leaving it unconsumed."""
    n = next(getattr(counter_holder, attr))
    setattr(counter_holder, attr, itertools.count(n))
    return n


def capture(emu: Any) -> EmulatorState:
    """A copy of ``emu``'s state (a started or stopped Emulator on a FakeClock)."""
    if not isinstance(emu.clock, FakeClock):
        raise StateError("only an emulator on a FakeClock can be captured (a RealClock moves on its own)")
    if emu.cluster.service_routes:
        raise StateError("an emulator with routed Services (emu.route_service) cannot be captured")
    installed = controllers_of(emu)
    gates = _gates(emu, installed)
    cluster, store, journal = emu.cluster, emu.cluster.store, emu.journal
    with emu._settle_lock, store.lock:
        with emu._audit_lock:
            next_audit = _peek(emu, "_audit")
        with journal._lock:
            entries = tuple(dataclasses.replace(e) for e in journal._entries)
            next_seq = _peek(journal, "_seq")
        with emu.knobs._lock:
            knobs = {name: copy.deepcopy(getattr(emu.knobs, name)) for name in _KNOB_FIELDS}
        with emu.pod_logs._lock:
            pod_logs = {key: tuple(lines) for key, lines in emu.pod_logs._lines.items()}
        return EmulatorState(
            seed=emu.seed,
            now=emu.clock.now(),
            install_controllers=emu.install_controllers,
            rv=store.rv,
            first_rv=store.first_rv,
            data={key: dict(bucket) for key, bucket in store.data.items()},
            events=tuple(store.events),
            rng=store.rng.getstate(),
            types=dict(cluster.types),
            backends=copy.deepcopy(cluster.backends),
            options=copy.deepcopy(emu.options),
            discovery_error_style=emu.discovery_error_style,
            tokens=dict(emu.tokens),
            basic_auth=dict(emu.basic_auth),
            eks_auth=copy.deepcopy(emu.eks_auth),
            admin_users=frozenset(cluster.admin_users),
            rbac=cluster.rbac,
            next_ip=cluster._next_ip,
            knobs=knobs,
            pod_logs=pod_logs,
            next_audit=next_audit,
            journal=entries,
            next_seq=next_seq,
            controllers=copy.deepcopy(installed),
            gates=tuple(g._last for g in gates),
        )


def _gates(emu: Any, installed: DefaultControllers | None) -> list[Gated]:
    """The registered controllers, which must be exactly the default set as installed (or none)."""
    registered = list(emu.controllers)
    if installed is None:
        if registered:
            raise StateError("an emulator with controllers of its own cannot be captured")
        return []
    inners = [getattr(c, "inner", c) for c in registered]
    expected = [getattr(c, "inner", c) for c in installed.gated()]
    if len(inners) != len(expected) or any(a is not b for a, b in zip(inners, expected, strict=True)):
        raise StateError("an emulator with controllers other than the default set cannot be captured")
    return [c for c in registered if isinstance(c, Gated)]


def restore(emu: Any, state: EmulatorState) -> None:
    """Make ``emu`` (same seed, on a FakeClock, its controllers installed as the captured one's were)
    serve ``state``: whatever it held before is replaced. Its background controller loop, if running,
    waits meanwhile."""
    if emu.seed != state.seed:
        raise StateError(f"a state captured with seed {state.seed} cannot be restored into seed {emu.seed}")
    if not isinstance(emu.clock, FakeClock):
        raise StateError("a state can only be restored into an emulator on a FakeClock")
    if (controllers_of(emu) is not None) != (state.controllers is not None):
        raise StateError("the emulator's controllers are not installed as the captured one's were")
    cluster, store, journal = emu.cluster, emu.cluster.store, emu.journal
    with emu._settle_lock, store.lock:
        emu.clock.set(state.now)
        store.rv = state.rv
        store.first_rv = state.first_rv
        store.data = {key: dict(bucket) for key, bucket in state.data.items()}
        store.events = list(state.events)
        store.event_rvs = [e.rv for e in state.events]
        store.rng.setstate(state.rng)
        cluster.types = dict(state.types)
        cluster.backends = copy.deepcopy(state.backends)
        emu.options.clear()  # the same dict as cluster.options
        emu.options.update(copy.deepcopy(state.options))
        emu.discovery_error_style = state.discovery_error_style
        emu.tokens.clear()  # the same dict as cluster.tokens
        emu.tokens.update(state.tokens)
        emu.basic_auth = dict(state.basic_auth)
        emu.eks_auth = copy.deepcopy(state.eks_auth)
        cluster.admin_users = set(state.admin_users)
        cluster.rbac = state.rbac
        cluster._next_ip = state.next_ip
        with emu.knobs._lock:
            for name, value in state.knobs.items():
                setattr(emu.knobs, name, copy.deepcopy(value))
        with emu.pod_logs._lock:
            emu.pod_logs._lines = {key: list(lines) for key, lines in state.pod_logs.items()}
        with emu._audit_lock:
            emu._audit = itertools.count(state.next_audit)
        with journal._lock:
            journal._entries.clear()
            journal._entries.extend(dataclasses.replace(e) for e in state.journal)
            journal._seq = itertools.count(state.next_seq)
        if state.controllers is not None:
            controllers = copy.deepcopy(state.controllers)
            replace_controllers(emu, controllers)
            gates = [c for c in emu.controllers if isinstance(c, Gated)]
            for gate, last in zip(gates, state.gates, strict=True):
                gate._last = last
        store.cond.notify_all()


__all__ = ["EmulatorState", "StateError", "capture", "restore"]
