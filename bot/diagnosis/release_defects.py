"""Known defects of Kubernetes releases that hold namespaces, keyed by version range.

Each entry is read from the Kubernetes changelogs and the defect's thread: the releases it affects (per
minor, the first patch release that carries the fix), the evidence by which a rule recognises it, and its
remedy, the upgrade that fixes it. A rule names a defect only where both hold: the cluster's /version is
an affected release, and the evidence the entry describes is seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ReleaseDefect:
    issue: str  # where the defect and its mechanism were established
    title: str
    # affected minor -> the first patch release of that minor with the fix
    fixed_in: MappingProxyType[int, int]
    fixed_by: tuple[str, ...]  # the pull requests that carry the fix into each minor
    evidence: str  # what a cluster with the defect shows, as the rule checks it
    first_unaffected_minor: int  # every minor from it on has the fix

    def affected(self, minor: int | None, patch: int | None) -> bool | None:
        """True: a release with the defect; False: one without it; None: cannot tell (no version, or a
        minor of the range without its patch number)."""
        if minor is None:
            return None
        if minor not in self.fixed_in:
            return False
        if patch is None:
            return None
        return patch < self.fixed_in[minor]

    @property
    def ranges(self) -> str:
        return " and ".join(f"1.{m}.0-1.{m}.{p - 1}" for m, p in sorted(self.fixed_in.items()))

    @property
    def upgrade(self) -> str:
        fixes = ", ".join(
            f"1.{m}.{p} ({pr})" for (m, p), pr in zip(sorted(self.fixed_in.items()), self.fixed_by, strict=True)
        )
        return f"{fixes}, or any 1.{self.first_unaffected_minor} and later"


# kubernetes/kubernetes#119662: the aggregator of 1.27/1.28 marked Stale an aggregated API whose /apis ignores
# the Accept header (it fell back to the backend's legacy per-version document only on a 406), so the namespace
# controller's discovery failed and every namespace stayed Terminating. Fixed by #119870, cherry-picked as
# #120360 into 1.27.6 and #120359 into 1.28.2 (CHANGELOG-1.27.md, CHANGELOG-1.28.md).
STALE_AGGREGATED_DISCOVERY = ReleaseDefect(
    issue="kubernetes/kubernetes#119662",
    title="the aggregator marks Stale a backend whose /apis ignores the Accept header",
    fixed_in=MappingProxyType({27: 6, 28: 2}),
    fixed_by=("kubernetes/kubernetes#120360", "kubernetes/kubernetes#120359"),
    evidence=(
        "aggregated discovery lists a group version Stale while its APIService is Available and its "
        "per-version document answers"
    ),
    first_unaffected_minor=29,
)

DEFECTS: tuple[ReleaseDefect, ...] = (STALE_AGGREGATED_DISCOVERY,)
