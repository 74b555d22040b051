"""Typed settings: the environment (contract §3) and the YAML config file (contract §4).

Both are validated on load and passed in to whoever needs them; nothing reads them at import time.
Every problem becomes a `ConfigError` that names the file or variable, the key, and what is wrong,
so that the CLI can print one short line and exit 2.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.domain.refs import ChannelId, ClusterName
from bot.errors import ConfigError, UnknownClusterError

__all__ = ["AppConfig", "ChannelId", "ClusterConfig", "ClusterName", "DigestConfig", "Settings", "WatchConfig"]

DEFAULT_CONFIG_PATH = Path("config/nsstuck.yaml")

_CLUSTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")
_APPROVER_ID = re.compile(r"^[UWS][A-Z0-9]{2,}$")
_SLACK_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_DURATION_PART = re.compile(r"(\d+)([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# a config file is a few kilobytes; these bound what a hostile or broken one can cost to read
MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_DEPTH = 40  # nesting of mappings and sequences (PyYAML composes recursively)
MAX_YAML_NODES = 100_000  # nodes once every alias is expanded (a "billion laughs" has 10**9)
MAX_PROBLEM = 300  # characters of a problem in a ConfigError


def _clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters (control characters and line breaks become spaces)."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text[: limit * 2]).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# credentials pasted where a name or an ID belongs: Slack tokens, and JWTs (Kubernetes service account
# tokens); a message about the mistake must not copy them into a terminal, a CI log or a Slack thread
_CREDENTIAL = re.compile(r"\b(?:xox[a-z]|xapp)-[A-Za-z0-9-]+|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_.-]*")


def _shown(value: object, limit: int = 60) -> str:
    """A value quoted for a message: repr'd and cut, so that a megabyte of input is not echoed back, and
    without anything that looks like a credential."""
    return _clip(_CREDENTIAL.sub("<a credential, not shown>", repr(value)), limit)


# ---------------------------------------------------------------------------------------------
# Small value parsers, usable on their own (the Slack door parses durations too).


def parse_duration(text: str) -> timedelta:
    """Parse `90s`, `30m`, `1h30m`, `2d`; a bare number is seconds. Raises ValueError."""
    value = text.strip().lower()
    if value.isdigit():
        return _seconds(int(value))
    pos = 0
    seconds = 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        seconds += int(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f"{_shown(text)} is not a duration (examples: 45s, 30m, 1h30m, 2d)")
    return _seconds(seconds)


def _seconds(seconds: int) -> timedelta:
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError("too long a duration (at most 999999999 days)") from None


_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _crontab_days(field: str) -> str:
    """The day-of-week field in APScheduler's terms. Crontab counts 0 (or 7) = Sunday, 1 = Monday;
    APScheduler 3 counts 0 = Monday, so `1-5` would silently mean Tuesday to Saturday. Numbers become
    explicit day names; names and `*` pass through."""
    days: list[str] = []
    for part in field.split(","):
        spec, _, step_text = part.partition("/")
        if not any(c.isdigit() for c in spec):
            if step_text or spec == "*":
                if spec == "*" and not step_text:
                    return field
                spec = "0-6" if spec == "*" else spec
            else:
                days.append(spec)
                continue
        first, _, last = spec.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or (step_text and not step_text.isdigit()):
            raise ValueError(f"day of week {_shown(part)} is not valid")
        low, high, step = int(first), int(last or first), int(step_text or 1)
        if not (0 <= low <= 7 and 0 <= high <= 7 and low <= high and step >= 1):
            raise ValueError(f"day of week {_shown(part)} is out of range (0-7, Sunday is 0 or 7)")
        if step_text and not last:  # `1/2`: from Monday, every other day
            high = 6
        days.extend(_DAY_NAMES[d] for d in range(low, high + 1, step))
    return ",".join(dict.fromkeys(days))


def cron_trigger(expression: str, timezone: str = "UTC") -> Any:
    """An APScheduler CronTrigger for a five-field crontab expression, with crontab's day numbers."""
    from apscheduler.triggers.cron import CronTrigger  # heavy import, only when a digest exists

    minute, hour, day, month, day_of_week = expression.split()
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=_crontab_days(day_of_week),
        timezone=ZoneInfo(timezone),
    )


