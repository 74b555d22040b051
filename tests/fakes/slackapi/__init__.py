"""An emulated Slack platform for tests: Web API, response_url, Socket Mode and request drivers (see README.md)."""

from __future__ import annotations

from .blockkit import Limits, validate_blocks, validate_view
from .clock import FakeClock, wall_clock
from .driver import Delivery, HttpDriver, SignedRequest, SocketModeDriver, slack_signature
from .emulator import SlackEmulator
from .faults import FaultRule, JournalEntry
from .payloads import PayloadBuilder
from .ratelimit import RateLimiter
from .render import render_blocks, render_message, render_view
from .socketmode import Ack, AckTimeout, NotConnected, SocketConnection, SocketModeServer
from .state import Channel, Identity, SlackError, User, UserGroup

__all__ = [
    "Ack",
    "AckTimeout",
    "Channel",
    "Delivery",
    "FakeClock",
    "FaultRule",
    "HttpDriver",
    "Identity",
    "JournalEntry",
    "Limits",
    "NotConnected",
    "PayloadBuilder",
    "RateLimiter",
    "SignedRequest",
    "SlackEmulator",
    "SlackError",
    "SocketConnection",
    "SocketModeDriver",
    "SocketModeServer",
    "User",
    "UserGroup",
    "render_blocks",
    "render_message",
    "render_view",
    "slack_signature",
    "validate_blocks",
    "validate_view",
    "wall_clock",
]
