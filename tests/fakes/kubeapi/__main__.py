"""Run the emulated Kubernetes API from the command line.

    python -m tests.fakes.kubeapi [--scenario NAME] [--latency-ms N] [--port P]
                                  [--kubeconfig PATH] [--fake-clock] [--seed N]
    python -m tests.fakes.kubeapi --clusters N --kubeconfig-dir DIR [--first-index K]
                                  [--build MODULE:FUNCTION] [--no-background-controllers] ...

Prints the URL and the kubeconfig path, then serves until SIGINT/SIGTERM with the controllers
running in the background. With --clusters N it serves N independent emulators from this one
process (seeds seed+K, seed+K+1, ...), writes DIR/<index>.kubeconfig for each, prints one
`CLUSTER <index> <url> <kubeconfig>` line per emulator and then `READY`. --build calls
FUNCTION(emu, index) on each started emulator (after the scenario, before the latency is set), so a
benchmark can fill many clusters in process instead of over HTTP.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from .clock import FakeClock, RealClock
from .emulator import Emulator


def _builder(spec: str) -> Callable[[Emulator, int], Any]:
    module, _, function = spec.partition(":")
    if not module or not function:
        raise SystemExit(f"--build wants MODULE:FUNCTION, not {spec!r}")
    builder: Callable[[Emulator, int], Any] = getattr(importlib.import_module(module), function)
    return builder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.kubeapi", description=__doc__.splitlines()[1])
    parser.add_argument("--scenario", help="build this scenario from the scenario library before serving")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay every user request by N ms")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--kubeconfig", type=Path, help="where to write the kubeconfig (default: a temp file)")
    parser.add_argument(
        "--fake-clock",
        action="store_true",
        help="use a FakeClock (2026-11-20T08:00:00Z) instead of the wall clock; implied by --scenario",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--admin", action="store_true", help="write the kubeconfig with the admin token")
    parser.add_argument("--no-controllers", action="store_true", help="do not run the in-cluster controllers")
    parser.add_argument(
        "--no-background-controllers",
        action="store_true",
        help="install the controllers (a --build function may settle them) but never run them in the background",
    )
    parser.add_argument("--clusters", type=int, default=1, help="serve N emulators from this process")
    parser.add_argument("--first-index", type=int, default=0, help="index of the first emulator (--clusters)")
    parser.add_argument("--kubeconfig-dir", type=Path, help="with --clusters: write DIR/<index>.kubeconfig")
    parser.add_argument("--build", help="MODULE:FUNCTION called as FUNCTION(emu, index) on each emulator")
    args = parser.parse_args(argv)
    if args.clusters < 1:
        parser.error("--clusters must be at least 1")
    if args.clusters > 1 and (args.kubeconfig_dir is None or args.port or args.kubeconfig):
        parser.error("--clusters N > 1 wants --kubeconfig-dir, and neither --port nor --kubeconfig")
    build = _builder(args.build) if args.build else None

    emulators: list[tuple[int, Emulator, Path]] = []
    try:
        for offset in range(args.clusters):
            index = args.first_index + offset
            # scenarios advance a FakeClock to let grace periods and controller delays pass
            clock = FakeClock() if args.fake_clock or args.scenario else RealClock()
            emu = Emulator(clock=clock, seed=args.seed + index, controllers=not args.no_controllers, port=args.port)
            emulators.append((index, emu, Path()))
            emu.start()
            if args.scenario:
                from . import scenarios  # the scenario library (controllers half)

                try:
                    scenarios.apply_scenario(emu, args.scenario)
                except KeyError as err:
                    print(err.args[0] if err.args else err, file=sys.stderr)
                    return 2
            if build is not None:
                build(emu, index)
            if args.latency_ms:
                emu.knobs.latency(args.latency_ms)
            if args.kubeconfig_dir is not None:
                path = args.kubeconfig_dir / f"{index:03d}.kubeconfig"
            else:
                path = args.kubeconfig or Path(tempfile.mkdtemp(prefix="kubeapi-")) / "kubeconfig"
            emu.write_kubeconfig(path, token=emu.admin_token if args.admin else None)
            emulators[-1] = (index, emu, path)
            if not args.no_controllers and not args.no_background_controllers:
                emu.run_controllers_in_background()
        # what was built stays: keep it out of the collector's full passes, which over millions of stored
        # objects would stop every request of this process for a good while (a Go API server has no such pauses)
        gc.freeze()
        if args.clusters == 1 and args.kubeconfig_dir is None:
            print(f"URL: {emulators[0][1].url}", flush=True)
            print(f"KUBECONFIG: {emulators[0][2]}", flush=True)
        else:
            for index, emu, path in emulators:
                print(f"CLUSTER {index} {emu.https_url} {path}", flush=True)
            print("READY", flush=True)

        done = threading.Event()

        def _stop(signum: int, frame: FrameType | None) -> None:
            done.set()

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        done.wait()
        return 0
    finally:
        for _, emu, _ in emulators:
            emu.stop()


if __name__ == "__main__":
    raise SystemExit(main())
