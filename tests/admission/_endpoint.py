"""`nsstuck admission serve` as a real process against the Kubernetes emulator, and the real kubectl.

The emulator calls the webhook on each namespace DELETE, over TLS (the certificate of a fresh trustme CA
for 127.0.0.1, the CA as the configuration's caBundle), as the API server does, and answers its warnings
as `Warning:` headers, which kubectl prints.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from tests._cli import REPO
from tests._python import PYTHON, assert_no_resource_warning
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP

KUBECTL = "/usr/bin/kubectl"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
SERVING = re.compile(r"admission: serving https://[^:]+:(\d+)/admission/namespaces")


@dataclass
class Endpoint:
    """A running `nsstuck admission serve`: its process, its port, what it wrote on stderr."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    ca: trustme.CA
    cert: Path
    key: Path

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def url(self, path: str = "/admission/namespaces") -> str:
        return f"https://127.0.0.1:{self.port}{path}"


def wait_for(condition: Any, timeout: float = 30.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def write_pair(ca: trustme.CA, directory: Path, *names: str) -> tuple[Path, Path]:
    """A serving certificate of `ca` for `names` (127.0.0.1 by default): cert.pem and key.pem in `directory`."""
    issued = ca.issue_cert(*(names or ("127.0.0.1",)))
    cert, key = directory / "cert.pem", directory / "key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    return cert, key


@contextlib.contextmanager
def endpoint(kubeconfig: Path, directory: Path, *args: str, ca: trustme.CA | None = None) -> Iterator[Endpoint]:
    """Start `nsstuck admission serve --kubeconfig K --cert C --key K --port 0 ARGS` and wait until it serves."""
    ca = ca or trustme.CA()
    cert, key = write_pair(ca, directory)
    log = directory / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSSTUCK_", "SLACK_", "KUBECONFIG"))}
    command = [
        *PYTHON, "-m", "bot", "admission", "serve", "--kubeconfig", str(kubeconfig),
        "--cert", str(cert), "--key", str(key), "--port", "0", "--address", "127.0.0.1", *args,
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink, env=env, cwd=REPO)
    try:

        def serving() -> int | None:
            if process.poll() is not None:
                raise AssertionError(f"admission serve ended ({process.returncode}):\n{log.read_text()}")
            found = SERVING.search(log.read_text(errors="replace"))
            return int(found.group(1)) if found else None

        port = wait_for(serving, 60, "admission serve to listen")
        yield Endpoint(process, port, log, ca, cert, key)
    finally:
        stop(process)
    assert_no_resource_warning(log.read_text(errors="replace"), "nsstuck admission serve")


def post(served: Endpoint, body: bytes, path: str = "/admission/namespaces") -> tuple[int, bytes, float]:
    """POST `body` to the endpoint over TLS (its CA trusted): the status, the body, the seconds it took."""
    context = ssl.create_default_context()
    served.ca.configure_trust(context)
    started = time.monotonic()
    connection = http.client.HTTPSConnection("127.0.0.1", served.port, context=context, timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read(), time.monotonic() - started
    finally:
        connection.close()


def review(name: str, *, operation: str = "DELETE", resource: str = "namespaces", **request: Any) -> bytes:
    """An AdmissionReview v1 as the API server sends one for `operation` of `name`."""
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"uid-{name}-{operation}",
                "kind": {"group": "", "version": "v1", "kind": "Namespace"},
                "resource": {"group": "", "version": "v1", "resource": resource},
                "name": name,
                "namespace": name,
                "operation": operation,
                "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
                "object": None,
                "oldObject": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                "dryRun": False,
                **request,
            },
        }
    ).encode()


def served_certificate(served: Endpoint) -> bytes:
    """The certificate (DER) the endpoint presents in a handshake now."""
    context = ssl.create_default_context()
    served.ca.configure_trust(context)
    with (
        socket.create_connection(("127.0.0.1", served.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


SYSTEM_NAMESPACES = "!(request.name in ['kube-system', 'kube-public', 'kube-node-lease'])"


def configure(
    emu: Emulator, name: str, url: str, ca_bundle: str, *, timeout: int = 10, condition: str = SYSTEM_NAMESPACES
) -> None:
    """The ValidatingWebhookConfiguration docs/admission.md shows, pointing at `url`: DELETE of namespaces,
    failurePolicy Ignore, sideEffects NoneOnDryRun, for the namespaces `condition` (a matchCondition)
    matches: by default all but the system ones."""
    http = KubeHTTP(emu.url, emu.admin_token)
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name}.nsstuck.io",
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
                    {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}
                ],
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": timeout,
                "admissionReviewVersions": ["v1"],
                "matchConditions": [{"name": "these-namespaces", "expression": condition}],
            }
        ],
    }
    if http.get_or_none(f"{VWC}/{name}") is not None:
        http.delete(f"{VWC}/{name}")
    http.post(VWC, body)


def kubectl(kubeconfig: Path, *args: str, timeout: float = 40) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)