def validate_cron(expression: str, timezone: str = "UTC") -> str:
    """Check a five-field crontab expression; returns it unchanged or raises ValueError."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"{_shown(expression)} is not a cron expression: expected 5 fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    try:
        cron_trigger(expression, timezone)
    except (ValueError, KeyError) as e:
        raise ValueError(f"{_shown(expression)} is not a valid cron expression: {_clip(str(e), 120)}") from e
    return expression


def _check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as e:  # OSError: a name too long for a file name
        raise ValueError(f"unknown time zone {_shown(name)} (use an IANA name such as Europe/Berlin)") from e
    return name


def _to_duration(value: Any) -> Any:
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _seconds(value)
    return value


def _check_cluster_name(value: str) -> str:
    if not _CLUSTER_NAME.match(value):
        raise ValueError(
            f"{_shown(value)} is not a valid cluster name "
            "(lower-case letters, digits, '-', '_', '.'; at most 63 characters)"
        )
    return value


def _check_channel(value: str) -> str:
    if not _CHANNEL_ID.match(value):
        raise ValueError(f"{_shown(value)} is not a Slack channel ID (like C0123ABCD)")
    return value


_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_finalizer_resource(value: str) -> str:
    if not _RESOURCE_NAME.match(value):
        raise ValueError(
            f"{_shown(value)} is not RESOURCE or RESOURCE.GROUP (e.g. widgets.example.com); "
            "never * or a subresource: RBAC's * also grants subresources such as pods/ephemeralcontainers"
        )
    return value


def _check_approver(value: str) -> str:
    if not _APPROVER_ID.match(value):
        raise ValueError(f"{_shown(value)} is not a Slack user ID (U…/W…) or user group ID (S…)")
    return value


# ---------------------------------------------------------------------------------------------
# The config file (contract §4).


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def _check_kube_user(value: str) -> str:
    if not value:
        raise ValueError("the Kubernetes user name is empty")
    if value.startswith("system:"):
        raise ValueError(f"{_shown(value)}: nsstuck never acts as a system: identity")
    return value


def _check_kube_group(value: str) -> str:
    if not value:
        raise ValueError("a Kubernetes group name is empty")
    if value.startswith("system:"):
        raise ValueError(
            f"{_shown(value)}: nsstuck never sends a system: group (system:masters would be cluster-admin)"
        )
    return value


def _check_slack_user(value: str) -> str:
    if not _SLACK_USER_ID.match(value):
        raise ValueError(f"{_shown(value)} is not a Slack user ID (U…/W…)")
    return value


class KubeIdentity(_Strict):
    """Who a Slack user is on a cluster: the Kubernetes user and groups nsstuck impersonates."""

    user: Annotated[str, AfterValidator(_check_kube_user)]
    groups: tuple[Annotated[str, AfterValidator(_check_kube_group)], ...] = ()


class EmailIdentity(_Strict):
    """A Kubernetes identity derived from the Slack profile's e-mail: `prefix` + e-mail, fixed groups."""

    prefix: str = ""
    groups: tuple[Annotated[str, AfterValidator(_check_kube_group)], ...] = ()

    @field_validator("prefix")
    @classmethod
    def _not_system(cls, value: str) -> str:
        if value.startswith("system:"):
            raise ValueError(f"{_shown(value)}: nsstuck never acts as a system: identity")
        return value


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _check_email(value: str) -> str:
    if not _EMAIL.match(value):
        raise ValueError(f"{_shown(value)} is not an e-mail address")
    return value


class RequesterConfig(_Strict):
    """One person of `requesters:` (contract §4): their Slack user ID or Slack e-mail, and who they are
    on the clusters with `diagnose_as: requester` (never a system: user or group)."""

    slack: Annotated[str, AfterValidator(_check_slack_user)] | None = None
    email: Annotated[str, AfterValidator(_check_email)] | None = None
    user: Annotated[str, AfterValidator(_check_kube_user)]
    groups: tuple[Annotated[str, AfterValidator(_check_kube_group)], ...] = ()

    @model_validator(mode="after")
    def _one_key(self) -> RequesterConfig:
        if (self.slack is None) == (self.email is None):
            raise ValueError("each requester needs exactly one of slack: (a Slack user ID) or email:")
        return self


class ImpersonationConfig(_Strict):
    """How an approver's Slack user becomes a Kubernetes identity (for `act_as_approver`)."""

    users: dict[Annotated[str, AfterValidator(_check_slack_user)], KubeIdentity] = Field(default_factory=dict)
    email: EmailIdentity | None = None


def _watch_after(value: timedelta) -> timedelta:
    if value < MIN_WATCH_AFTER:
        raise ValueError(
            f"{int(value.total_seconds())}s is too short: at least 1m (a namespace often takes a minute or more "
            "to delete its content normally)"
        )
    return value


MIN_WATCH_AFTER = timedelta(minutes=1)


class WatchConfig(_Strict):
    """A watched cluster: its namespaces Terminating for longer than `after` are diagnosed and posted to
    `channel` unasked (default: the cluster's first channel)."""

    after: Annotated[timedelta, BeforeValidator(_to_duration), AfterValidator(_watch_after)] = timedelta(minutes=15)
    channel: Annotated[str, AfterValidator(_check_channel)] | None = None


class EvidenceConfig(_Strict):
    """What evidence nsstuck reads on a cluster beyond the objects themselves."""

    # the recent log lines of the controllers of blocking objects that name them (needs `get pods/log`)
    controller_logs: bool = True


# the API server gives a validating webhook 30 s at most; the check answers within its budget
MAX_ADMISSION_BUDGET = 28.0


class AdmissionConfig(_Strict):
    """The namespace-delete admission webhook of a cluster (`nsstuck serve` with NSSTUCK_ADMISSION_PORT):
    warn (the default) or deny a delete whose prediction is certain, the check's budget, and the channel
    that hears of a delete that will get stuck (default: the cluster's first channel)."""

    mode: Literal["warn", "deny"] = "warn"
    budget_seconds: float = Field(default=3.0, gt=0, le=MAX_ADMISSION_BUDGET)
    channel: Annotated[str, AfterValidator(_check_channel)] | None = None


