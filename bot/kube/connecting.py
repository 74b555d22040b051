"""Turning a cluster registration (or an ad-hoc kubeconfig) into a configured client.

The official client does the authentication (tokens, client certificates, exec plugins, in-cluster
service accounts); we keep every secret it loads out of our messages: the credentials of the
kubeconfig's users (tokens, passwords, keys, an exec plugin's arguments and environment), what the
client loaded from them, and the user part of the server's URL. What the client logs while it loads
a kubeconfig (an exec plugin's failure, with the plugin's own stderr) is said again by us, scrubbed.
An exec credential plugin gets a bounded time (`credential_timeout`): one that hangs is killed, with
the processes it started, and the cluster is said to be unusable for now.
"""

from __future__ import annotations

import copy
import logging
import os
import signal
import subprocess
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import exec_provider as k8s_exec_provider
from kubernetes.config import incluster_config as k8s_incluster_config
from kubernetes.config import kube_config as k8s_kube_config
from kubernetes.config.config_exception import ConfigException

from bot.domain.refs import ClusterName
from bot.errors import ClusterUnreachableError, UserError
from bot.kube import clientfiles
from bot.kube.observing import CallObserver
from bot.kube.requesting import MAX_ANSWER, Reader, read_limited
from bot.kube.watchdog import watched


@dataclass(frozen=True)
class ClusterTarget:
    """Where a cluster is and how to reach it (registered ones come from `bot.kube.registry`)."""

    name: ClusterName
    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False
    # read the logs of the controllers of blocking objects (`evidence.controller_logs` in the config file)
    controller_logs: bool = True


@dataclass(frozen=True)
class Impersonation:
    """The identity every request of a connection acts as (`Impersonate-User`, `Impersonate-Group`):
    the cluster's RBAC then decides, and its audit log names this user."""

    user: str
    groups: tuple[str, ...] = ()


def _impersonating(api_client: Any, impersonation: Impersonation) -> None:
    """Send the impersonation headers with every request of this client. The generated client keeps
    headers in a dict (one value per name), so they are added where urllib3 sends them, where a
    group may be repeated."""
    pool_manager = api_client.rest_client.pool_manager
    send = pool_manager.request

    def request(method: str, url: str, *args: Any, headers: Any = None, **kwargs: Any) -> Any:
        merged = urllib3.HTTPHeaderDict(headers or {})
        for name in [n for n in merged if n.lower().startswith("impersonate-")]:
            del merged[name]
        merged["Impersonate-User"] = impersonation.user
        for group in impersonation.groups:
            merged.add("Impersonate-Group", group)
        return send(method, url, *args, headers=merged, **kwargs)

    pool_manager.request = request


# the largest error answer the client may read on this thread (`error_answers_within`): a Transport's
# NSSTUCK_MAX_ANSWER_MB for the call it is making, else the default
_ERROR_LIMIT = threading.local()


@contextmanager
def error_answers_within(limit: int) -> Iterator[None]:
    """While in it, an error answer the client reads on this thread holds at most `limit` bytes."""
    before = getattr(_ERROR_LIMIT, "limit", None)
    _ERROR_LIMIT.limit = limit
    try:
        yield
    finally:
        _ERROR_LIMIT.limit = before


class _ErrorAnswer:
    """An error answer whose body was read by `_bounded_errors`, as the client's ApiException takes it."""

    def __init__(self, response: Any, body: bytes) -> None:
        self.status = response.status
        self.reason = response.reason
        self.headers = response.headers
        self.data = body

    def getheaders(self) -> Any:
        return self.headers


def _bounded_errors(pool_manager: Any) -> None:
    """Read an error answer's body here, at most the call's limit (`error_answers_within`), where the
    client would read it whole in ApiException (`http_resp.data`) before it could be looked at: an
    endless 500 took gigabytes within the call's deadline. Past the limit the connection is dropped and
    the call is `requesting.Refused`, as the Reader refuses any body over it. Only for calls that read
    their answer themselves (`preload_content=False`, as `bot.kube.transport` makes them); the time is
    bounded by the watchdog (`bot.kube.watchdog`), as for any read of the call."""
    send = pool_manager.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        response = send(method, url, *args, **kwargs)
        if kwargs.get("preload_content", True) or 200 <= response.status <= 299:
            return response
        limit = getattr(_ERROR_LIMIT, "limit", None) or MAX_ANSWER
        try:
            body = read_limited(partial(response.read1, decode_content=False), limit)
        except BaseException:
            response.close()  # what is left of it is not read: the connection goes
            response.release_conn()
            raise
        response.release_conn()
        return _ErrorAnswer(response, bytes(body))

    pool_manager.request = request


