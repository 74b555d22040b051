"""Who a person is to this installation, as far as the approval policy cares."""

from __future__ import annotations

from enum import Enum


class Standing(Enum):
    MEMBER = "member"  # a full member of our workspace (or of our organisation, on Enterprise Grid)
    EXTERNAL = "external"  # someone of another organisation (a Slack Connect channel), or a stranger
    GUEST = "guest"  # a multi-channel or single-channel guest of our workspace
    UNKNOWN = "unknown"  # Slack could not say just now (an error, a timeout, no such user)