class ClusterConfig(_Strict):
    """A cluster that `/nsstuck <cluster> <namespace>` may name."""

    name: Annotated[str, AfterValidator(_check_cluster_name)]
    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False
    channels: tuple[Annotated[str, AfterValidator(_check_channel)], ...] = ()
    approvers: tuple[Annotated[str, AfterValidator(_check_approver)], ...] = ()
    required_approvals: int = Field(default=1, ge=1, le=10)
    # remediation buttons for this cluster; it also needs at least one approver
    remediation: bool = True
    # every read and write of an execution is made as the approver whose vote completed the quorum
    # (Kubernetes impersonation), mapped to a Kubernetes identity by `impersonation`
    act_as_approver: bool = False
    impersonation: ImpersonationConfig | None = None
    # resources beyond the finalizer catalogue's whose finalizers nsstuck may remove here (RESOURCE or
    # RESOURCE.GROUP, as remediation.finalizerResources in the chart, which writes this for the cluster
    # nsstuck runs in): nsstuck's role on the cluster must grant `get` and `patch` on them
    finalizer_resources: tuple[Annotated[str, AfterValidator(_check_finalizer_resource)], ...] = ()
    # whether people from outside the workspace (Slack Connect, strangers) and guests may request and
    # approve changes here; they may diagnose wherever the channel allows it in any case
    allow_external_users: bool = False
    # watched: its namespaces stuck for longer than watch.after are posted to a channel unasked
    watch: WatchConfig | None = None
    evidence: EvidenceConfig = Field(default_factory=EvidenceConfig)
    # the namespace-delete admission webhook's mode, budget and channel on this cluster
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    # `requester`: a person's /nsstuck here is answered only for a namespace their own Kubernetes identity
    # (top-level `requesters:`, else their Slack e-mail) may `get` (SubjectAccessReview), and what they are
    # shown names no namespace they may not get (docs/tenants.md); `bot`: nsstuck's rights decide
    diagnose_as: Literal["bot", "requester"] = "bot"

    @property
    def as_requester(self) -> bool:
        return self.diagnose_as == "requester"

    @property
    def cluster_name(self) -> ClusterName:
        return ClusterName(self.name)

    @property
    def watch_channel(self) -> str | None:
        """Where the watch speaks: watch.channel, else the cluster's first channel (None: not watched)."""
        if self.watch is None:
            return None
        return self.watch.channel or (self.channels[0] if self.channels else None)

    @property
    def admission_channel(self) -> str | None:
        """Where a delete seen by the admission webhook is told: admission.channel, else the first channel."""
        return self.admission.channel or (self.channels[0] if self.channels else None)

    def allows(self, channel: str) -> bool:
        """Whether this cluster may be used from `channel` (no channel list: from any)."""
        return not self.channels or channel in self.channels

    @model_validator(mode="after")
    def _one_way_in(self) -> ClusterConfig:
        if self.in_cluster and self.kubeconfig is not None:
            raise ValueError("set either kubeconfig or in_cluster: true, not both")
        if self.in_cluster and self.context is not None:
            raise ValueError("context has no meaning with in_cluster: true")
        if self.act_as_approver and (
            self.impersonation is None or (not self.impersonation.users and self.impersonation.email is None)
        ):
            raise ValueError(
                "act_as_approver: true needs impersonation: users: {U…: {user: …, groups: […]}} or email: {…}"
            )
        return self


class DigestConfig(_Strict):
    """A scheduled digest of stuck namespaces posted to one channel."""

    channel: Annotated[str, AfterValidator(_check_channel)]
    schedule: str
    timezone: Annotated[str, AfterValidator(_check_timezone)] = "UTC"
    clusters: tuple[str, ...] = ()
    stuck_after: Annotated[timedelta, BeforeValidator(_to_duration)] = timedelta(minutes=30)
    # a name for the digest (it keys its runs in the database); default: channel, schedule, zone
    name: str | None = Field(default=None, min_length=1, max_length=100)
    # when nothing is stuck: a one-line all-clear (true) or no message at all (false)
    all_clear: bool = True
    # a run missed while nsstuck was down is made up at start-up if it is at most this late
    catch_up: Annotated[timedelta, BeforeValidator(_to_duration)] = timedelta(hours=1)

    @model_validator(mode="after")
    def _cron_in_zone(self) -> DigestConfig:
        validate_cron(self.schedule, self.timezone)
        return self

    @property
    def key(self) -> str:
        """What identifies this digest's runs across restarts and replicas."""
        return self.name or f"{self.channel} {self.schedule} {self.timezone}"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MCP_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MCP_TOKEN_MIN_LENGTH = 16


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{_shown(value)} is not an environment variable name (letters, digits, '_')")
    return value


def _check_mcp_token_name(value: str) -> str:
    if not _MCP_TOKEN_NAME.match(value):
        raise ValueError(f"{_shown(value)} is not a token name (letters, digits, '.', '_', '-'; at most 63)")
    return value


class McpTokenConfig(_Strict):
    """A bearer token of `nsstuck mcp --http`: its name (logged with every call; the token never is), the
    environment variable that holds it, and the only clusters it may see."""

    name: Annotated[str, AfterValidator(_check_mcp_token_name)]
    token_env: Annotated[str, AfterValidator(_check_env_name)]
    clusters: tuple[str, ...] = Field(min_length=1)


class McpConfig(_Strict):
    """The MCP door (`nsstuck mcp`): over HTTP, only these tokens get in."""

    tokens: tuple[McpTokenConfig, ...] = ()


