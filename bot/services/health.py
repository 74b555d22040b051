"""Whether the process's worker pools can still take work (`/healthz` of `nsstuck serve`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def pool_problems(name: str, pool: ThreadPoolExecutor) -> list[str]:
    """What makes `pool` unable to run what is handed to it: shut down, broken (a worker failed to
    start), or a worker thread that died; [] when it is well."""
    if getattr(pool, "_shutdown", False):
        return [f"the {name} pool has been shut down"]
    if getattr(pool, "_broken", False):
        return [f"the {name} pool is broken"]
    dead = sum(1 for thread in list(getattr(pool, "_threads", ())) if not thread.is_alive())
    return [f"{dead} thread(s) of the {name} pool have died"] if dead else []
