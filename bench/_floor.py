"""The floor of a diagnosis, as a process: what no tool that lists a namespace's content can skip.

    python -P bench/_floor.py SERVER TOKEN CA_FILE NAMESPACE THREADS

An interpreter's start, the standard library's HTTP client and JSON decoder (nothing else imported),
one discovery round (/api and /apis, then every group version at once), then every namespaced list
at once, each body decoded; on THREADS threads, each keeping its connection (TLS, as the cluster
serves it) between its requests. Nothing is done with what is read: it prints the number of
objects listed and of lists. bench/diagnose.py runs it beside `nsstuck diagnose`.

Deliberately standalone: it imports nothing of nsstuck.
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit


def main() -> None:
    server, token, ca_file, namespace, threads = sys.argv[1:6]
    where = urlsplit(server)
    context = ssl.create_default_context(cafile=ca_file)
    kept = threading.local()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def get(path: str) -> Any:
        connection = getattr(kept, "connection", None)
        if connection is None:
            connection = kept.connection = http.client.HTTPSConnection(
                where.hostname or "", where.port or 443, context=context, timeout=60
            )
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: HTTP {response.status}")
        return json.loads(body)

    with ThreadPoolExecutor(max_workers=int(threads)) as pool:
        core, groups = pool.map(get, ["/api", "/apis"])
        paths = [f"/api/{version}" for version in core["versions"]]
        paths += [f"/apis/{group['preferredVersion']['groupVersion']}" for group in groups["groups"]]
        lists = []
        for path, document in zip(paths, pool.map(get, paths), strict=True):
            for resource in document.get("resources", ()):
                if "/" not in resource["name"] and resource["namespaced"] and "list" in resource["verbs"]:
                    lists.append(f"{path}/namespaces/{namespace}/{resource['name']}")
        objects = sum(len(document.get("items") or ()) for document in pool.map(get, lists))
    print(objects, len(lists))


if __name__ == "__main__":
    main()