class AppConfig(_Strict):
    """The whole config file."""

    clusters: tuple[ClusterConfig, ...] = ()
    digests: tuple[DigestConfig, ...] = ()
    mcp: McpConfig = Field(default_factory=McpConfig)
    # for clusters with `diagnose_as: requester`: a Slack user ID or e-mail -> the Kubernetes user and
    # groups a person is there (never the approvers' groups); someone not listed is their Slack e-mail,
    # with no groups
    requesters: tuple[RequesterConfig, ...] = ()

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, clusters: tuple[ClusterConfig, ...]) -> tuple[ClusterConfig, ...]:
        seen: dict[str, int] = {}
        for index, cluster in enumerate(clusters):
            if cluster.name in seen:
                raise _KeyedError(
                    ("clusters", index, "name"),
                    f"duplicate cluster {_shown(cluster.name)} (already defined at clusters[{seen[cluster.name]}])",
                )
            seen[cluster.name] = index
            if cluster.watch is not None and cluster.watch_channel is None:
                raise _KeyedError(
                    ("clusters", index, "watch"),
                    "a watched cluster needs a channel to speak in: set watch.channel, or give the cluster channels:",
                )
        return clusters

    @model_validator(mode="after")
    def _digests_name_known_clusters(self) -> AppConfig:
        known = {c.name for c in self.clusters}
        keys: dict[str, int] = {}
        for d_index, digest in enumerate(self.digests):
            if digest.key in keys:
                raise _KeyedError(
                    ("digests", d_index, "name"),
                    f"same digest as digests[{keys[digest.key]}] (give one of them a distinct name:)",
                )
            keys[digest.key] = d_index
            for c_index, name in enumerate(digest.clusters):
                if name not in known:
                    raise _KeyedError(
                        ("digests", d_index, "clusters", c_index),
                        f"unknown cluster {_shown(name)} (not in clusters:)",
                    )
        return self

    @model_validator(mode="after")
    def _mcp_tokens_name_known_clusters(self) -> AppConfig:
        known = {c.name for c in self.clusters}
        names: dict[str, int] = {}
        variables: dict[str, int] = {}
        for t_index, token in enumerate(self.mcp.tokens):
            if token.name in names:
                raise _KeyedError(
                    ("mcp", "tokens", t_index, "name"),
                    f"duplicate token name (already mcp.tokens[{names[token.name]}])",
                )
            if token.token_env in variables:
                raise _KeyedError(
                    ("mcp", "tokens", t_index, "token_env"),
                    f"the same variable as mcp.tokens[{variables[token.token_env]}]: each token needs its own",
                )
            names[token.name] = variables[token.token_env] = t_index
            for c_index, name in enumerate(token.clusters):
                if name not in known:
                    raise _KeyedError(
                        ("mcp", "tokens", t_index, "clusters", c_index),
                        f"unknown cluster {_shown(name)} (not in clusters:)",
                    )
        return self

    def requester(self, *, slack: str | None = None, email: str | None = None) -> RequesterConfig | None:
        """The `requesters:` entry of this Slack user ID, or else of this e-mail (case aside)."""
        for entry in self.requesters:
            if slack is not None and entry.slack == slack:
                return entry
        for entry in self.requesters:
            if email is not None and entry.email is not None and entry.email.lower() == email.lower():
                return entry
        return None

    def cluster(self, name: str) -> ClusterConfig | None:
        return next((c for c in self.clusters if c.name == name), None)

    def require_cluster(self, name: str) -> ClusterConfig:
        """The cluster called `name`, or UnknownClusterError suggesting the closest registered name."""
        cluster = self.cluster(name)
        if cluster is None:
            close = difflib.get_close_matches(name, self.cluster_names, n=1, cutoff=0.5)
            raise UnknownClusterError(name, self.cluster_names, close[0] if close else None)
        return cluster

    @property
    def cluster_names(self) -> list[str]:
        return [c.name for c in self.clusters]

    def clusters_in(self, channel: str) -> tuple[str, ...]:
        """The names of the clusters that may be used from `channel`."""
        return tuple(c.name for c in self.clusters if c.allows(channel))

    def digest_clusters(self, digest: DigestConfig) -> tuple[str, ...]:
        """The clusters a digest covers: those it names, else those its channel may use (never the
        clusters kept to other channels)."""
        return digest.clusters or self.clusters_in(digest.channel)

    def digest_warnings(self) -> list[tuple[tuple[str | int, ...], str]]:
        """(key path, what) for each digest that shows a cluster its channel may not use, and each
        digest that covers no cluster at all. Valid, but probably not what was meant."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        for d_index, digest in enumerate(self.digests):
            for c_index, name in enumerate(digest.clusters):
                cluster = self.cluster(name)
                if cluster is not None and not cluster.allows(digest.channel):
                    found.append(
                        (
                            ("digests", d_index, "clusters", c_index),
                            f"cluster {_shown(name)} may not be used from the digest's channel "
                            f"{digest.channel} (not in its channels:), but this digest posts its stuck "
                            "namespaces there",
                        )
                    )
            if not self.digest_clusters(digest):
                found.append(
                    (
                        ("digests", d_index),
                        f"no registered cluster may be used from {digest.channel}, so this digest covers none",
                    )
                )
        return found

    def clusters_seen_by(self, is_member: Callable[[str], bool], among: Iterable[str] | None = None) -> frozenset[str]:
        """The names of the clusters (of `among`, default all) a person may see outside any channel (the
        App Home): those with no channel list, and those with a channel `is_member` says they are in.
        `is_member` is asked only as far as needed."""
        wanted = None if among is None else set(among)
        return frozenset(
            c.name
            for c in self.clusters
            if (wanted is None or c.name in wanted) and (not c.channels or any(is_member(ch) for ch in c.channels))
        )


class _KeyedError(ValueError):
    """A validation error that knows its own key path (pydantic would blame the parent)."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


# ---------------------------------------------------------------------------------------------
# Loading with messages a person can act on.


