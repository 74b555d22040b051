"""The shared bots' fixtures (tests/approvals/_shared.py)."""

from tests.approvals._shared import flow, lane, shared_bots

__all__ = ["flow", "lane", "shared_bots"]
