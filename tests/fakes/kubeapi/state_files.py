"""Saved emulator states shared between the processes of one test run, as files in one folder.

``scenarios.apply_scenario_once`` builds a scenario at most once per process; with a folder set
(``share_states_in``, which the pytest plugin does for the run's shared temporary directory), at most
once per run: the first process to need a scenario's state builds it while holding that state's lock
file (``fcntl.flock``), and writes it (pickled, about 0.2 MB) under a temporary name renamed into place,
so a reader sees the whole file or none; the others wait on the lock, then read it. A file that is
missing or cannot be read back as a state is no state: the caller builds, as without a folder.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path

from .state import EmulatorState

Key = tuple[str, str]  # (scenario name, digest of the starting state)

_where: list[Path] = []  # the folder, when one is set


def share_states_in(folder: Path | None) -> None:
    """Keep states in ``folder`` (made if missing) from now on; ``None``: in this process only."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    _where[:] = [] if folder is None else [folder]


def shared_folder() -> Path | None:
    return _where[0] if _where else None


def _path(key: Key, suffix: str) -> Path | None:
    folder = shared_folder()
    if folder is None:
        return None
    name, digest = key
    return folder / f"{name}-{digest}{suffix}"


def load(key: Key) -> EmulatorState | None:
    """The state saved for ``key``, or None (no folder, no file, or a file that is not a whole state)."""
    path = _path(key, ".state")
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            state = pickle.load(f)
    except Exception:  # missing, cut short or not ours: build instead
        return None
    return state if isinstance(state, EmulatorState) else None


def save(key: Key, state: EmulatorState, *, replace: bool = False) -> None:
    """Save ``state`` for ``key`` unless a file is there already (every build of a key leaves the same
    state), or over it with ``replace`` (one that did not ``load``). Written whole under a temporary name,
    then renamed; a failure to write leaves nothing."""
    path = _path(key, ".state")
    if path is None or (path.exists() and not replace):
        return
    partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        with partial.open("wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        with suppress(OSError):
            partial.unlink()


def building(key: Key) -> AbstractContextManager[None]:
    """Held while this process looks for ``key``'s state and, without one, builds and saves it: another
    process that wants the same state waits for it instead of building it too."""
    path = _path(key, ".lock")
    return nullcontext() if path is None else _locked(path)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no lock to be had: build alone, as without a folder
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


__all__ = ["building", "load", "save", "share_states_in", "shared_folder"]
