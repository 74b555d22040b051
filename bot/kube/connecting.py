"""Turning a cluster registration (or an ad-hoc kubeconfig) into a configured client.

The official client does the authentication (tokens, client certificates, exec plugins, in-cluster
service accounts); we keep every secret it loads out of our messages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    except (ConfigException, OSError, ValueError, TypeError, KeyError):
        return None
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


def _secrets_of(configuration: Any) -> tuple[str, ...]:
    values: list[str] = []
    for value in (configuration.api_key or {}).values():
        if value:
            values.append(str(value))
            values.append(str(value).removeprefix("Bearer ").strip())
    for attribute in ("password", "username"):
        value = getattr(configuration, attribute, None)
        if value:
            values.append(str(value))
    # longest first, so that a token is not half-replaced by a shorter overlapping value
    return tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))


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
    try:
        _load(target, configuration)
    except ConfigException as e:
        where = "in-cluster configuration" if target.in_cluster else f"kubeconfig {target.kubeconfig or '(default)'}"
        raise UserError(f"cluster {target.name!r}: {where}: {_first_line(str(e))}") from None
    except FileNotFoundError:
        raise UserError(f"cluster {target.name!r}: kubeconfig {target.kubeconfig} does not exist") from None
    except (ValueError, TypeError, KeyError) as e:
        raise UserError(f"cluster {target.name!r}: the kubeconfig cannot be used ({e.__class__.__name__})") from None
    # one connection per worker thread, or urllib3 discards connections under parallel load
    configuration.connection_pool_maxsize = max(pool_size, 4)
    configuration.retries = False
    api_client = k8s_client.ApiClient(configuration)
    return Connection(target, api_client, _secrets_of(configuration), str(configuration.host))


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
