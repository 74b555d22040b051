"""Who removes which finalizer, and how to recognise that controller among the cluster's workloads.

A catalogue of well-known finalizers (`catalogue_data`, reference §6; the model in `catalogue_model`),
then heuristics for the rest: a finalizer is usually named after its controller's domain
(`kiali.io/finalizer`), and that domain is usually the group of the custom resource it sits on and a
word in the controller's name or image.
"""

from __future__ import annotations

import re
from functools import lru_cache

from bot.diagnosis.catalogue_data import ENTRIES, PROJECTS_WITHOUT_FINALIZERS
from bot.diagnosis.catalogue_model import (
    STANDARD_FINALIZERS,
    CatalogueEntry,
    Lease,
    Owner,
    RunsIn,
    Runtime,
    Workload,
)
from bot.domain.refs import KubeObject, meta, name_of

__all__ = [
    "PROJECTS_WITHOUT_FINALIZERS",
    "STANDARD_FINALIZERS",
    "CatalogueEntry",
    "Lease",
    "Owner",
    "RunsIn",
    "Runtime",
    "Workload",
    "domain_words",
    "entries",
    "entry",
    "lookup",
    "matching_workloads",
    "owner_for",
    "resources",
    "workload_text",
]

# the finalizers looked up are remembered (a namespace of a thousand CRD types has a thousand, each looked up by
# whose logs to read and by several rules); a bound, for the bot that diagnoses cluster after cluster
_REMEMBERED = 4096

# exact names
_EXACT_ENTRIES: dict[str, CatalogueEntry] = {e.finalizer: e for e in ENTRIES if not e.prefix}
_EXACT: dict[str, Owner] = {name: e.owner for name, e in _EXACT_ENTRIES.items()}

# prefixes (the finalizer starts with it), longest first so that the most specific family wins
_PREFIX_ENTRIES: tuple[CatalogueEntry, ...] = tuple(
    sorted((e for e in ENTRIES if e.prefix), key=lambda e: len(e.finalizer), reverse=True)
)
_PREFIXES: tuple[tuple[str, Owner], ...] = tuple((e.finalizer, e.owner) for e in _PREFIX_ENTRIES)


def entries() -> tuple[CatalogueEntry, ...]:
    """Every entry of the catalogue, in the order of `catalogue_data`."""
    return ENTRIES


@lru_cache(maxsize=_REMEMBERED)
def entry(finalizer: str) -> CatalogueEntry | None:
    """The catalogue's entry for a finalizer: its exact name first, else the longest prefix it starts with."""
    known = _EXACT_ENTRIES.get(finalizer)
    if known is not None:
        return known
    for family in _PREFIX_ENTRIES:
        if finalizer.startswith(family.finalizer):
            return family
    return None


def resources() -> tuple[tuple[str, str], ...]:
    """Every (API group, plural resource) a catalogued finalizer sits on, sorted, each once.

    What the remediation role grants by default; families that also sit on resources no list names in
    advance (`open_resources`) contribute the ones they list, the rest is for the operator to add.
    """
    return tuple(sorted({pair for e in ENTRIES for pair in e.resources}))


# words of a domain that say nothing about who owns it
_GENERIC = {
    "io", "com", "org", "net", "dev", "sh", "cloud", "k8s", "x-k8s", "kubernetes", "finalizer",
    "finalizers", "controller", "operator", "cleanup", "protection", "www", "apps", "api", "apis",
}  # fmt: skip


def lookup(finalizer: str) -> Owner | None:
    """The catalogue's owner of a finalizer, if it is a well-known one."""
    known = entry(finalizer)
    return known.owner if known is not None else None


@lru_cache(maxsize=_REMEMBERED)
def domain_words(finalizer: str, group: str = "") -> tuple[str, ...]:
    """The distinctive words of a finalizer's domain and of the resource's group.

    `kiali.io/finalizer` -> ("kiali",); `widgets.example.com` + `cleanup.example.com/x` -> ("example",)
    """
    domain = finalizer.split("/", 1)[0] if "/" in finalizer else ""
    words: list[str] = []
    for text in (domain, group):
        for word in re.split(r"[.\-/]", text.lower()):
            if word and word not in _GENERIC and len(word) > 2 and word not in words:
                words.append(word)
    return tuple(words)


@lru_cache(maxsize=_REMEMBERED)
def owner_for(finalizer: str, group: str = "") -> Owner:
    """The catalogue's owner, or one guessed from the domain (reasoning written by the caller)."""
    if finalizer == "kubernetes":
        # only meaningful in a Namespace's spec.finalizers (where the namespace controller removes it, and
        # the rules never ask); in any object's metadata.finalizers nothing removes it
        return Owner("nothing (the name 'kubernetes' is only meaningful on a Namespace)")
    known = lookup(finalizer)
    if known is not None:
        return known
    words = domain_words(finalizer, group)
    if words:
        return Owner(f"the controller of {finalizer.split('/', 1)[0] or group}", markers=words)
    return Owner(f"an unknown controller ({finalizer!r} names no domain)")


def workload_text(workload: KubeObject) -> str:
    """Everything that identifies a workload, lower-cased: names, labels, images, arguments."""
    # read directly rather than through meta()/labels_of(): a digest matches markers against every
    # workload of every cluster, so this runs hundreds of thousands of times
    m = meta(workload)
    parts = [str(m.get("name", "")), str(m.get("namespace", ""))]
    parts.extend(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
    template = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in template.get("containers") or ():
        parts.append(str(container.get("name", "")))
        parts.append(str(container.get("image", "")))
        parts.extend(str(a) for a in container.get("args") or ())
        parts.extend(str(a) for a in container.get("command") or ())
    return " ".join(parts).lower()


def matching_workloads(markers: tuple[str, ...], workloads: tuple[KubeObject, ...]) -> list[KubeObject]:
    """Workloads whose identity mentions any marker, best (most markers) first."""
    if not markers:
        return []
    lowered = [m.lower() for m in markers]
    scored = []
    for workload in workloads:
        text = workload_text(workload)
        score = 0
        for marker in lowered:
            if marker in text:
                score += 1
        if score:
            scored.append((-score, name_of(workload), workload))
    return [w for _, _, w in sorted(scored, key=lambda t: (t[0], t[1]))]
