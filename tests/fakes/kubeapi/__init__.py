"""An emulated Kubernetes API server for tests (see README.md)."""

from __future__ import annotations

from .clock import FakeClock, RealClock
from .emulator import ADMIN_IDENTITY, USER_IDENTITY, Controller, Emulator
from .journal import Journal, Journaled
from .knobs import FaultRule, ForbidRule, Knobs, LatencyRule

__all__ = [
    "ADMIN_IDENTITY",
    "USER_IDENTITY",
    "Controller",
    "Emulator",
    "FakeClock",
    "FaultRule",
    "ForbidRule",
    "Journal",
    "Journaled",
    "Knobs",
    "LatencyRule",
    "RealClock",
]
