"""Running the `nsstuck` command line from the tests: in this process, or as a child process.

Most tests are about what a command says and does, not about the process: they run `bot.cli.main` in
this process (`run_nsstuck`), which costs a few milliseconds where a child process costs a second of
CPU to start the interpreter and import the client libraries. Everything the child would have had is
given to it: the environment (without the caller's NSSTUCK_ and SLACK_ variables), the working
directory, standard output and error (argparse's own messages included), the exit status (argparse's
SystemExit, and 1 with a traceback for an exception nothing caught, as the interpreter does), and the
logging set-up a fresh process gets. What the command changes in the process is put back afterwards:
the environment, the working directory, the root logger, the hooks for uncaught exceptions, the
garbage collector (frozen or disabled by `serve`, `digest run` and `diagnose`) and the signal handlers.

The tests about the process itself (exit codes and stderr as a shell sees them, the console script,
`serve`) ask for a child with `process=True`; `serve` always runs in one.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

from tests._python import PYTHON, assert_no_resource_warning

REPO = Path(__file__).resolve().parents[1]


def run_nsstuck(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `nsstuck ARGS` with the environment `env` (on top of this one's, less NSSTUCK_ and SLACK_
    variables) in `cwd` (the repository): in this process, or in a child one with `process`."""
    if process or "serve" in args:
        return run_nsstuck_process(*args, env=env, cwd=cwd)
    done = run_in_this_process(*args, env=env, cwd=cwd)
    assert_no_resource_warning(done.stderr, "nsstuck " + " ".join(args))
    return done


def run_in_this_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`run_nsstuck` without its assertion on stderr: what the command gave, for a caller that checks it
    itself (tests/hostile/_batch.py, which runs many commands in one process)."""
    with _as_a_fresh_process(env, cwd or REPO):
        out, err = io.StringIO(), io.StringIO()
        code = _main(list(args), out, err)
    return subprocess.CompletedProcess(["nsstuck", *args], code, out.getvalue(), err.getvalue())


def run_nsstuck_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a child process, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_"))}
    full_env.update(env or {})
    done = subprocess.run(
        [*PYTHON, "-m", "bot", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or REPO,
        timeout=60,
        check=False,
    )
    assert_no_resource_warning(done.stderr, "nsstuck " + " ".join(args))
    return done


def _main(argv: list[str], out: io.StringIO, err: io.StringIO) -> int:
    from bot.cli import main

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(argv, out=out, err=err)
        except SystemExit as e:  # argparse: usage errors (2), --help and --version (0)
            if e.code is None or isinstance(e.code, int):
                return e.code or 0
            print(e.code, file=err)
            return 1
        except Exception:  # what the interpreter does with an exception nothing caught
            traceback.print_exc(file=err)
            return 1


@contextlib.contextmanager
def _as_a_fresh_process(env: dict[str, str] | None, cwd: Path) -> Iterator[None]:
    saved_environ = dict(os.environ)
    saved_cwd = os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    scheduler_logger = logging.getLogger("apscheduler.executors")
    saved_scheduler_level = scheduler_logger.level
    saved_hooks = (threading.excepthook, sys.excepthook, sys.unraisablehook)
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    gc_enabled = gc.isenabled()
    for name in [k for k in os.environ if k.startswith(("NSSTUCK_", "SLACK_"))]:
        del os.environ[name]
    os.environ.update(env or {})
    os.chdir(cwd)
    for handler in saved_handlers:  # a fresh process's root logger has none (pytest's capture has some)
        root.removeHandler(handler)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            if handler not in saved_handlers:
                handler.close()
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        scheduler_logger.setLevel(saved_scheduler_level)
        logging.captureWarnings(False)
        threading.excepthook, sys.excepthook, sys.unraisablehook = saved_hooks
        for number, handler in saved_signals.items():
            if handler is not None:
                signal.signal(number, handler)
        gc.unfreeze()
        if gc_enabled:
            gc.enable()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