def current_context(kubeconfig: Path) -> str | None:
    """The current context of a kubeconfig (the default name of an ad-hoc cluster, contract §1); of a
    path list, as kubectl merges it: the first file that sets one (the client's merger takes the last)."""
    for path in str(kubeconfig).split(os.pathsep):
        if not path:
            continue
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as file:
                document = yaml.safe_load(file)
        except (OSError, ValueError, yaml.YAMLError):
            continue  # the connection says what is wrong with it
        context = document.get("current-context") if isinstance(document, dict) else None
        if isinstance(context, str) and context:
            return context
    return None


class Connection:
    """A configured ApiClient plus the secrets to scrub from anything we say about it."""

    def __init__(self, target: ClusterTarget, api_client: Any, secrets: tuple[str, ...], host: str) -> None:
        self.target = target
        self.api_client = api_client
        self.secrets = secrets
        self.host = host
        # the files its configuration was read from, and what they were then (ConnectionCache)
        self.files: tuple[str, ...] = ()
        self.fingerprint: Fingerprint = ()
        # the server refused its credentials (401): a kept connection is not lent again (ConnectionCache)
        self.refused = False
        self.lent = 0  # how many times a ConnectionCache has lent it
        # told of every call a Transport makes on it (metrics); handed in by whoever made it
        self.observer: CallObserver | None = None
        # sends its GETs when it can do so as the client would (`bot.kube.requesting`); None: the client
        self.reader: Reader | None = None

    def scrub(self, text: str) -> str:
        secrets = self.secrets
        if self.api_client is not None:
            # and the credentials as they are now: the client renews an exec plugin's token (or an
            # in-cluster token) before a request once it has expired, after we read the first one
            secrets = _secrets_of(self.api_client.configuration, secrets)
        for secret in secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.api_client.close()  # its thread pool only: the client leaves its sockets to the collector
        self.api_client.rest_client.pool_manager.clear()


log = logging.getLogger(__name__)

# what is not a secret in a kubeconfig's user entry (every other string in it is taken for one): names,
# paths, and an exec plugin's command line (visible to anyone on the machine; its secrets go in `env`), which
# holds words such as the cluster's name that server messages must keep
_NOT_SECRET_KEYS = frozenset(
    {"apiVersion", "command", "args", "name", "installHint", "interactiveMode", "provideClusterInfo", "tokenFile",
     "client-certificate", "client-key", "cmd-path", "cmd-args", "token-key", "expiry-key", "expiry", "client-id",
     "idp-issuer-url", "idp-certificate-authority"}
)  # fmt: skip


def _secrets_of(configuration: Any, more: tuple[str, ...] = ()) -> tuple[str, ...]:
    values: list[str] = list(more)
    for value in (configuration.api_key or {}).values():
        if value:  # "Bearer <token>", "Basic <base64 of username:password>"
            text = str(value).strip()
            values += [text, text.partition(" ")[2].strip()]
    for attribute in ("password", "username"):
        value = getattr(configuration, attribute, None)
        if value:
            values.append(str(value))
    # longest first, so that a token is not half-replaced by a shorter overlapping value
    return tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))


def _strings(node: Any, key: str = "") -> Iterator[str]:
    """Every string of a kubeconfig's user entry that may be a secret."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, str(k))
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item, key)
    elif isinstance(node, str) and key not in _NOT_SECRET_KEYS:
        yield node
        yield node.strip()


def _config_paths(target: ClusterTarget) -> list[str]:
    """The files the target's configuration is read from."""
    if target.in_cluster:
        return [k8s_incluster_config.SERVICE_TOKEN_FILENAME, k8s_incluster_config.SERVICE_CERT_FILENAME]
    default = k8s_kube_config.KUBE_CONFIG_DEFAULT_LOCATION.split(os.pathsep)
    # a kubeconfig found as kubectl finds it may be a path list (`kubeconfig_paths`), merged on loading
    paths = str(target.kubeconfig).split(os.pathsep) if target.kubeconfig else default
    return [os.path.expanduser(path) for path in paths if path]


