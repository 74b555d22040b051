"""Plain mutable state that tests turn to make the emulated cluster misbehave."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LatencyRule:
    ms: float
    match: re.Pattern[str] | None


@dataclass
class TrickleRule:
    match: re.Pattern[str]
    interval: float
    headers: bool = False  # the headers trickle too, after the status line


@dataclass
class RewriteRule:
    match: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: bytes | Callable[[], Iterable[bytes]]


@dataclass
class ForbidRule:
    resource: str
    group: str
    verbs: tuple[str, ...]
    namespace: str | None


@dataclass
class PluginDenialRule:
    """A compiled-in admission plugin of the API server that refuses matching requests (every identity)."""

    resource: str
    group: str
    operations: tuple[str, ...]
    namespace: str | None
    reason: str


@dataclass
class FaultRule:
    match: re.Pattern[str]
    status: int
    body: bytes | dict[str, Any] | str | None
    headers: dict[str, str]
    times: int | None
    reset_connection: bool
    query: re.Pattern[str] | None = None
    every: int = 1
    skip: int = 0
    hits: int = 0  # requests answered with the fault
    seen: int = 0  # matching requests, faulted or let through

    def takes(self) -> bool:
        """Whether the matching request just seen (counted in ``seen``) gets the fault."""
        n = self.seen - 1 - self.skip  # 0 for the first request after the skipped ones
        return n >= 0 and n % self.every == 0


@dataclass
class Knobs:
    """Read by the API server for every request from a non-admin identity (and by the controllers)."""

    latency_rules: list[LatencyRule] = field(default_factory=list)
    forbid_rules: list[ForbidRule] = field(default_factory=list)
    fault_rules: list[FaultRule] = field(default_factory=list)
    trickle_rules: list[TrickleRule] = field(default_factory=list)
    rewrite_rules: list[RewriteRule] = field(default_factory=list)
    unreachable_services: set[str] = field(default_factory=set)
    webhook_verdict: dict[str, str] = field(default_factory=dict)
    plugin_denials: list[PluginDenialRule] = field(default_factory=list)
    expired_tokens: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def latency(self, ms: float, match: str | None = None) -> LatencyRule:
        """Delay every matching request ("METHOD /path", regex search) of non-admin identities by ``ms``."""
        rule = LatencyRule(ms, re.compile(match) if match else None)
        with self._lock:
            if match is None:
                self.latency_rules = [r for r in self.latency_rules if r.match is not None]
            self.latency_rules.append(rule)
        return rule

    def forbid(
        self,
        resource: str,
        group: str = "",
        verbs: tuple[str, ...] | list[str] = ("list",),
        namespace: str | None = None,
    ) -> ForbidRule:
        """Answer 403 (RBAC wording) to non-admin identities for ``verbs`` on ``resource`` (optionally in one
        namespace)."""
        rule = ForbidRule(resource, group, tuple(verbs), namespace)
        with self._lock:
            self.forbid_rules.append(rule)
        return rule

    def inject_fault(  # noqa: PLR0917 - the contract's signature
        self,
        match: str,
        status: int,
        body: bytes | dict[str, Any] | str | None = None,
        headers: dict[str, str] | None = None,
        times: int | None = None,
        reset_connection: bool = False,
        *,
        query: str | None = None,
        every: int = 1,
        skip: int = 0,
    ) -> FaultRule:
        """Answer matching requests ("METHOD /path" regex search) with ``status`` (``times`` times, or forever).

        ``query`` also requires a regex search to match the raw query string (``continue=`` for the
        pages after the first of a list). Of the matching requests, the first ``skip`` pass, and then
        every ``every``-th one gets the fault starting with the first: ``every=2`` alternates fault,
        answer, fault, ... and ``every=2, skip=1`` answer, fault, answer, ...
        """
        if every < 1 or skip < 0:
            raise ValueError("every must be at least 1 and skip at least 0")
        rule = FaultRule(
            re.compile(match),
            status,
            body,
            dict(headers or {}),
            times,
            reset_connection,
            re.compile(query) if query is not None else None,
            every,
            skip,
        )
        with self._lock:
            self.fault_rules.append(rule)
        return rule

    def trickle(self, match: str, interval: float = 0.5, *, headers: bool = False) -> TrickleRule:
        """Answer matching requests ("METHOD /path" regex search) of non-admin identities with a 200 whose
        body never ends: the headers at once (64 MiB announced, under nsstuck's default largest answer),
        then one byte every ``interval`` seconds until the client goes or the emulator stops. A server that
        trickles its answer: a client's timeout for each read never fires. With `headers`, the status
        line comes at once and then the headers never end: one more byte of a header every ``interval``."""
        rule = TrickleRule(re.compile(match), interval, headers)
        with self._lock:
            self.trickle_rules.append(rule)
        return rule

    def rewrite(
        self,
        match: str,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: bytes | Callable[[], Iterable[bytes]] = b"",
    ) -> RewriteRule:
        """Answer matching requests ("METHOD /path" regex search) of non-admin identities with exactly this,
        whatever the request: `status`, `headers` as given (Content-Type application/json unless they name
        one), and `body`: bytes, sent with their Content-Length unless `headers` say otherwise; or a
        callable giving an iterable of bytes (a generator function), each request its own, sent piece by
        piece as chunks (or as they are, when `headers` give a Content-Length) until it ends, the client
        goes or the emulator stops: a huge or an endless body. The connection is closed after a streamed
        body. The latest rule that matches wins."""
        rule = RewriteRule(re.compile(match), status, dict(headers or {}), body)
        with self._lock:
            self.rewrite_rules.append(rule)
        return rule

    def deny_admission(
        self,
        resource: str,
        reason: str,
        *,
        group: str = "",
        operations: tuple[str, ...] | list[str] = ("DELETE",),
        namespace: str | None = None,
    ) -> PluginDenialRule:
        """A compiled-in admission plugin refuses ``operations`` on ``resource`` (in one namespace, or all)
        for every identity, the namespace controller included, worded as ``admission.NewForbidden`` words
        it: ``<resource>[.<group>] "<name>" is forbidden: <reason>``, the name ``Unknown`` for the items of
        a delete-collection (k8s.io/apiserver/pkg/admission/errors.go: the request has no name and no object)."""
        rule = PluginDenialRule(resource, group, tuple(operations), namespace, reason)
        with self._lock:
            self.plugin_denials.append(rule)
        return rule

    def plugin_denial_for(self, resource: str, group: str, operation: str, namespace: str) -> str | None:
        """The reason of the first plugin denial that takes this request, if any."""
        with self._lock:
            rules = list(self.plugin_denials)
        for rule in rules:
            if rule.resource not in (resource, "*") or rule.group not in (group, "*"):
                continue
            if operation not in rule.operations or (rule.namespace is not None and rule.namespace != namespace):
                continue
            return rule.reason
        return None

    def clear(self) -> None:
        with self._lock:
            self.plugin_denials.clear()
            self.latency_rules.clear()
            self.forbid_rules.clear()
            self.fault_rules.clear()
            self.trickle_rules.clear()
            self.rewrite_rules.clear()
        self.unreachable_services.clear()
        self.webhook_verdict.clear()
        self.expired_tokens.clear()

    # -- lookups used by the server --------------------------------------------------------------
    def delay_for(self, line: str) -> float:
        total = 0.0
        with self._lock:
            rules = list(self.latency_rules)
        for rule in rules:
            if rule.match is None or rule.match.search(line):
                total = max(total, rule.ms)
        return total / 1000.0

    def fault_for(self, line: str, query: str = "") -> FaultRule | None:
        """The fault for a request ("METHOD /path" and its raw query string), if one takes it."""
        with self._lock:
            for rule in self.fault_rules:
                if rule.times is not None and rule.hits >= rule.times:
                    continue
                if not rule.match.search(line) or (rule.query is not None and not rule.query.search(query)):
                    continue
                rule.seen += 1
                if rule.takes():
                    rule.hits += 1
                    return rule
        return None

    def rewrite_for(self, line: str) -> RewriteRule | None:
        with self._lock:
            return next((rule for rule in reversed(self.rewrite_rules) if rule.match.search(line)), None)

    def trickle_for(self, line: str) -> TrickleRule | None:
        with self._lock:
            return next((rule for rule in self.trickle_rules if rule.match.search(line)), None)

    def is_forbidden(self, resource: str, group: str, verb: str, namespace: str | None) -> bool:
        with self._lock:
            rules = list(self.forbid_rules)
        for rule in rules:
            if rule.resource not in (resource, "*") or rule.group not in (group, "*"):
                continue
            if verb not in rule.verbs and "*" not in rule.verbs:
                continue
            if rule.namespace is not None and rule.namespace != namespace:
                continue
            return True
        return False
