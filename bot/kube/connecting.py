"""Turning a cluster registration (or an ad-hoc kubeconfig) into a configured client.

The official client does the authentication (tokens, client certificates, exec plugins, in-cluster
service accounts); we keep every secret it loads out of our messages: the credentials of the
kubeconfig's users (tokens, passwords, keys, an exec plugin's arguments and environment), what the
client loaded from them, and the user part of the server's URL. What the client logs while it loads
a kubeconfig (an exec plugin's failure, with the plugin's own stderr) is said again by us, scrubbed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import kube_config as k8s_kube_config
from kubernetes.config.config_exception import ConfigException

from bot.errors import UserError
from bot.settings import ClusterConfig


@dataclass(frozen=True)
class ClusterTarget:
    """Where a cluster is and how to reach it."""

    name: str
    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False

    @classmethod
    def from_config(cls, cluster: ClusterConfig, config_path: Path) -> ClusterTarget:
        kubeconfig = cluster.kubeconfig
        if kubeconfig is not None and not kubeconfig.is_absolute():
            kubeconfig = (config_path.parent / kubeconfig).resolve()
        return cls(name=cluster.name, kubeconfig=kubeconfig, context=cluster.context, in_cluster=cluster.in_cluster)


def current_context(kubeconfig: Path) -> str | None:
    """The current context of a kubeconfig: the default name of an ad-hoc cluster (contract §1)."""
    try:
        _, active = k8s_config.list_kube_config_contexts(config_file=str(kubeconfig))
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        return None  # the connection says what is wrong with it
    return str(active["name"]) if isinstance(active, dict) and active.get("name") else None


class Connection:
    """A configured ApiClient plus the secrets to scrub from anything we say about it."""

    def __init__(self, target: ClusterTarget, api_client: Any, secrets: tuple[str, ...], host: str) -> None:
        self.target = target
        self.api_client = api_client
        self.secrets = secrets
        self.host = host

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def close(self) -> None:
        self.api_client.close()


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


def _kubeconfig_secrets(target: ClusterTarget) -> tuple[str, ...]:
    """The credentials of every user of the target's kubeconfig(s), and the user part of every server URL,
    read before the client loads them so that what it says while loading can be scrubbed too."""
    if target.in_cluster:
        return ()
    paths = (
        [str(target.kubeconfig)]
        if target.kubeconfig
        else k8s_kube_config.KUBE_CONFIG_DEFAULT_LOCATION.split(os.pathsep)
    )
    values: list[str] = []
    for path in paths:
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as file:
                document = yaml.safe_load(file)
        except (OSError, yaml.YAMLError, ValueError):
            continue  # the client's own loading says what is wrong with it
        if not isinstance(document, dict):
            continue
        for user in document.get("users") or ():
            if isinstance(user, dict):
                values += _strings(user.get("user"))
        for cluster in document.get("clusters") or ():
            server = (cluster.get("cluster") or {}) if isinstance(cluster, dict) else {}
            for key in ("server", "proxy-url"):
                if isinstance(server, dict) and isinstance(server.get(key), str):
                    parts = urlsplit(server[key])
                    values += [parts.password or "", parts.username or ""]
    return tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))


def _shown_host(host: str) -> str:
    """The server URL as we say it: without a user or password (`https://user:pass@host` is allowed)."""
    parts = urlsplit(host)
    if "@" not in parts.netloc:
        return host
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _stripped(configuration: Any) -> None:
    """Credentials as client-go reads them: a token file's trailing newline (`echo $TOKEN > file`) is
    not part of the token. The Python client sends it, and fails to build the header, quoting it."""

    def strip(config: Any) -> None:
        for key, value in list((config.api_key or {}).items()):
            if isinstance(value, str):
                config.api_key[key] = value.strip()

    hook = configuration.refresh_api_key_hook
    if hook is not None:  # the client sets the token again before every request, as it was read

        def refreshed(config: Any) -> None:
            hook(config)
            strip(config)

        configuration.refresh_api_key_hook = refreshed
    strip(configuration)


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


_TEMP_FILES = threading.Lock()


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
        with _TEMP_FILES:
            return original(*args, **kwargs)

    setattr(locked, "nsstuck_locked", True)  # noqa: B010 (a function attribute: mypy has no other spelling)
    setattr(k8s_kube_config, "_create_temp_file_with_content", locked)  # noqa: B010


def connect(target: ClusterTarget, *, pool_size: int = 32) -> Connection:
    """A client for the target. Raises UserError for a kubeconfig or context that cannot work."""
    configuration = k8s_client.Configuration()
    _guard_temp_files()
    known = _kubeconfig_secrets(target)
    scrubber = Connection(target, None, known, "")  # for what is said before the client is made
    where = "in-cluster configuration" if target.in_cluster else f"kubeconfig {target.kubeconfig or '(default)'}"
    held: list[logging.LogRecord] = []
    if _LOADER_LOGS not in logging.getLogger().filters:
        logging.getLogger().addFilter(_LOADER_LOGS)
    _LOADER_LOGS.held.sink = held
    try:
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
            log.log(
                record.levelno,
                "cluster %r: loading its %s: %s",
                target.name,
                where,
                scrubber.scrub(record.getMessage()),
            )
    _stripped(configuration)
    # one connection per worker thread, or urllib3 discards connections under parallel load
    configuration.connection_pool_maxsize = max(pool_size, 4)
    configuration.retries = False
    api_client = k8s_client.ApiClient(configuration)
    return Connection(target, api_client, _secrets_of(configuration, known), _shown_host(str(configuration.host)))


def _load(target: ClusterTarget, configuration: Any) -> None:
    if target.in_cluster:
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        k8s_config.load_kube_config(
            config_file=str(target.kubeconfig) if target.kubeconfig else None,
            context=target.context,
            client_configuration=configuration,
            persist_config=False,
        )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid configuration"