def kubeconfig_paths(explicit: str | None, environ: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files kubectl would read: `--kubeconfig` (which must exist), else the files of
    `$KUBECONFIG` that exist (a path list, merged: the first file to set a value wins), else
    `~/.kube/config`. Raises UserError when there is none."""
    if explicit:
        if not Path(explicit).is_file():
            raise UserError(f"kubeconfig {explicit!r} does not exist or is not a file")
        return [Path(explicit)]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        found = [Path(os.path.expanduser(p)) for p in listed.split(os.pathsep) if p]
        existing = [p for p in dict.fromkeys(found) if p.is_file()]
        if not existing:
            raise UserError(
                f"no cluster: none of the files of $KUBECONFIG ({listed}) exists; "
                "pass --cluster NAME (from the config file) or --kubeconfig PATH"
            )
        return existing
    home = Path(environ["HOME"]) / ".kube" / "config" if environ.get("HOME") else Path("~/.kube/config").expanduser()
    if not home.is_file():
        raise UserError(
            f"no cluster: no $KUBECONFIG and no {home}; pass --cluster NAME (from the config file) or --kubeconfig PATH"
        )
    return [home]


def joined(paths: list[Path]) -> Path:
    """Several kubeconfig files as the one path list the client merges (`os.pathsep` between them)."""
    return Path(os.pathsep.join(str(p) for p in paths))


# the files a kubeconfig's users and clusters may name, which the client reads once, as it loads it
_FILE_KEYS = ("tokenFile", "client-certificate", "client-key", "certificate-authority")


def _kubeconfig_secrets(target: ClusterTarget, paths: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The credentials of every user of the target's kubeconfig(s) at `paths`, and the user part of every server URL,
    read before the client loads them so that what it says while loading can be scrubbed too; and the
    files its users and clusters name (a token file, certificates), made absolute."""
    if target.in_cluster:
        return (), []
    values: list[str] = []
    files: list[str] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                document = yaml.safe_load(file)
        except (OSError, yaml.YAMLError, ValueError):
            continue  # the client's own loading says what is wrong with it
        if not isinstance(document, dict):
            continue
        entries = [u.get("user") for u in document.get("users") or () if isinstance(u, dict)]
        for user in entries:
            values += _strings(user)
        for cluster in document.get("clusters") or ():
            server = (cluster.get("cluster") or {}) if isinstance(cluster, dict) else {}
            if not isinstance(server, dict):
                continue
            entries.append(server)
            for key in ("server", "proxy-url"):
                if isinstance(server.get(key), str):
                    parts = urlsplit(server[key])
                    values += [parts.password or "", parts.username or ""]
        for entry in entries:
            for key in _FILE_KEYS:
                named = entry.get(key) if isinstance(entry, dict) else None
                if isinstance(named, str) and named and "\0" not in named:
                    files.append(os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(named)))
    return tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)), files


Fingerprint = tuple[tuple[int, int, int, int] | None, ...]


def _fingerprint(paths: tuple[str, ...]) -> Fingerprint:
    """What the files are now (device, inode, size, modification time; None for one that is not there)."""
    stats: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            stats.append(None)
        else:
            stats.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stats)


def _shown_host(host: str) -> str:
    """The server URL as we say it: without a user or password (`https://user:pass@host` is allowed)."""
    parts = urlsplit(host)
    if "@" not in parts.netloc:
        return host
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _stripped(configuration: Any, credential_timeout: float) -> None:
    """Credentials as client-go reads them: a token file's trailing newline (`echo $TOKEN > file`) is
    not part of the token. The Python client sends it, and fails to build the header, quoting it."""

    def strip(api_key: dict[str, Any]) -> dict[str, Any]:
        return {key: value.strip() if isinstance(value, str) else value for key, value in api_key.items()}

    hook = configuration.refresh_api_key_hook
    if hook is not None:  # the client sets the token again before every request, as it was read
        turn = threading.Lock()

        def refreshed(config: Any) -> None:
            # The hook writes the token as it was read into the configuration every request shares: a
            # request made in another thread at that moment would send it unstripped. It writes into a
            # scratch copy instead, and the stripped credentials replace the old ones in one assignment.
            # One hook at a time: an expired exec plugin token is renewed once, not by every worker.
            with turn, _credential_limit(credential_timeout):
                scratch = copy.copy(config)
                scratch.api_key = dict(config.api_key or {})
                hook(scratch)
                config.api_key = strip(scratch.api_key)

        configuration.refresh_api_key_hook = refreshed
    configuration.api_key = strip(configuration.api_key or {})


