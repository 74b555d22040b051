"""Action ids of every interactive element the bot posts, in one place (Bolt routes on them)."""

from __future__ import annotations

import re

# "nsstuck_request_remedy:<n>" (ids must be unique within a block); value: "<diagnosis run id>:<remedy id>"
REQUEST_REMEDY = "nsstuck_request_remedy"
# \Z, not $: `$` also matches before a final newline, and "nsstuck_approve\n" is not one of ours
REQUEST_REMEDY_PATTERN = re.compile(r"^nsstuck_request_remedy(:[0-9]{1,6})?\Z")
APPROVE = "nsstuck_approve"  # value: the request id
REJECT = "nsstuck_reject"  # value: the request id
