"""Logs an operator can use: one line per record, as text or as one JSON object (NSSTUCK_LOG_FORMAT),
at NSSTUCK_LOG_LEVEL, each carrying the context of the work it belongs to.

The doors and the use cases say what they are working on with `log_context(cluster=..., namespace=...,
run_id=..., request_id=..., slack_user=...)`; every line logged inside it, by nsstuck or by a library
(slack_bolt, apscheduler, urllib3, sqlalchemy, kubernetes), carries those fields. Work handed to
another thread keeps them when it is handed over with `carrying(fn)`.

The context holds names and ids only (never a token, a URL or a value read from a cluster), and the
JSON line holds the record's message as the text line does: nothing is logged in JSON that the text
format would not show.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any, ParamSpec, TypeVar

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FIELDS = ("cluster", "namespace", "run_id", "request_id", "slack_user", "job")

_context: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("nsstuck_log_context", default={})  # noqa: B039

P = ParamSpec("P")
R = TypeVar("R")


class LogSettingError(ValueError):
    """NSSTUCK_LOG_FORMAT or NSSTUCK_LOG_LEVEL holds a value that is not one of the known ones."""

    def __init__(self, variable: str, value: str, known: tuple[str, ...]) -> None:
        super().__init__(f"{value[:40]!r} is not one of {', '.join(known)}")
        self.variable = variable


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Every line logged inside (in this thread, and in work handed on with `carrying`) carries `fields`
    (those given as None are left as they were)."""
    token = _context.set(_merged(fields))
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields: object) -> None:
    """Add `fields` to the current context until it ends (a thread's work run through `carrying`)."""
    _context.set(_merged(fields))


def current() -> dict[str, str]:
    return dict(_context.get())


def carrying(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, run in a copy of the caller's context: hand it to a pool and its lines keep the caller's fields."""
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.copy().run(fn, *args, **kwargs)

    return run


def _merged(fields: Mapping[str, object]) -> dict[str, str]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
    merged = dict(_context.get())
    merged.update({k: str(v) for k, v in fields.items() if v is not None and v != ""})
    return merged


class _ContextFilter(logging.Filter):
    """Puts the current context on each record the handler writes (`record.nsstuck`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "nsstuck"):
            record.nsstuck = dict(_context.get())
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the context's fields,
    and the exception's traceback as text (`exception`) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "nsstuck", None) or {})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message [field=value ...]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, "nsstuck", None) or {}
        if not fields:
            return text
        first, newline, rest = text.partition("\n")
        shown = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{first} [{shown}]{newline}{rest}"


_chosen = {"format": "text"}


def current_format() -> str:
    """The format `setup` chose ("text" until it has run)."""
    return _chosen["format"]


def resolve(environ: Mapping[str, str], *, flag: str | None, default_level: str) -> tuple[str, str]:
    """(level, format) from `--log-level` (`flag`), else NSSTUCK_LOG_LEVEL, else `default_level`; and
    NSSTUCK_LOG_FORMAT (text unless set). Raises LogSettingError for an unknown value."""
    fmt = (environ.get("NSSTUCK_LOG_FORMAT") or "text").strip().lower()
    if fmt not in FORMATS:
        raise LogSettingError("NSSTUCK_LOG_FORMAT", environ.get("NSSTUCK_LOG_FORMAT", ""), FORMATS)
    level = flag
    if level is None:
        named = (environ.get("NSSTUCK_LOG_LEVEL") or "").strip().upper()
        if named and named not in LEVELS:
            raise LogSettingError("NSSTUCK_LOG_LEVEL", environ.get("NSSTUCK_LOG_LEVEL", ""), LEVELS)
        level = named or default_level
    return level, fmt


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """nsstuck's own handler on the root logger (replaced, not added again, by a second `setup`)."""


def setup(level: str, fmt: str, stream: IO[str] | None = None) -> None:
    """Log every logger's records at `level` and above to `stream` (stderr) in `fmt`. As with
    logging.basicConfig, nothing changes when the root logger has handlers someone else put there
    (a test harness capturing the logs)."""
    root = logging.getLogger()
    if any(not isinstance(h, _Handler) for h in root.handlers):
        return
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.addFilter(_ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    _chosen["format"] = fmt
    # APScheduler says two lines per run of every job at INFO; nsstuck says one (bot.scheduler.running)
    logging.getLogger("apscheduler.executors").setLevel(
        logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING
    )
    if fmt == "json":
        logging.captureWarnings(True)  # warnings (a ResourceWarning) become lines of the same format
        # a thread's or the process's uncaught exception: one line too, not a bare traceback
        threading.excepthook = _thread_exception
        sys.excepthook = _process_exception
        sys.unraisablehook = _unraisable


def _unraisable(unraisable: Any) -> None:
    """What Python says of an exception it cannot raise (a resource left open, under -W error)."""
    value = unraisable.exc_value
    kind = unraisable.exc_type
    where = f" in {unraisable.object!r}" if unraisable.object is not None else ""
    said = unraisable.err_msg or "Exception ignored"
    exc_info = (kind, value, unraisable.exc_traceback) if value is not None else None
    logging.getLogger("nsstuck").error("%s%s: %s: %s", said, where, kind.__name__, value, exc_info=exc_info)


def _thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    logging.getLogger("nsstuck").error("uncaught exception in thread %s", name, exc_info=exc_info)


def _process_exception(kind: type[BaseException], value: BaseException, traceback: Any) -> None:
    logging.getLogger("nsstuck").critical("uncaught exception", exc_info=(kind, value, traceback))