class _LoaderLogs(logging.Filter):
    """Holds back what the client logs on the root logger (`logging.error(...)`, an exec plugin's
    failure with its stderr) in a thread that is loading a kubeconfig, for `connect` to say it scrubbed."""

    held = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        sink: list[logging.LogRecord] | None = getattr(self.held, "sink", None)
        if sink is None:
            return True
        sink.append(record)
        return False


_LOADER_LOGS = _LoaderLogs()


def _guard_temp_files() -> None:
    """Make the client's writing of inline certificates to temporary files one thread at a time.

    It keeps the files in a cache keyed by their content and publishes a file's name before writing
    the file: two clusters with the same CA connected at once (a digest connects to many in parallel)
    could read an empty CA file and fail their TLS handshake. Only that step is locked, not the whole
    loading, which may run an exec credential plugin for seconds.
    """
    original = getattr(k8s_kube_config, "_create_temp_file_with_content", None)
    if original is None or getattr(original, "nsstuck_locked", False):
        return

    def locked(*args: Any, **kwargs: Any) -> Any:
        with clientfiles.WRITING:
            return original(*args, **kwargs)

    setattr(locked, "nsstuck_locked", True)  # noqa: B010 (a function attribute: mypy has no other spelling)
    setattr(k8s_kube_config, "_create_temp_file_with_content", locked)  # noqa: B010


# how long an exec credential plugin may take unless the caller gives less (`aws eks get-token` takes
# a second or two; one that has not answered in this long is hung, waiting for a prompt or a network)
CREDENTIAL_TIMEOUT = 15.0

_CREDENTIAL_LIMIT = threading.local()


@contextmanager
def _credential_limit(seconds: float) -> Iterator[list[str]]:
    """The time an exec plugin run by this thread gets, for the `with` block; the list it gives says
    whether one was stopped (the client logs a plugin's failure and goes on without credentials)."""
    previous = getattr(_CREDENTIAL_LIMIT, "seconds", None), getattr(_CREDENTIAL_LIMIT, "stopped", None)
    stopped: list[str] = []
    _CREDENTIAL_LIMIT.seconds, _CREDENTIAL_LIMIT.stopped = seconds, stopped
    try:
        yield stopped
    finally:
        _CREDENTIAL_LIMIT.seconds, _CREDENTIAL_LIMIT.stopped = previous


class _BoundedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """The client's exec plugin process, in a session of its own, killed (with what it started) when
    it has not answered within this thread's credential limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["start_new_session"] = True
        super().__init__(*args, **kwargs)

    def communicate(self, input: Any = None, timeout: float | None = None) -> Any:
        limit = getattr(_CREDENTIAL_LIMIT, "seconds", None) or CREDENTIAL_TIMEOUT
        try:
            return super().communicate(input, timeout=limit if timeout is None else min(timeout, limit))
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            super().communicate()
            why = f"its exec credential plugin did not answer within {limit:g}s and was stopped"
            stopped = getattr(_CREDENTIAL_LIMIT, "stopped", None)
            if stopped is not None:
                stopped.append(why)
            raise ConfigException(f"exec: {why}") from None


class _BoundedSubprocess(types.ModuleType):
    """`subprocess` as the client's exec provider sees it: the same, but for a bounded Popen."""

    Popen = _BoundedPopen

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)


def _bound_exec_plugins() -> None:
    """The client runs an exec plugin with no timeout at all (`communicate()`): a plugin that hangs
    would hold the caller, and the cluster's connect lock, for ever. Its exec provider is given a
    `subprocess` whose Popen is bounded."""
    if not isinstance(getattr(k8s_exec_provider, "subprocess", None), _BoundedSubprocess):
        setattr(k8s_exec_provider, "subprocess", _BoundedSubprocess("subprocess"))  # noqa: B010


