"""A minimal OpenAPI v3 discovery so that ``kubectl create/apply`` work without ``--validate=false``.

kubectl (>= 1.27) asks ``/openapi/v3`` whether the server supports the ``fieldValidation`` query
parameter for the object's kind (a PATCH operation carrying that parameter); when it does, kubectl
leaves validation to the server. The documents here carry just those operations; no schemas.
``/openapi/v2`` answers 404 (as an API server built without it would).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apiserver import Cluster


def _gv_key(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _gv_doc(cluster: Cluster, group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for rt in cluster.types_for(group, version):
        if rt.custom or "patch" not in rt.verbs:
            continue
        root = "/api/v1" if not group else f"/apis/{group}/{version}"
        path = (
            f"{root}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced else f"{root}/{rt.plural}/{{name}}"
        )
        paths[path] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rt.kind},
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"}, "paths": paths}


def _builtin_gvs(cluster: Cluster) -> list[tuple[str, str]]:
    return sorted({(k[0], k[1]) for k, rt in cluster.types.items() if not rt.custom})


def document(cluster: Cluster, path: str) -> dict[str, Any] | None:
    if path == "/openapi/v2":
        return None
    if path == "/openapi/v3":
        out: dict[str, Any] = {}
        for group, version in _builtin_gvs(cluster):
            doc = _gv_doc(cluster, group, version)
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
            key = _gv_key(group, version)
            out[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        return {"paths": out}
    rest = path[len("/openapi/v3/") :]
    for group, version in _builtin_gvs(cluster):
        if rest == _gv_key(group, version):
            return _gv_doc(cluster, group, version)
    return None
