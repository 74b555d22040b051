"""The Emulator facade: a started API server plus the controllers that run "inside the cluster"."""

from __future__ import annotations

import base64
import itertools
import os
import random
import secrets
import threading
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml

from tests.fakes.tracing import untraced, untraced_here

from .apiserver import Cluster
from .awsauth import EksAuthenticator
from .clock import Clock, FakeClock, RealClock
from .journal import Journal
from .knobs import Knobs
from .podlogs import PodLogs
from .server import Server, make_server, serve_in_thread
from .tls import issue_client_certificate, server_context, serving_cert

ADMIN_IDENTITY = "system:kube-controller-manager"
USER_IDENTITY = "system:serviceaccount:nsstuck:nsstuck"


class Controller(Protocol):
    name: str

    def reconcile(self, emu: Emulator) -> bool: ...


class Emulator:
    """An emulated Kubernetes API server on 127.0.0.1 (see README.md)."""

    def __init__(
        self,
        clock: Clock | None = None,
        seed: int = 0,
        controllers: bool = True,
        discovery_error_style: Literal["legacy", "stale"] = "legacy",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls_port: int = 0,
        **options: Any,
    ) -> None:
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.seed = seed
        self.discovery_error_style = discovery_error_style
        self.install_controllers = controllers
        self.options: dict[str, Any] = dict(options)
        self.options.setdefault("ordered_namespace_deletion", True)
        self.options.setdefault("endpoint_style", "endpointslices")
        # serve apidiscovery.k8s.io/v2 to clients that ask for it (kubectl then reports a stale
        # APIService as "stale GroupVersion discovery"); off by default: legacy documents only
        self.options.setdefault("aggregated_discovery", False)
        self.knobs = Knobs()
        # container log lines served by GET .../pods/NAME/log (podlogs.py)
        self.pod_logs = PodLogs()
        self.host = host
        self.port = port
        self.admin_identity = ADMIN_IDENTITY
        self.user_identity = USER_IDENTITY
        rnd = random.Random(seed)
        self.admin_token = f"admin-{rnd.getrandbits(64):016x}"
        self.user_token = f"user-{rnd.getrandbits(64):016x}"
        self.tokens: dict[str, str] = {self.admin_token: ADMIN_IDENTITY, self.user_token: USER_IDENTITY}
        self.basic_auth: dict[str, str] = {}  # base64("username:password") -> user
        self.eks_auth: EksAuthenticator | None = None  # accept_eks_tokens
        self.cluster = Cluster(self.clock, self.knobs, seed=seed)
        self.cluster.tokens = self.tokens
        self.cluster.options = self.options
        self.cluster.admin_users.add(ADMIN_IDENTITY)
        self.controllers: list[Controller] = []
        self.stopping = threading.Event()
        self._server: Server | None = None
        self._tls_server: Server | None = None
        self.tls_port = tls_port
        self.https_url = ""
        self._thread: threading.Thread | None = None
        self._bg: threading.Thread | None = None
        self._bg_stop = threading.Event()
        self._settle_lock = threading.RLock()
        self._audit = itertools.count(1)
        self._audit_lock = threading.Lock()
        # every request of a non-admin identity (and each the admin sent as someone else), in arrival
        # order: what a client asked, in which form, as whom (journal.py); bounded
        self.journal = Journal()
        self.url = ""
        if controllers:
            from .controllers import install_default_controllers

            install_default_controllers(self)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> Emulator:
        if self._server is not None:
            return self
        self._server = make_server(self, self.host, self.port)
        host, port = str(self._server.server_address[0]), int(self._server.server_address[1])
        self.url = f"http://{host}:{port}"
        self.cluster.server_address = f"{host}:{port}"
        self._thread = serve_in_thread(self._server)
        self._tls_server = make_server(self, self.host, self.tls_port, tls=server_context())
        tls_host, tls_port = str(self._tls_server.server_address[0]), int(self._tls_server.server_address[1])
        self.https_url = f"https://{tls_host}:{tls_port}"
        serve_in_thread(self._tls_server)
        return self

    @property
    def tls_handshakes(self) -> int:
        """How many TLS connections the HTTPS listener has established since it started."""
        return self._tls_server.handshakes if self._tls_server is not None else 0

    def stop(self) -> None:
        self.stopping.set()
        self._bg_stop.set()
        if self._bg is not None:
            self._bg.join(timeout=5)
            self._bg = None
        self.cluster.store.close()
        from .controllers._http import close_clients  # the controllers import the emulator's modules

        close_clients(self)
        for server in (self._server, self._tls_server):
            if server is not None:
                server.shutdown()
                server.server_close()
        self._server = None
        self._tls_server = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_audit_id(self) -> str:
        with self._audit_lock:
            n = next(self._audit)
        return f"00000000-0000-4000-8000-{n:012x}"

    # -- identities -------------------------------------------------------------------------------
    def add_token(self, user: str, token: str | None = None) -> str:
        """Register another bearer token for ``user`` (an identity the knobs treat as non-admin)."""
        token = token or f"tok-{secrets.token_hex(8)}"
        self.tokens[token] = user
        return token

    def accept_eks_tokens(self, cluster_id: str, access_key: str, secret_key: str, user: str) -> None:
        """Also accept, as ``user``, the EKS tokens (``k8s-aws-v1.``, what ``aws eks get-token`` prints)
        for the cluster named ``cluster_id`` signed with this access key and secret key: the signature
        is checked as STS checks it (awsauth.py), without STS."""
        if self.eks_auth is None or self.eks_auth.cluster_id != cluster_id:
            self.eks_auth = EksAuthenticator(cluster_id)
        self.eks_auth.keys[access_key] = (secret_key, user)

    def add_basic_auth(self, user: str, username: str, password: str) -> None:
        """Accept HTTP basic auth with ``username``/``password`` as ``user`` (what ``--basic-auth-file``
        did before Kubernetes 1.19; kubeconfigs still carry ``username``/``password``)."""
        self.basic_auth[base64.b64encode(f"{username}:{password}".encode()).decode()] = user

    def issue_client_certificate(self, user: str, groups: tuple[str, ...] = ()) -> tuple[str, str]:
        """(certificate PEM, key PEM) of a client certificate the HTTPS listener accepts as ``user``."""
        return issue_client_certificate(user, groups)

    def write_kubeconfig(
        self, path: str | os.PathLike[str], *, token: str | None = None, context: str = "emulator", tls: bool = True
    ) -> Path:
        """Write a kubeconfig for ``token`` (default: the user identity).

        The server is the HTTPS listener (with its self-signed CA inlined) because kubectl ignores a
        kubeconfig's credentials for an http:// server; ``tls=False`` writes the plain http URL.
        """
        if not self.url:
            raise RuntimeError("start() the emulator before writing a kubeconfig")
        cluster: dict[str, Any] = {"server": self.url}
        if tls:
            cert, _key = serving_cert()
            cluster = {
                "server": self.https_url,
                "certificate-authority-data": base64.b64encode(cert.read_bytes()).decode(),
            }
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": {"token": token or self.user_token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return out

    # -- authorization ----------------------------------------------------------------------------
    def enable_rbac(self) -> None:
        """Authorize every request of a non-admin identity by the stored RBAC objects (as the API server's
        RBAC authorizer; see rbac.py), after creating the bootstrap ClusterRoles and bindings that let
        any authenticated identity discover the API and ask who it is and what it may do. The
        ``knobs.forbid`` rules still apply on top."""
        from . import rbac
        from .apiserver import Ctx

        cluster = self.cluster
        for key, obj in rbac.bootstrap_policy():
            rt = cluster.types[(key[0], "v1", key[1])]
            with cluster.store.lock:
                present = cluster.store.get(key, "", obj["metadata"]["name"]) is not None
            if not present:
                cluster.create(rt, "", obj, Ctx(ADMIN_IDENTITY, admin=True))
        cluster.rbac = True

    # -- aggregated APIs ----------------------------------------------------------------------------
    def register_aggregated_backend(
        self, group: str, version: str, resources: list[dict[str, Any]], *, honours_discovery_accept: bool = True
    ) -> None:
        self.cluster.register_aggregated_backend(
            group, version, resources, honours_discovery_accept=honours_discovery_accept
        )

    # -- webhook backends ----------------------------------------------------------------------------
    def route_service(self, namespace: str, name: str, address: tuple[str, int], *, port: int = 443) -> None:
        """Serve the Service ``namespace/name`` (its ``port``) at ``address`` (a local ``(host, port)``):
        a validating webhook of a namespace DELETE whose ``clientConfig.service`` names it is then called
        there for real, over TLS, its certificate verified for ``<name>.<namespace>.svc``. The Service must
        still exist with a ready endpoint (and not be in ``knobs.unreachable_services``)."""
        self.cluster.service_routes[(namespace, name, port)] = (address[0], int(address[1]))

    # -- controllers ------------------------------------------------------------------------------
    def register_controller(self, ctrl: Controller) -> None:
        self.controllers.append(ctrl)

    def settle(self, max_rounds: int = 50) -> int:
        """Run every controller, in registration order, in rounds until a round changes nothing."""
        with untraced_here(), self._settle_lock:
            for rounds in range(1, max_rounds + 1):
                changed = False
                for ctrl in list(self.controllers):
                    if ctrl.reconcile(self):
                        changed = True
                if not changed:
                    return rounds
            return max_rounds

    def run_controllers_in_background(self, period: float = 0.1) -> None:
        if self._bg is not None:
            return
        self._bg_stop.clear()

        def loop() -> None:
            while not self._bg_stop.wait(period):
                try:
                    self.settle(max_rounds=5)
                except Exception:  # a controller error must not kill the loop
                    import traceback

                    traceback.print_exc()

        self._bg = threading.Thread(target=untraced(loop), name="kube-emulator-controllers", daemon=True)
        self._bg.start()

    def stop_controllers(self) -> None:
        self._bg_stop.set()
        if self._bg is not None:
            self._bg.join(timeout=5)
            self._bg = None


__all__ = ["ADMIN_IDENTITY", "USER_IDENTITY", "Controller", "Emulator", "FakeClock", "RealClock"]
