"""The values nsstuck never keeps: a Secret's data, a ConfigMap's data, the environment values of pods.

nsstuck asks the API server for Secrets and ConfigMaps as metadata only (`PartialObjectMetadata`), so
their values are never sent to it (see `bot.kube.transport`). What is kept of them is
`apiVersion`, `kind` and `metadata` (name, namespace, uid, resourceVersion, labels, annotations,
finalizers, owner references, deletion timestamp), less the one annotation that repeats the values
(`kubectl.kubernetes.io/last-applied-configuration`, which `kubectl apply` writes with the whole
object, data included). Pods are read in full (the rules need their node, volumes and status): of
their containers the environment values (`env[].value`) are dropped before anything keeps them, and
the same annotation; `env[].valueFrom` (`secretKeyRef`, `configMapKeyRef`, `fieldRef`,
`resourceFieldRef`) and `envFrom` only name a Secret's or ConfigMap's key, a field or a resource,
and are kept.

The functions here are the second line: they reduce an object that carries values all the same (a
server that ignored the media type we asked for, a backup taken before nsstuck read these as metadata).

Snapshots keep names, not values (issue 36, `snapshot_safe`): of every container found in an object
(a pod's, a workload's or a Job's pod template, a custom resource's), wherever it sits, the command
line keeps its flag names only (`flag_names`), the environment variables their names and references,
probes and lifecycle hooks their kind, port and path without exec commands or header values; and of
every object, its annotations only those the rules read (`KEPT_ANNOTATIONS`). Backups of what a
remedy touches are not reduced so (restoring needs the object): they lose only what `without_values`
drops.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from bot.domain.refs import KubeObject

# (group, resource) and kind of the types read as metadata only, in the core group
VALUE_RESOURCES = frozenset({("", "secrets"), ("", "configmaps")})
VALUE_FIELDS: dict[str, tuple[str, ...]] = {"Secret": ("data", "stringData"), "ConfigMap": ("data", "binaryData")}
# `kubectl apply` keeps the whole object it applied here, values included
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
POD_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def holds_values(api_version: object, kind: object) -> bool:
    """A Secret or a ConfigMap (core group, v1): read as metadata only, and kept so."""
    return api_version == "v1" and isinstance(kind, str) and kind in VALUE_FIELDS


def is_value_resource(group: str, resource: str) -> bool:
    return (group, resource) in VALUE_RESOURCES


def values_in(obj: KubeObject) -> list[str]:
    """What `without_values` would drop from this object, in words: `data`, `stringData`,
    `binaryData`, the environment values of a pod's containers, the last-applied annotation."""
    if obj.get("apiVersion") != "v1":
        return []
    kind = obj.get("kind")
    found: list[str] = []
    if kind == "Pod":
        spec = obj.get("spec")
        containers = [c for key in POD_CONTAINER_LISTS for c in (spec.get(key) or ())] if isinstance(spec, dict) else []
        envs = [c.get("env") for c in containers if isinstance(c, dict)]
        if any(isinstance(v, dict) and "value" in v for env in envs if isinstance(env, list) for v in env):
            found.append("the environment values of its containers")
    elif isinstance(kind, str) and kind in VALUE_FIELDS:
        found.extend(name for name in VALUE_FIELDS[kind] if obj.get(name) is not None)
    else:
        return []
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        found.append(f"the {LAST_APPLIED} annotation")
    return found


def metadata_only(obj: KubeObject, api_version: str, kind: str) -> KubeObject:
    """`{apiVersion, kind, metadata}` of an object, with its real apiVersion and kind (a
    `PartialObjectMetadata` answer says `meta.k8s.io/v1`, `PartialObjectMetadata`), without the
    last-applied annotation when it is a Secret, a ConfigMap or a Pod."""
    metadata = obj.get("metadata")
    reduced: KubeObject = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": dict(metadata) if isinstance(metadata, dict) else {},
    }
    return without_values(reduced)


