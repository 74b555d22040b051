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
"""

from __future__ import annotations

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
