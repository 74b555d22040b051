"""Run the emulated Kubernetes API from the command line.

    python -m tests.fakes.kubeapi [--scenario NAME] [--latency-ms N] [--port P]
                                  [--kubeconfig PATH] [--fake-clock] [--seed N]

Prints the URL and the kubeconfig path, then serves until SIGINT/SIGTERM with the controllers
running in the background.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from .clock import FakeClock, RealClock
from .emulator import Emulator


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
    args = parser.parse_args(argv)

    # scenarios advance a FakeClock to let grace periods and controller delays pass
    clock = FakeClock() if args.fake_clock or args.scenario else RealClock()
    emu = Emulator(clock=clock, seed=args.seed, controllers=not args.no_controllers, port=args.port)
    emu.start()
    if args.scenario:
        from . import scenarios  # the scenario library (controllers half)

        try:
            scenarios.apply_scenario(emu, args.scenario)
        except KeyError as err:
            print(err.args[0] if err.args else err, file=sys.stderr)
            emu.stop()
            return 2
    if args.latency_ms:
        emu.knobs.latency(args.latency_ms)
    path = args.kubeconfig or Path(tempfile.mkdtemp(prefix="kubeapi-")) / "kubeconfig"
    token = emu.admin_token if args.admin else None
    emu.write_kubeconfig(path, token=token)
    if not args.no_controllers:
        emu.run_controllers_in_background()
    print(f"URL: {emu.url}", flush=True)
    print(f"KUBECONFIG: {path}", flush=True)

    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    done.wait()
    emu.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
