"""Benchmark: Socket Mode recovery, Bolt's default client against ours, in the same run.

    make bench            (or: .venv/bin/python -m bench.socket)

A Bolt app with one slash command (acknowledged at once) runs on each Socket Mode handler in turn,
against the Slack emulator (tests/fakes/slackapi), and the run measures:

- silent drop: the connection's network path goes dead without a FIN, RST or close frame (the
  emulator stops reading it: no pongs); seconds until the client has a new connection;
- refresh: Slack sends `disconnect` (`refresh_requested`) and closes the old connection 5 s later;
  the acknowledgement time of a command sent on the new connection as soon as it is open.

The baseline is `slack_bolt.adapter.socket_mode.SocketModeHandler` with its defaults (a ping every
10 s, stale after 4 pings); ours is bot/slack/socket_mode.py with nsstuck's defaults (a ping every 2 s,
replaced after 6 s without a pong). Targets: a silent drop noticed within 10 s, the first command
after a refresh acknowledged within 1 s (Slack's own deadline is 3 s).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler as BoltHandler
from slack_sdk import WebClient

from bench._report import finish
from bot.slack.socket_mode import SocketModeHandler as OurHandler
from tests.fakes.slackapi import SlackEmulator
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL, populate_workspace

Factory = Callable[[App, str], Any]


def _app(emu: SlackEmulator) -> App:
    app = App(
        token=emu.bot_token,
        signing_secret=emu.signing_secret,
        client=WebClient(token=emu.bot_token, base_url=emu.api_url),
        token_verification_enabled=False,
    )

    @app.command("/nsstuck")
    def command(ack: Callable[..., None]) -> None:
        ack("ok")

    return app


def _measure(factory: Factory, *, drops: int, refreshes: int) -> dict[str, list[float]]:
    emu = populate_workspace(SlackEmulator()).start()
    handler = factory(_app(emu), emu.app_token)
    handler.connect()
    socket = emu.socket
    noticed: list[float] = []
    acked: list[float] = []
    try:
        socket.wait_for_connections(1, timeout=15)
        for _ in range(drops):
            current = socket.connections()[-1]
            time.sleep(1.0)
            started = time.monotonic()
            socket.silence(current)
            socket.wait_for_new_connection(after=current.id, timeout=120)
            noticed.append(time.monotonic() - started)
        for _ in range(refreshes):
            current = socket.connections()[-1]
            socket.send_disconnect(reason="refresh_requested", connection=current, close_after=5.0)
            fresh = socket.wait_for_new_connection(after=current.id, timeout=15)
            ack = emu.socket_mode.slash_command(
                "/nsstuck", "help", user=ALICE, channel=OPS_CHANNEL, timeout=10, connection=fresh
            )
            acked.append(ack.elapsed)
            time.sleep(5.5)  # the old connection gone before the next round
    finally:
        socket.drop_all()
        handler.close()
        emu.stop()
    return {"silent_drop_noticed_s": noticed, "ack_after_refresh_s": acked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--drops", type=int, default=2, help="silent drops per client")
    parser.add_argument("--refreshes", type=int, default=3, help="refreshes per client")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    runs: dict[str, dict[str, list[float]]] = {}
    clients: dict[str, Factory] = {
        "bolt_default": BoltHandler,
        "nsstuck": lambda app, token: OurHandler(app, token, ping_interval=2.0, stale_after=6.0),
    }
    for name, factory in clients.items():
        runs[name] = _measure(factory, drops=args.drops, refreshes=args.refreshes)
        drop, ack = runs[name]["silent_drop_noticed_s"], runs[name]["ack_after_refresh_s"]
        print(
            f"{name:>13}: silent drop noticed after {', '.join(f'{x:.1f}' for x in drop)} s; "
            f"first ack after a refresh {', '.join(f'{x * 1000:.0f}' for x in ack)} ms"
        )
    ours, base = runs["nsstuck"], runs["bolt_default"]
    worst_drop, worst_ack = max(ours["silent_drop_noticed_s"]), max(ours["ack_after_refresh_s"])
    figures: dict[str, Any] = {
        "runs": runs,
        "silent_drop_speedup": round(
            statistics.median(base["silent_drop_noticed_s"]) / statistics.median(ours["silent_drop_noticed_s"]), 1
        ),
        "refresh_ack_speedup": round(
            statistics.median(base["ack_after_refresh_s"]) / statistics.median(ours["ack_after_refresh_s"]), 1
        ),
    }
    print(
        f"ours vs Bolt's default: silent drop {figures['silent_drop_speedup']}x sooner, "
        f"ack after a refresh {figures['refresh_ack_speedup']}x sooner"
    )
    checks = [
        (f"silent drop noticed within {worst_drop:.1f} s (worst)", worst_drop < 10.0, "< 10 s"),
        (f"first ack after a refresh within {worst_ack * 1000:.0f} ms (worst)", worst_ack < 1.0, "< 1 s"),
    ]
    return finish(figures, checks, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