def connect(
    target: ClusterTarget,
    *,
    pool_size: int = 32,
    credential_timeout: float = CREDENTIAL_TIMEOUT,
    impersonate: Impersonation | None = None,
    observer: CallObserver | None = None,
) -> Connection:
    """A client for the target (acting as `impersonate` when given; its calls told to `observer`).
    Raises UserError for a kubeconfig or context that cannot work, or an exec credential plugin that
    does not answer within `credential_timeout` seconds."""
    configuration = k8s_client.Configuration()
    _guard_temp_files()
    _bound_exec_plugins()
    # the files as they are before they are read: a change from now on gives up a kept client
    paths = _config_paths(target)
    fingerprint = _fingerprint(tuple(paths))
    known, named = _kubeconfig_secrets(target, paths)
    fingerprint += _fingerprint(tuple(named))
    scrubber = Connection(target, None, known, "")  # for what is said before the client is made
    where = "in-cluster configuration" if target.in_cluster else f"kubeconfig {target.kubeconfig or '(default)'}"
    held: list[logging.LogRecord] = []
    if _LOADER_LOGS not in logging.getLogger().filters:
        logging.getLogger().addFilter(_LOADER_LOGS)
    _LOADER_LOGS.held.sink = held
    stopped: list[str] = []
    try:
        with _credential_limit(credential_timeout) as stopped:
            _load(target, configuration)
    except ConfigException as e:
        raise UserError(f"cluster {target.name!r}: {where}: {scrubber.scrub(_first_line(str(e)))}") from None
    except FileNotFoundError:
        raise UserError(f"cluster {target.name!r}: kubeconfig {target.kubeconfig} does not exist") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise UserError(f"cluster {target.name!r}: {where} is not valid YAML{at}") from None
    except (ValueError, TypeError, KeyError) as e:
        raise UserError(f"cluster {target.name!r}: the kubeconfig cannot be used ({e.__class__.__name__})") from None
    finally:
        _LOADER_LOGS.held.sink = None
        for record in held:
            if stopped and any(why in record.getMessage() for why in stopped):
                continue  # said below, as the reason the cluster cannot be used
            log.log(
                record.levelno,
                "cluster %r: loading its %s: %s",
                target.name,
                where,
                scrubber.scrub(record.getMessage()),
            )
    if stopped:
        # the client went on without credentials; every call would be refused (a 401 that hides why)
        raise ClusterUnreachableError(f"cluster {target.name!r} cannot be used now: {stopped[0]}")
    _stripped(configuration, credential_timeout)
    # one connection per worker thread, or urllib3 discards connections under parallel load
    configuration.connection_pool_maxsize = max(pool_size, 4)
    configuration.retries = False
    api_client = k8s_client.ApiClient(configuration)
    watched(api_client.rest_client.pool_manager)  # a call through the client ends at its deadline
    _bounded_errors(api_client.rest_client.pool_manager)  # and its error answer is read bounded in size
    if impersonate is not None:
        _impersonating(api_client, impersonate)
    connection = Connection(target, api_client, _secrets_of(configuration, known), _shown_host(str(configuration.host)))
    connection.files, connection.fingerprint = (*paths, *named), fingerprint
    connection.observer = observer
    if impersonate is None and Reader.usable(configuration):
        connection.reader = Reader(api_client, size=configuration.connection_pool_maxsize)
    return connection


@dataclass(eq=False)
class _Kept:
    connection: Connection
    made: float
    used: float
    leases: int = 0  # held now
    retired: bool = False  # out of the cache; closed when its last lease ends