def format_loc(loc: Sequence[str | int]) -> str:
    """`("clusters", 1, "name")` -> `clusters[1].name`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _line_of(root: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the key (or item) at `loc` in a composed YAML tree, if it can be found."""
    node = root
    line: int | None = None
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    line = key.start_mark.line + 1
                    node = value
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _describe(error: dict[str, Any]) -> tuple[tuple[str | int, ...], str]:
    loc: tuple[str | int, ...] = tuple(error["loc"])
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, _KeyedError):
        return ctx_error.loc, str(ctx_error)
    kind = error["type"]
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), known_keys(loc[:-1]), n=1, cutoff=0.6) if loc else []
        return loc, f"unknown key (did you mean {close[0]}?)" if close else "unknown key"
    if kind == "missing":
        return loc, "required key is missing"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    # pydantic appends the model name for model validators; our messages stand alone
    return loc, message


def load_config(path: Path, *, required: bool = True) -> AppConfig:
    """Read and validate the config file. A missing file is an empty config unless `required`.
    Raises the first problem (`nsstuck config check` lists them all)."""
    config, problems = config_problems(path, required=required)
    if problems:
        first = problems[0]
        more = len(problems) - 1
        if more:
            plural = "s" if more > 1 else ""
            raise ConfigError(first.source, first.key, f"{first.problem} (and {more} more problem{plural})")
        raise first
    assert config is not None
    return config


def config_problems(path: Path, *, required: bool = True) -> tuple[AppConfig | None, list[ConfigError]]:
    """The validated config file (an empty one when it is missing and not `required`), or every problem
    found in it: each unknown key (with the nearest known one), each bad value, each kubeconfig that
    cannot be read. A file that is not YAML, or not a mapping, is one problem."""
    source = str(path)
    try:
        text = _read_config(path, source, required=required)
        if text is None:
            return AppConfig(), []
        tree, data = _parse(text, source)
    except ConfigError as e:
        return None, [e]
    try:
        config = AppConfig.model_validate(data)
    except ValidationError as e:
        problems = []
        for error in e.errors():
            loc, message = _describe(dict(error))
            line = _line_of(tree, loc)
            key = _clip(format_loc(loc), 120) or None
            if key and line:
                key = f"{key} (line {line})"
            problems.append(ConfigError(source, key, _clip(message, MAX_PROBLEM)))
        return None, problems
    problems = _kubeconfig_problems(config, source, tree, config_path=path)
    return (None, problems) if problems else (config, [])


