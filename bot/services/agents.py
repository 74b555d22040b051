"""The read-only questions an agent may ask (`nsstuck mcp`, bot/mcp): the same use cases as the command line.

Each call names its caller (a token's name over HTTP, `stdio` for the process's own user) and the clusters
that caller may see; a cluster outside them is unknown to it, in the same words as one that does not exist.
Every call is logged with the caller's name (never a token) and counted against the slash commands' limits:
NSSTUCK_USER_COMMANDS_PER_MINUTE per caller, NSSTUCK_CHANNEL_COMMANDS_PER_MINUTE for the door as a whole.
No call changes a cluster: a diagnosis reads (its remedies are returned, never carried out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.diagnosis.explaining import explain
from bot.domain.refs import NAMESPACE_NAME, ClusterName
from bot.errors import ConfigError, NsstuckError
from bot.kube.collecting import CollectOptions
from bot.services.diagnosing import diagnose_registered
from bot.services.history import MAX_LIMIT, history
from bot.services.limiting import CommandLimits
from bot.services.prechecking import predicted, refuse_immortal, verdict
from bot.services.recording import RECURRENCE_AFTER, recall

if TYPE_CHECKING:
    from bot.domain.findings import Diagnosis
    from bot.kube.registry import ClusterRegistry
    from bot.settings import AppConfig
    from bot.store.database import Database

log = logging.getLogger("nsstuck.mcp")

TOOLS = ("list_clusters", "diagnose", "precheck", "history", "explain")
DOOR = "mcp"  # the rate limit's key for the door as a whole (what a channel is to a slash command)
# NamespaceLifecycle admission refuses to delete these (as `nsstuck precheck` says)
# `nsstuck diagnose`'s deadline and calls at once (bot/cli.py)
DEADLINE = 20.0
CALLS = 64


class ToolRefusal(NsstuckError):
    """A call refused in words for the agent: bad arguments, a cluster it may not see, over the rate limit."""


@dataclass(frozen=True)
class Caller:
    name: str  # the token's name, or "stdio"
    clusters: frozenset[str]


class AgentTools:
    def __init__(
        self,
        config: AppConfig,
        registry: ClusterRegistry,
        *,
        limits: CommandLimits,
        database: Callable[[], Database],
        max_answer: int,
        no_progress_after: float,
        remember: bool = False,
        recurrence_after: int = RECURRENCE_AFTER,
    ) -> None:
        """`remember`: a diagnosis carries what `database` remembers of the same cause and blocking object
        (`seen_before`, `recurrence`), as `nsstuck diagnose` does with NSSTUCK_DATABASE_URL set."""
        self.remember = remember
        self.recurrence_after = recurrence_after
        self.config = config
        self.registry = registry
        self.limits = limits
        self.database = database
        self.max_answer = max_answer
        self.no_progress_after = no_progress_after

    def call(self, caller: Caller, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The answer of `tool` to `caller`, as JSON; ToolRefusal (or ClusterUnreachableError) in words."""
        started = time.monotonic()
        outcome = "answered"
        try:
            if tool not in TOOLS:
                raise ToolRefusal(f"unknown tool {tool[:60]!r}; the tools are: {', '.join(TOOLS)}")
            over = self.limits.refusal(caller.name, DOOR)
            if over is not None:
                who = "this token" if over == "user" else "this server"
                raise ToolRefusal(f"rate limit: {who} asked too often in the last minute; try again in a minute")
            answer: dict[str, Any] = getattr(self, f"_{tool}")(caller, dict(arguments))
            return answer
        except NsstuckError as e:
            outcome = f"refused: {e}"
            raise
        except Exception:
            outcome = "failed"
            raise
        finally:
            log.info(
                "mcp: %s called %s(%s): %s in %d ms",
                caller.name,
                tool[:60],
                _shown_arguments(arguments),
                outcome[:300],
                (time.monotonic() - started) * 1000,
            )

    # -- the tools --------------------------------------------------------------------------------

    def _list_clusters(self, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, ())
        return {
            "clusters": [
                {"name": c.name, "watched": c.watch is not None}
                for c in self.config.clusters
                if c.name in caller.clusters
            ]
        }

    def _diagnose(self, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
        cluster, namespace = self._cluster_namespace(caller, arguments)
        report: dict[str, Any] = self._diagnosis(cluster, namespace).to_json()
        return report

    def _precheck(self, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
        cluster, namespace = self._cluster_namespace(caller, arguments)
        refuse_immortal(namespace)
        diagnosis = self._diagnosis(cluster, namespace)
        said, code = verdict(predicted(diagnosis, cluster, use_instead="the diagnose tool instead"))
        return {"verdict": said, "exit_code": code, "report": diagnosis.to_json()}

    def _history(self, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, ("cluster", "namespace", "open", "limit"))
        cluster = _optional_text(arguments, "cluster")
        if cluster is not None and cluster not in caller.clusters:
            raise self._unknown(caller, cluster)
        namespace = _optional_text(arguments, "namespace")
        if namespace is not None and not NAMESPACE_NAME.match(namespace):
            raise ToolRefusal(f"{namespace[:60]!r} is not a valid namespace name (lower-case letters, digits, '-')")
        open_only = arguments.get("open", False)
        limit = arguments.get("limit", 20)
        if not isinstance(open_only, bool):
            raise ToolRefusal("open must be true or false")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise ToolRefusal(f"limit must be a whole number between 1 and {MAX_LIMIT}")
        try:
            db = self.database()
        except ConfigError as e:
            raise ToolRefusal(f"no incident history here: {e.problem}") from None
        try:
            result = history(
                db, cluster=cluster, namespace=namespace, open_only=open_only, limit=limit, within=caller.clusters
            )
        finally:
            db.dispose()
        answer: dict[str, Any] = result.to_json()
        return answer

    def _explain(self, caller: Caller, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, ("cause",))
        cause = arguments.get("cause")
        if not isinstance(cause, str):
            raise ToolRefusal("cause is required: one of the causes a report names (e.g. apiservice_unavailable)")
        try:
            return explain(cause).to_json()
        except ValueError as e:
            raise ToolRefusal(str(e)) from None

    # -- shared -------------------------------------------------------------------------------------

    def _cluster_namespace(self, caller: Caller, arguments: dict[str, Any]) -> tuple[str, str]:
        _only(arguments, ("cluster", "namespace"))
        cluster, namespace = arguments.get("cluster"), arguments.get("namespace")
        if not isinstance(cluster, str) or not cluster:
            raise ToolRefusal("cluster is required: a name list_clusters gives")
        if not isinstance(namespace, str) or not namespace:
            raise ToolRefusal("namespace is required")
        if cluster not in caller.clusters:
            raise self._unknown(caller, cluster)
        if not NAMESPACE_NAME.match(namespace):
            raise ToolRefusal(f"{namespace[:60]!r} is not a valid namespace name (lower-case letters, digits and '-')")
        return cluster, namespace

    def _unknown(self, caller: Caller, cluster: str) -> ToolRefusal:
        # the same words whether the cluster exists elsewhere or not: a token learns nothing of the others
        known = ", ".join(sorted(caller.clusters)) or "none"
        return ToolRefusal(f"unknown cluster {cluster[:63]!r}; the clusters you may ask about: {known}")

    def _diagnosis(self, cluster: str, namespace: str) -> Diagnosis:
        options = CollectOptions(
            deadline=DEADLINE,
            call_timeout=10.0,
            workers=CALLS,
            max_answer=self.max_answer,
            no_progress_after=self.no_progress_after,
        )
        result = diagnose_registered(self.registry, ClusterName(cluster), namespace, options=options)
        if not self.remember:
            return result.diagnosis
        recalled, unknown = recall(
            self.database, result.diagnosis, result.summary.family, recurrence_after=self.recurrence_after
        )
        if unknown is not None:  # the report is given without what the database would have remembered
            log.warning("mcp: seen before: unknown (%s)", unknown)
        return recalled


def _only(arguments: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(arguments) - set(allowed))
    if extra:
        takes = ", ".join(allowed) or "no arguments"
        raise ToolRefusal(f"unknown argument {str(extra[0])[:40]!r}; this tool takes {takes}")


def _optional_text(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ToolRefusal(f"{key} must be a non-empty string")
    return value


def _shown_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments for the log line: names and short values (cluster and namespace names, a cause)."""
    parts = []
    for key, value in list(arguments.items())[:6]:
        parts.append(f"{str(key)[:30]}={str(value)[:63]!r}")
    return ", ".join(parts)
