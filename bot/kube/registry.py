"""The registered clusters, built once from the config: where each one is, and the clients lent for it.

Relative kubeconfig paths are resolved here, once (against the config file's folder, by
`settings.resolve_kubeconfig`); use cases name a cluster and borrow a connection, they never carry a
config path. Two ways to get a client:

- `lease(name)`: the client kept for the cluster between diagnoses (`ConnectionCache`), for reads;
- `connect(name)`: a client of its own, closed by the caller, for writes (a kept connection that the
  server closed would fail a request that must not be sent twice) and for scans minutes apart.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.errors import UnknownClusterError
from bot.kube.connecting import (
    CREDENTIAL_TIMEOUT,
    ClusterTarget,
    Connection,
    ConnectionCache,
    Impersonation,
    connect,
)
from bot.kube.observing import CallObserver
from bot.settings import AppConfig, ClusterName, resolve_kubeconfig


class ClusterRegistry:
    """Every cluster nsstuck may talk to, by name, and the clients kept for them."""

    def __init__(
        self,
        targets: Iterable[ClusterTarget],
        *,
        pool_size: int = 32,
        credential_timeout: float = CREDENTIAL_TIMEOUT,
        observer: CallObserver | None = None,
    ) -> None:
        """`observer` is told of every call made on the clients it lends and makes (metrics)."""
        self._targets: dict[str, ClusterTarget] = {}
        for target in targets:
            self._targets.setdefault(target.name, target)
        self.credential_timeout = credential_timeout
        self.observer = observer
        self.connections = ConnectionCache(
            pool_size=pool_size, credential_timeout=credential_timeout, observer=observer
        )

    @classmethod
    def from_config(
        cls,
        config: AppConfig,
        config_path: Path,
        *,
        pool_size: int = 32,
        credential_timeout: float = CREDENTIAL_TIMEOUT,
        observer: CallObserver | None = None,
    ) -> ClusterRegistry:
        """The clusters of the config file, their kubeconfig paths resolved against its folder."""
        return cls(
            (
                ClusterTarget(
                    name=cluster.cluster_name,
                    kubeconfig=resolve_kubeconfig(cluster, config_path),
                    context=cluster.context,
                    in_cluster=cluster.in_cluster,
                    controller_logs=cluster.evidence.controller_logs,
                )
                for cluster in config.clusters
            ),
            pool_size=pool_size,
            credential_timeout=credential_timeout,
            observer=observer,
        )

    @property
    def names(self) -> list[ClusterName]:
        return [ClusterName(name) for name in self._targets]

    def knows(self, name: str) -> bool:
        return name in self._targets

    def target(self, name: ClusterName) -> ClusterTarget:
        """Where the cluster is; UnknownClusterError (with the closest registered name) otherwise."""
        found = self._targets.get(name)
        if found is None:
            known = list(self._targets)
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
            raise UnknownClusterError(name, known, close[0] if close else None)
        return found

    @contextmanager
    def lease(self, name: ClusterName) -> Iterator[Connection]:
        """The client kept for the cluster, for the `with` block. Raises UnknownClusterError, or
        UserError for a kubeconfig that cannot work."""
        with self.connections.lease(self.target(name)) as connection:
            yield connection

    def connect(
        self,
        name: ClusterName,
        *,
        pool_size: int,
        credential_timeout: float | None = None,
        impersonate: Impersonation | None = None,
    ) -> Connection:
        """A client of its own (the caller closes it), acting as `impersonate` when given; an exec
        credential plugin gets the registry's credential timeout, or `credential_timeout` when that is less."""
        limit = self.credential_timeout
        if credential_timeout is not None:
            limit = min(limit, credential_timeout)
        return connect(
            self.target(name),
            pool_size=pool_size,
            credential_timeout=limit,
            impersonate=impersonate,
            observer=self.observer,
        )

    def close(self) -> None:
        self.connections.close()