def config_warnings(path: Path, config: AppConfig) -> list[ConfigError]:
    """What is valid in the config file but probably not meant (`AppConfig.digest_warnings`), each
    with its key and line like a problem."""
    found = config.digest_warnings()
    if not found:
        return []
    try:
        tree: yaml.Node | None = yaml.compose(path.read_text(), Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # read and parsed a moment ago; the lines are a nicety
        tree = None
    warnings = []
    for loc, message in found:
        key = format_loc(loc)
        line = _line_of(tree, loc)
        warnings.append(ConfigError(str(path), f"{key} (line {line})" if line else key, message))
    return warnings


# libyaml's safe loader where PyYAML was built with it (the wheels are), else the pure Python one: the same
# safe types, parsed in C (the file is parsed three times: its shape, its tree for line numbers, its values)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(text: str, source: str) -> tuple[yaml.Node | None, Mapping[str, Any]]:
    try:
        # the events first (a stream: no recursion, no alias expansion), so that a YAML bomb or a
        # deeply nested document is refused before anything is built from it
        shape = _yaml_shape_problem(text)
        if shape:
            raise ConfigError(source, None, shape)
        tree = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (SafeLoader, or libyaml's)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise ConfigError(source, where, f"invalid YAML: {_clip(str(e.problem), MAX_PROBLEM)}") from None
    except yaml.YAMLError as e:
        raise ConfigError(source, None, f"invalid YAML: {_clip(str(e), MAX_PROBLEM)}") from None
    except (ValueError, OverflowError) as e:  # PyYAML building a value: a date like 2026-13-45, a 5000-digit int
        raise ConfigError(source, None, f"invalid YAML: a value cannot be read ({_clip(str(e), 120)})") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, None, "the top level must be a mapping with clusters: and digests:")
    return tree, data


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (inside a tuple, a dict's values or an optional), and whether a dict
    key comes first on the way to it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = get_origin(annotation)
    for arg in reversed(get_args(annotation)):  # a dict's value type is its last argument
        model, keyed = _model_of(arg)
        if model is not None:
            return model, keyed or origin is dict
    return None, False


def known_keys(loc: Sequence[str | int]) -> list[str]:
    """The keys the config file may have at `loc` (the mapping an unknown key was found in)."""
    model: type[BaseModel] | None = AppConfig
    skip_key = False
    for part in loc:
        if isinstance(part, int):
            continue
        if skip_key:
            skip_key = False
            continue
        if model is None or part not in model.model_fields:
            return []
        model, skip_key = _model_of(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _read_config(path: Path, source: str, *, required: bool) -> str | None:
    """The file's text (None when it is missing and not required), at most MAX_CONFIG_BYTES of UTF-8."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if required:
            raise ConfigError(source, None, "file not found") from None
        return None
    except OSError as e:  # a directory, no permission, a name too long, a loop of links...
        raise ConfigError(source, None, f"cannot read the file ({e.__class__.__name__})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(source, None, f"the file is larger than {MAX_CONFIG_BYTES // 1024} KiB; is it the right one?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(source, None, "cannot read the file (UnicodeDecodeError: it is not UTF-8)") from None


def _yaml_shape_problem(text: str) -> str | None:
    """What makes the document too costly to build, or None. Walks the parser's events once, keeping
    for every anchor how many nodes it stands for, so aliases are counted as if expanded."""
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for, aliases expanded
    open_: list[tuple[str | None, list[int]]] = []  # the collections being read: anchor, node count
    total = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            open_.append((event.anchor, [1]))
            if len(open_) > MAX_YAML_DEPTH:
                return f"invalid YAML: nested deeper than {MAX_YAML_DEPTH} levels"
            count = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, (size,) = open_.pop()
            if anchor is not None:
                sizes[anchor] = size
            if open_:
                open_[-1][1][0] += size
            continue
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_):
                return f"invalid YAML: alias *{_clip(str(event.anchor), 40)} refers to a node that contains it"
            count = sizes.get(str(event.anchor), 1)
        elif isinstance(event, yaml.ScalarEvent):
            count = 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        else:
            continue
        total += count
        if open_ and not isinstance(event, yaml.CollectionStartEvent):
            open_[-1][1][0] += count
        if total > MAX_YAML_NODES:
            return f"invalid YAML: more than {MAX_YAML_NODES} values once its aliases are expanded (a YAML bomb?)"
    return None


def _kubeconfig_problems(
    config: AppConfig, source: str, tree: yaml.Node | None, *, config_path: Path
) -> list[ConfigError]:
    problems: list[ConfigError] = []
    for index, cluster in enumerate(config.clusters):
        if cluster.kubeconfig is None:
            continue
        shown = _shown(str(cluster.kubeconfig), 120)
        problem = None
        try:
            kubeconfig = resolve_kubeconfig(cluster, config_path) or cluster.kubeconfig
            if not kubeconfig.exists():
                problem = f"kubeconfig {shown} does not exist"
            elif not kubeconfig.is_file():
                problem = f"kubeconfig {shown} is not a file"
            elif not os.access(kubeconfig, os.R_OK):
                problem = f"kubeconfig {shown} is not readable"
        except (OSError, ValueError) as e:  # a name too long, a NUL byte, a directory we may not enter
            problem = f"kubeconfig {shown} cannot be looked at ({e.__class__.__name__})"
        if problem:
            loc = ("clusters", index, "kubeconfig")
            line = _line_of(tree, loc)
            key = format_loc(loc) + (f" (line {line})" if line else "")
            problems.append(ConfigError(source, key, problem))
    return problems


def resolve_kubeconfig(cluster: ClusterConfig, config_path: Path) -> Path | None:
    """The cluster's kubeconfig as an absolute path (relative paths are relative to the config file's
    folder): the one place that says where a registered cluster's kubeconfig is. Links are not
    followed, so that a broken one is reported as the file that is missing."""
    if cluster.kubeconfig is None:
        return None
    if cluster.kubeconfig.is_absolute():
        return cluster.kubeconfig
    return Path(os.path.abspath(config_path.parent / cluster.kubeconfig))


# ---------------------------------------------------------------------------------------------
# The environment (contract §3).


class Settings(BaseModel):
    """Process settings from the environment. Secrets stay `SecretStr` so they never print.

    A plain model: `settings_problems` reads the environment, once, explicitly, and validates the
    variables it names (each field's `validation_alias`, matched case-sensitively); nothing else is read
    (no .env file, no secrets directory). Defaults are validated as the values given are."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)

    config_path: Path = Field(default=DEFAULT_CONFIG_PATH, validation_alias="NSSTUCK_CONFIG")
    database_url: str = Field(default="sqlite:///nsstuck.db", validation_alias="NSSTUCK_DATABASE_URL")
    # PostgreSQL with two roles: the URL `nsstuck db upgrade` (downgrade, current) uses, of the role that
    # owns the schema; unset: NSSTUCK_DATABASE_URL. Never given to `serve`'s pods by the chart
    migration_database_url: str | None = Field(default=None, validation_alias="NSSTUCK_MIGRATION_DATABASE_URL")
    # the role `db upgrade` grants the runtime's share of the tables to; unset: with a migration URL, the
    # user of NSSTUCK_DATABASE_URL (a group role here lets several logins share it, e.g. for rotation)
    database_runtime_role: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.@$-]{0,62}$", validation_alias="NSSTUCK_DATABASE_RUNTIME_ROLE"
    )
    slack_bot_token: SecretStr | None = Field(default=None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    # the Slack app's id (A…); requests for any other app are refused. Unset: asked of Slack at start-up
    # (auth.test, then bots.info for the bot's app)
    slack_app_id: str | None = Field(
        default=None, pattern=r"^A[A-Z0-9]{2,30}$", validation_alias="NSSTUCK_SLACK_APP_ID"
    )
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias="NSSTUCK_SLACK_API_URL")
    http_port: int = Field(default=3000, ge=1, le=65535, validation_alias="NSSTUCK_HTTP_PORT")
    # GET /metrics, on a port of its own: Prometheus scrapes it, the Slack ingress never routes to it
    metrics_port: int = Field(default=9090, ge=1, le=65535, validation_alias="NSSTUCK_METRICS_PORT")
    # seconds between two posts to one channel (Slack allows about one per second)
    slack_post_interval: float = Field(default=1.0, gt=0, le=60, validation_alias="NSSTUCK_SLACK_POST_INTERVAL")
    # seconds the bot waits for Slack's Web API to answer a call
    slack_timeout_seconds: int = Field(default=30, ge=1, le=300, validation_alias="NSSTUCK_SLACK_TIMEOUT_SECONDS")
    # seconds a post that went unanswered (a timeout, a dropped connection) is given to show up in the
    # channel, where the bot looks for it, before it is sent again: Slack may have posted it anyway
    slack_settle_seconds: float = Field(default=30.0, gt=0, le=600, validation_alias="NSSTUCK_SLACK_SETTLE_SECONDS")
    # seconds between two follow-ups of the open incidents
    follow_up_seconds: float = Field(default=300.0, gt=0, validation_alias="NSSTUCK_FOLLOW_UP_SECONDS")
    # seconds between two passes over the outbox of reports that could not be posted
    repost_seconds: float = Field(default=30.0, gt=0, validation_alias="NSSTUCK_REPOST_SECONDS")
    # days after which stored snapshots are pruned (incidents, runs and their reports are kept)
    snapshot_retention_days: float = Field(default=30.0, gt=0, validation_alias="NSSTUCK_SNAPSHOT_RETENTION_DAYS")
    # seconds between two looks at the digest schedules (a digest is posted at most this late)
    digest_tick_seconds: float = Field(default=20.0, gt=0, le=300, validation_alias="NSSTUCK_DIGEST_TICK_SECONDS")
    # seconds between two rounds of the watch: each watched cluster's namespaces are listed once a round
    watch_seconds: float = Field(default=60.0, gt=0, le=3600, validation_alias="NSSTUCK_WATCH_SECONDS")
    # rehearsals and tests: a file holding an ISO 8601 time that the digest schedule takes as "now"
    # (so a schedule, a daylight-saving change or a missed run can be tried without waiting)
    clock_file: Path | None = Field(default=None, validation_alias="NSSTUCK_CLOCK_FILE")
    # seconds a remediation request waits for its approvals before it expires
    request_expiry_seconds: float = Field(default=3600.0, gt=0, validation_alias="NSSTUCK_REQUEST_EXPIRY_SECONDS")
    # seconds an exec credential plugin (aws eks get-token, gke-gcloud-auth-plugin, kubelogin) may take
    # before it is killed and the cluster is said to be unusable for now
    credential_timeout_seconds: float = Field(
        default=15.0, ge=1, le=300, validation_alias="NSSTUCK_CREDENTIAL_TIMEOUT_SECONDS"
    )
    # seconds an executor holds an approved change between two steps (re-check, backup, dry run, each
    # write), renewed before each; one that lets it lapse is fenced off, and its request reconciled
    # against the live cluster once the deadline, a grace and the longest call timeout have passed
    execution_timeout_seconds: float = Field(
        default=120.0, ge=1, le=3600, validation_alias="NSSTUCK_EXECUTION_TIMEOUT_SECONDS"
    )
    # seconds the namespace is followed after a change was applied, until it is gone
    remediation_follow_seconds: float = Field(
        default=900.0, gt=0, validation_alias="NSSTUCK_REMEDIATION_FOLLOW_SECONDS"
    )
    # seconds an acknowledged diagnosis waits in memory for an unavailable database before the user is told
    db_outage_seconds: float = Field(default=300.0, gt=0, le=3600, validation_alias="NSSTUCK_DB_OUTAGE_SECONDS")
    # Socket Mode: seconds between two pings, and without a pong after which the connection is taken
    # for dead and replaced (a connection cut without a close frame is noticed only this way)
    socket_ping_seconds: float = Field(default=2.0, ge=0.2, le=60, validation_alias="NSSTUCK_SOCKET_PING_SECONDS")
    socket_stale_seconds: float = Field(default=6.0, ge=0.5, le=600, validation_alias="NSSTUCK_SOCKET_STALE_SECONDS")
    # slash commands one user, and one channel, may send a minute (token buckets, per replica); a caller
    # over the limit is told so, only them
    user_commands_per_minute: int = Field(
        default=20, ge=1, le=100_000, validation_alias="NSSTUCK_USER_COMMANDS_PER_MINUTE"
    )
    channel_commands_per_minute: int = Field(
        default=60, ge=1, le=100_000, validation_alias="NSSTUCK_CHANNEL_COMMANDS_PER_MINUTE"
    )
    # diagnoses waiting for a worker; one more is refused with "try again shortly" instead of waiting
    diagnosis_queue: int = Field(default=100, ge=1, le=100_000, validation_alias="NSSTUCK_DIAGNOSIS_QUEUE")
    # worker processes that diagnose (and re-check before remediation), one job at a time each; None:
    # sized to the machine (its CPUs and one more, 2 to 4)
    diagnosis_workers: int | None = Field(default=None, ge=1, le=64, validation_alias="NSSTUCK_DIAGNOSIS_WORKERS")
    # a diagnosis worker holding more resident memory than this after a job is replaced by a fresh one
    worker_max_rss_mb: float = Field(default=150.0, ge=1, le=100_000, validation_alias="NSSTUCK_WORKER_MAX_RSS_MB")
    # the largest answer (a report and its compressed snapshot) a diagnosis worker sends the bot, in MiB,
    # and the seconds it may take to arrive once begun; past either the job fails and its worker is replaced
    worker_max_answer_mb: float = Field(default=256.0, gt=0, le=65_536, validation_alias="NSSTUCK_WORKER_MAX_ANSWER_MB")
    worker_answer_seconds: float = Field(default=10.0, gt=0, le=600, validation_alias="NSSTUCK_WORKER_ANSWER_SECONDS")
    # seconds a diagnosis collects for before it reports what it has (the rest are gaps); a worker still
    # busy past this, the credential timeout, a call's timeout and 5 s is stopped and replaced
    diagnosis_deadline_seconds: float = Field(
        default=20.0, ge=1, le=300, validation_alias="NSSTUCK_DIAGNOSIS_DEADLINE_SECONDS"
    )
    # the largest answer (a list's page, a discovery document) a diagnosis reads, in MiB: a larger one is
    # not read past this and is a gap naming the limit (the default: bot.kube.requesting.MAX_ANSWER)
    max_answer_mb: int = Field(default=256, ge=1, le=65_536, validation_alias="NSSTUCK_MAX_ANSWER_MB")
    # HTTP mode: seconds an idle connection stays open, and connections open at once (waitress)
    http_idle_seconds: float = Field(default=30.0, ge=1, le=3600, validation_alias="NSSTUCK_HTTP_IDLE_SECONDS")
    http_connection_limit: int = Field(default=100, ge=1, le=10_000, validation_alias="NSSTUCK_HTTP_CONNECTION_LIMIT")
    # HTTP mode: requests handled at once (waitress threads); each mostly waits (for Bolt's listener to
    # acknowledge, for the database), so a burst of commands is served side by side rather than in turns
    http_threads: int = Field(default=32, ge=1, le=1_000, validation_alias="NSSTUCK_HTTP_THREADS")
    # minutes a live controller's objects may stand still after their deletion began before it is no longer
    # taken to be at work (then the report says why it is not finishing, or that nothing says why)
    # "seen before" (issue 39 §3): a cause and blocking object family seen in more incidents than this in 30
    # days (the new one included) makes the verdict say it recurs, with the lasting fix the cause calls for
    recurrence_after: int = Field(default=3, ge=1, le=100_000, validation_alias="NSSTUCK_RECURRENCE_AFTER")
    no_progress_minutes: float = Field(default=30.0, gt=0, le=100_000, validation_alias="NSSTUCK_NO_PROGRESS_MINUTES")
    # the `kubernetes` package imported piece by piece (bot/kube/_lazy.py), or whole with false; read by
    # bot.kube from the environment when it is imported (before settings are loaded), validated here
    lazy_kubernetes: bool = Field(default=True, validation_alias="NSSTUCK_LAZY_KUBERNETES")
    # the namespace-delete admission webhook (issue 38): `serve` answers POST /admission/namespaces/CLUSTER
    # over TLS on this port when it is set, with the certificate and key of these PEM files (read again
    # when they change)
    admission_port: int | None = Field(default=None, ge=1, le=65535, validation_alias="NSSTUCK_ADMISSION_PORT")
    admission_cert: Path | None = Field(default=None, validation_alias="NSSTUCK_ADMISSION_CERT")
    admission_key: Path | None = Field(default=None, validation_alias="NSSTUCK_ADMISSION_KEY")

    @property
    def config_path_is_default(self) -> bool:
        return self.config_path == DEFAULT_CONFIG_PATH

    @field_validator("database_url", "migration_database_url")
    @classmethod
    def _url_has_scheme(cls, value: str | None) -> str | None:
        if value is not None and "://" not in value:
            raise ValueError("expected a SQLAlchemy URL such as sqlite:///nsstuck.db or postgresql+psycopg://…")
        return value

    @field_validator("metrics_port")
    @classmethod
    def _metrics_apart(cls, value: int, info: ValidationInfo) -> int:
        if value == info.data.get("http_port"):  # (validated before: declared before)
            raise ValueError("must differ from NSSTUCK_HTTP_PORT (/metrics has a port of its own)")
        return value

    @model_validator(mode="after")
    def _stale_after_pings(self) -> Settings:
        if self.socket_stale_seconds <= self.socket_ping_seconds:
            raise ValueError(
                "NSSTUCK_SOCKET_STALE_SECONDS must be longer than NSSTUCK_SOCKET_PING_SECONDS"
                " (a pong needs a ping first)"
            )
        return self

    @model_validator(mode="after")
    def _admission_pair(self) -> Settings:
        if self.admission_port is not None and (self.admission_cert is None or self.admission_key is None):
            raise ValueError(
                "NSSTUCK_ADMISSION_PORT needs NSSTUCK_ADMISSION_CERT and NSSTUCK_ADMISSION_KEY (the PEM files of "
                "the webhook's certificate and key)"
            )
        if self.admission_port is not None and self.admission_port in (self.http_port, self.metrics_port):
            raise ValueError("NSSTUCK_ADMISSION_PORT must differ from NSSTUCK_HTTP_PORT and NSSTUCK_METRICS_PORT")
        return self

    @field_validator("slack_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http(s) URL such as https://slack.com/api/")
        return value if value.endswith("/") else value + "/"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from `environ` (default: the process environment), or raise ConfigError."""
    settings, problems = settings_problems(environ)
    if problems:
        raise problems[0]
    assert settings is not None
    return settings


def settings_problems(environ: Mapping[str, str] | None = None) -> tuple[Settings | None, list[ConfigError]]:
    """Settings from `environ`, or every variable that is wrong (named, never with its value)."""
    env = dict(os.environ if environ is None else environ)
    fields = Settings.model_fields
    known = {f.validation_alias for f in fields.values() if isinstance(f.validation_alias, str)}
    values = {k: v for k, v in env.items() if k in known and v != ""}
    try:
        return Settings.model_validate(values), []
    except ValidationError as e:
        problems = []
        for error in e.errors():
            variable = str(error["loc"][0]) if error["loc"] else "environment"
            # a default that does not fit another variable is named by its field: name its variable
            alias = fields[variable].validation_alias if variable in fields else None
            variable = alias if isinstance(alias, str) else variable
            # never echo the value: it may be a secret
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(ConfigError("environment", variable, message))
        return None, problems
