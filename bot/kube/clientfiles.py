"""Where the kubernetes client writes the files of a kubeconfig's inline credentials.

The client writes `certificate-authority-data`, `client-certificate-data` and `client-key-data` to
files (its SSL layer reads them from files) and deletes them only in an `atexit` handler, which a
process that ends through `os._exit` (a multiprocessing child: every diagnosis worker) or is killed
never runs: each such process would leave a client key behind. So every process of nsstuck that
connects gives the client a directory of its own for them:
- a command of the CLI (and `nsstuck serve` itself) runs in `private()`: a new directory (0700), made
  the first time the client needs it and removed with its files when the command ends;
- a diagnosis worker is given one by the bot (`use`), which empties it on a clean exit and which the bot
  removes whenever it stops or replaces that worker, a SIGKILLed one too (bot.services.supervising).

Standard library only, and that imported when used: the CLI imports this module before it knows whether
the command connects anywhere.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# held while the client writes one of its files, and while a directory of them is removed
WRITING = threading.Lock()


class _Where:
    """Where the client writes them now (`directory` None: the system's temporary directory); inside
    `private()`, a directory is made the first time one is needed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.directory: Path | None = None
        self.private = False


_WHERE = _Where()


def use(directory: Path | None) -> None:
    """The client writes the files of inline credentials in `directory` from the next connection on
    (None: in the system's temporary directory, the client's default)."""
    _swap(directory, False)


def directory() -> str | None:
    """The directory to hand the client (`temp_file_path`), made now inside `private()` if there is none
    yet; None for the client's default, or where none can be made."""
    with _WHERE.lock:
        if _WHERE.directory is None and _WHERE.private:
            import tempfile

            try:
                _WHERE.directory = Path(tempfile.mkdtemp(prefix="nsstuck-client-"))
            except OSError:  # no writable temporary directory: the client says what it cannot write
                return None
        return str(_WHERE.directory) if _WHERE.directory is not None else None


def remove(directory: Path) -> None:
    """Delete the directory and what the client wrote in it (once the process is done with its
    clusters: a connection still open may need its files to open another socket)."""
    import shutil

    with WRITING:
        shutil.rmtree(directory, ignore_errors=True)


def _swap(directory: Path | None, private: bool) -> tuple[Path | None, bool]:
    with _WHERE.lock:
        previous = _WHERE.directory, _WHERE.private
        _WHERE.directory, _WHERE.private = directory, private
    return previous


@contextmanager
def private() -> Iterator[None]:
    """For the `with` block, the client's files go in a directory of this process's own, removed at its
    end (the directory is made only if the block connects somewhere)."""
    previous = _swap(None, True)
    try:
        yield
    finally:
        made, _ = _swap(*previous)
        if made is not None:
            remove(made)
