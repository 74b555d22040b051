"""discovery_failure: discovery fails for a reason other than an unavailable aggregated API.

A group version of a Local APIService (the API server serves it itself) that fails is one: during an
upgrade an API server that does not register that version yet answers 404 for it (case 012).

The namespace controller's condition says what failed when it last tried; our own discovery says
what fails now. Failing then but working now: the controller will get past it on its next retry.
Our own timeouts and 403s are gaps in our evidence, not causes.
"""

from __future__ import annotations

from bot.diagnosis import remedies
from bot.diagnosis.aggregated import group_version_of
from bot.diagnosis.apiservices import explained_group_versions
from bot.diagnosis.context import Context
from bot.domain.findings import Cause, Finding
from bot.domain.refs import ObjectRef

_OUR_PROBLEMS = (401, 403, 429, None)


def findings(ctx: Context) -> list[Finding]:
    explained = explained_group_versions(ctx)
    now_failing = {
        gv.group_version: gv
        for gv in ctx.snapshot.failing_group_versions()
        if gv.group_version not in explained and gv.status_code not in _OUR_PROBLEMS
    }
    reported = {gv: e for gv, e in ctx.facts.discovery_failures.items() if gv not in explained}
    available_now = {gv.group_version for gv in ctx.snapshot.group_versions if gv.available}
    out = []
    recovered = sorted(gv for gv in reported if gv in available_now and gv not in now_failing)
    still = sorted((set(reported) - set(recovered)) | set(now_failing))
    condition = ctx.facts.line("NamespaceDeletionDiscoveryFailure") or ""
    if still:
        evidence = [condition] if set(still) & set(reported) else []
        evidence.extend(
            f"aggregated discovery lists {gv} with freshness Stale"
            if now_failing[gv].stale and now_failing[gv].legacy_answered
            else f"GET /apis/{gv} answered {now_failing[gv].status_code}: {now_failing[gv].error}"
            for gv in still
            if gv in now_failing
        )
        local = [
            a
            for a in ctx.snapshot.apiservices
            if not (a.get("spec") or {}).get("service") and group_version_of(a) in still
        ]
        evidence.extend(
            f"APIService {ObjectRef.of(a, resource='apiservices').name} is Local: the API server serves "
            f"{group_version_of(a)} itself (an API server that does not register it answers 404)"
            for a in local
        )
        out.append(
            Finding(
                cause=Cause.DISCOVERY_FAILURE,
                blocking=True,
                summary=f"discovery fails for {', '.join(still)} and no aggregated APIService explains it",
                objects=tuple(ObjectRef.of(a, resource="apiservices") for a in local),
                evidence=tuple(e for e in evidence if e),
                remedies=(
                    remedies.investigate(
                        "Find out why these group versions fail discovery (a CRD with a broken version, a stale "
                        "registration, API servers of different versions during an upgrade, an API server problem)",
                        [f"kubectl get --raw /apis/{gv}" for gv in still if "/" in gv][:3],
                    ),
                ),
            )
        )
    if recovered:
        out.append(
            Finding(
                cause=Cause.DISCOVERY_FAILURE,
                blocking=False,
                summary=f"discovery of {', '.join(recovered)} failed when the namespace controller last tried, "
                "and works now",
                evidence=(condition, *(f"GET /apis/{gv} answers now" for gv in recovered)),
                remedies=(
                    remedies.wait(
                        "The namespace controller retries (at the latest on its 5-minute resync) and then finishes"
                    ),
                ),
            )
        )
    if ctx.facts.parsing_failure:
        out.append(
            Finding(
                cause=Cause.DISCOVERY_FAILURE,
                blocking=True,
                summary="the namespace controller cannot parse some group versions",
                evidence=(ctx.facts.line("NamespaceDeletionGroupVersionParsingFailure") or "",),
                remedies=(remedies.investigate("Find the API registration with an invalid group version"),),
            )
        )
    return out