def without_values(obj: KubeObject) -> KubeObject:
    """In place: a Secret without `data`/`stringData`, a ConfigMap without `data`/`binaryData`, a Pod
    without its containers' environment values; any of them without the last-applied annotation
    (`kubectl apply` writes the whole object there, values included). Anything else is left as it
    is. Returns the object."""
    kind = obj.get("kind")
    if obj.get("apiVersion") != "v1":
        return obj
    if kind == "Pod":
        without_env_values(obj)
    elif isinstance(kind, str) and kind in VALUE_FIELDS:
        for name in VALUE_FIELDS[kind]:
            obj.pop(name, None)
    else:
        return obj
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if isinstance(metadata, dict) and isinstance(annotations, dict) and LAST_APPLIED in annotations:
        metadata["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return obj


def without_env_values(pod: KubeObject) -> KubeObject:
    """In place: every container's `env[].value` dropped (init and ephemeral containers too); the
    variable's name and its `valueFrom` reference stay. Returns the pod."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return pod
    for key in POD_CONTAINER_LISTS:
        for container in spec.get(key) or ():
            if not isinstance(container, dict):
                continue
            env = container.get("env")
            if isinstance(env, list) and any(isinstance(v, dict) and "value" in v for v in env):
                container["env"] = [
                    {k: v for k, v in var.items() if k != "value"} if isinstance(var, dict) else var for var in env
                ]
    return pod


# The annotations a rule reads, the only ones a snapshot keeps (every other one is dropped before anything
# keeps an object: annotations hold what tools and people put there, tokens and whole manifests included).
# A rule that reads one adds its key here, or reads nothing.
# Helm's release of an object (a CRD's, a workload's): who installed it, for finding a finalizer's controller
HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
# Argo CD's resource tracking (bot.domain.gitops.TRACKING_ID): which Application applied the object
ARGOCD_TRACKING_ID = "argocd.argoproj.io/tracking-id"
KEPT_ANNOTATIONS: frozenset[str] = frozenset({HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE, ARGOCD_TRACKING_ID})
# what stands in a command line for a value that is not kept
REDACTED = "<redacted>"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HOOKS = ("postStart", "preStop")
# a flag: one or two dashes, then a name of letters, digits, '.', '_' and '-'; the rest (after '=') is its value
_FLAG = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9._-]*)(=.*)?", re.DOTALL)
# a program, as the first word of a container's `command`: a path or a name, no spaces, no '='
_PROGRAM = re.compile(r"[A-Za-z0-9_./+-]+")


def flag_names(argv: object, *, program: bool = False) -> list[str]:
    """A container's `command` or `args` with the flag names kept and every value redacted.

    `--name=value` and `-name=value` keep `--name=<redacted>`; `--name` and `-x` (one letter) are kept
    as they are; `-xvalue` (one dash, more than one letter: a short option with its value attached, as
    `-pPASSWORD`, or a Go-style flag) keeps `-x<redacted>`; `--` and `-` are kept; anything else (a
    positional value, the value after a flag, a shell script after `-c`) is `<redacted>`. With
    `program` (a `command`), its first word is kept when it is a path or a name (`/manager`,
    `/bin/sh`): the program, not a value."""
    if not isinstance(argv, list):
        return []
    out: list[str] = []
    for index, arg in enumerate(argv):
        if not isinstance(arg, str):
            out.append(REDACTED)
        elif (program and index == 0 and _PROGRAM.fullmatch(arg)) or arg in ("-", "--"):
            out.append(arg)
        elif (flag := _FLAG.fullmatch(arg)) is None:
            out.append(REDACTED)
        elif flag.group(2) is not None:
            out.append(f"{flag.group(1)}={REDACTED}")
        elif flag.group(1).startswith("--") or len(flag.group(1)) == 2:
            out.append(arg)
        else:
            out.append(f"{arg[:2]}{REDACTED}")
    return out


def snapshot_safe(obj: KubeObject) -> KubeObject:
    """In place: what a snapshot may keep of an object (module docstring). Every container found
    anywhere in it reduced by `container_names`, every `metadata.annotations` (the object's, a pod
    template's) to `KEPT_ANNOTATIONS`. Returns the object."""
    _reduce(obj)
    return obj


def _reduce(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in POD_CONTAINER_LISTS and isinstance(value, list):
                for container in value:
                    if isinstance(container, dict):
                        container_names(container)
            elif key == "metadata" and isinstance(value, dict):
                _kept_annotations(value)
            elif isinstance(value, dict | list):
                _reduce(value)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, dict | list):
                _reduce(item)


def _kept_annotations(metadata: dict[str, Any]) -> None:
    annotations = metadata.get("annotations")
    if annotations is None:
        return
    kept = {k: v for k, v in annotations.items() if k in KEPT_ANNOTATIONS} if isinstance(annotations, dict) else {}
    if kept:
        metadata["annotations"] = kept
    else:
        del metadata["annotations"]


def container_names(container: dict[str, Any]) -> dict[str, Any]:
    """In place: a container with its `command` and `args` reduced to flag names (`flag_names`), its
    environment values dropped (names and `valueFrom` kept), its probes' and lifecycle hooks' exec
    commands and HTTP header values dropped (the header's name, the port, path and scheme kept).
    Returns the container."""
    if "command" in container:
        container["command"] = flag_names(container["command"], program=True)
    if "args" in container:
        container["args"] = flag_names(container["args"])
    env = container.get("env")
    if isinstance(env, list):
        container["env"] = [
            {k: v for k, v in var.items() if k != "value"} if isinstance(var, dict) else var for var in env
        ]
    for probe in PROBES:
        _handler(container.get(probe))
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in LIFECYCLE_HOOKS:
            _handler(lifecycle.get(hook))
    return container


def _handler(handler: object) -> None:
    """A probe's or a lifecycle hook's action: `exec` without its command, `httpGet` without header values."""
    if not isinstance(handler, dict):
        return
    run = handler.get("exec")
    if isinstance(run, dict) and "command" in run:
        handler["exec"] = {k: v for k, v in run.items() if k != "command"}
    http = handler.get("httpGet")
    if isinstance(http, dict) and isinstance(http.get("httpHeaders"), list):
        http["httpHeaders"] = [
            {k: v for k, v in h.items() if k != "value"} if isinstance(h, dict) else {} for h in http["httpHeaders"]
        ]


def strings_in(value: object) -> Iterator[str]:
    """Every string of a JSON-like value (a dict's values, a list's items, at any depth), in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