class ConnectionCache:
    """Clients kept between diagnoses, one per cluster, as client-go keeps its transports.

    A diagnosis that connects afresh reads and parses the kubeconfig twice, builds a client and opens
    every connection again (a TLS handshake and a new SSL context each, up to one per collecting
    worker): CPU that a burst of commands takes from the threads that must acknowledge Slack at once.
    A kept client is lent again while it is sound, and given up (closed once no one holds it):
    - when a file its configuration was read from changes: the kubeconfig and the files it names (a
      token file, certificates, a CA), or an in-cluster token or CA;
    - when the server refused its credentials (a 401), so that the next lease loads them again (an
      exec plugin is run again; client-go does the same on a 401);
    - after `max_age` seconds in any case, for credentials that change with no file to tell (an exec
      plugin's token given without an expiry);
    - after `idle` seconds unused, so that an idle bot holds no connections (looked at on each lease).
    A kubeconfig that cannot work is not kept: each lease says so again. Writes do not use it (a
    kept connection that the server has closed fails a request that must not be sent twice).
    """

    def __init__(
        self,
        *,
        pool_size: int = 32,
        max_age: float = 300.0,
        idle: float = 90.0,
        credential_timeout: float = CREDENTIAL_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        observer: CallObserver | None = None,
    ) -> None:
        self.pool_size = pool_size
        self.observer = observer
        self.credential_timeout = credential_timeout
        self.max_age = max_age
        self.idle = idle
        self.clock = clock
        self._kept: dict[ClusterTarget, _Kept] = {}
        self._making: dict[ClusterTarget, threading.Lock] = {}  # one connect at a time per target
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def lease(self, target: ClusterTarget) -> Iterator[Connection]:
        """A connection to the target for the `with` block. Raises UserError as `connect` does."""
        kept = self._acquire(target)
        try:
            yield kept.connection
        finally:
            self._release(kept)

    def close(self) -> None:
        """Close every kept connection (one still lent is closed when its lease ends)."""
        with self._lock:
            self._closed = True
            done = [self._retire(kept) for kept in list(self._kept.values())]
        for connection in done:
            if connection is not None:
                connection.close()

    def _acquire(self, target: ClusterTarget) -> _Kept:
        with self._lock:
            idle = self._sweep()
            making = self._making.setdefault(target, threading.Lock())
        for connection in idle:
            connection.close()
        with making:  # a lease that waited here for another's connect takes what that one made
            with self._lock:
                kept = self._kept.get(target)
            # the files are looked at outside the cache's lock (a stat each; a slow file system stalls
            # only the leases of this target)
            if kept is not None and self._lend(kept, _fingerprint(kept.connection.files)):
                return kept
            connection = connect(
                target, pool_size=self.pool_size, credential_timeout=self.credential_timeout, observer=self.observer
            )
            connection.lent = 1
            now = self.clock()
            with self._lock:
                kept = _Kept(connection, made=now, used=now, leases=1, retired=self._closed)
                if not self._closed:
                    self._kept[target] = kept
            return kept

    def _lend(self, kept: _Kept, fingerprint: Fingerprint) -> bool:
        """Lease the kept connection if it may still be lent; otherwise give it up."""
        with self._lock:
            connection = kept.connection
            if kept.retired:
                return False
            if connection.refused or connection.fingerprint != fingerprint or self.clock() - kept.made > self.max_age:
                done = self._retire(kept)
            else:
                kept.leases += 1
                connection.lent += 1
                return True
        if done is not None:
            done.close()
        return False

    def _release(self, kept: _Kept) -> None:
        with self._lock:
            kept.leases -= 1
            kept.used = self.clock()
            done = kept.retired and kept.leases == 0
        if done:
            kept.connection.close()

    def _retire(self, kept: _Kept) -> Connection | None:
        """Take it out of the cache (under the lock); its connection when no one holds it, to close."""
        if self._kept.get(kept.connection.target) is kept:
            del self._kept[kept.connection.target]
        kept.retired = True
        return kept.connection if kept.leases == 0 else None

    def _sweep(self) -> list[Connection]:
        """Take out what has not been lent for `idle` seconds (under the lock); their connections."""
        now = self.clock()
        stale = [k for k in self._kept.values() if k.leases == 0 and now - k.used > self.idle]
        return [c for c in (self._retire(k) for k in stale) if c is not None]


def _load(target: ClusterTarget, configuration: Any) -> None:
    if target.in_cluster:
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        k8s_config.load_kube_config(
            config_file=str(target.kubeconfig) if target.kubeconfig else None,
            context=target.context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=clientfiles.directory(),
        )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid configuration"
