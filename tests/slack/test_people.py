"""Who a `users.info` user is to our installation (the rule; the running bot applies it in
tests/approvals/test_who_decides.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain.people import Standing
from bot.slack.installation import Installation
from bot.slack.people import standing_of

WORKSPACE = Installation(app_id="A111", team_id="T111")
GRID = Installation(app_id="A111", team_id="T111", enterprise_id="E0ORG")
ORG_WIDE = Installation(app_id="A111", team_id="", enterprise_id="E0ORG", org_wide=True)


def _user(**fields: Any) -> dict[str, Any]:
    return {"id": "U0AAAAAAA", "team_id": "T111", "is_restricted": False, "is_ultra_restricted": False, **fields}


CASES = [
    ("a member", WORKSPACE, _user(), Standing.MEMBER),
    ("a multi-channel guest", WORKSPACE, _user(is_restricted=True), Standing.GUEST),
    ("a single-channel guest", WORKSPACE, _user(is_restricted=True, is_ultra_restricted=True), Standing.GUEST),
    ("a stranger of our team", WORKSPACE, _user(is_stranger=True), Standing.EXTERNAL),
    ("another workspace", WORKSPACE, _user(team_id="T0OTHER"), Standing.EXTERNAL),
    ("no team at all", WORKSPACE, _user(team_id=None), Standing.EXTERNAL),
    (
        "another organisation's person",
        GRID,
        _user(team_id="T0OTHER", enterprise_user={"enterprise_id": "E0OTHER"}),
        Standing.EXTERNAL,
    ),
    (
        "a sister workspace of our organisation",
        GRID,
        _user(team_id="T0SISTER", enterprise_user={"enterprise_id": "E0ORG"}),
        Standing.MEMBER,
    ),
    (
        "a guest of a sister workspace",
        GRID,
        _user(team_id="T0SISTER", enterprise_user={"enterprise_id": "E0ORG"}, is_restricted=True),
        Standing.GUEST,
    ),
    (
        "an organisation-wide install, one of ours",
        ORG_WIDE,
        _user(enterprise_user={"enterprise_id": "E0ORG"}),
        Standing.MEMBER,
    ),
    ("an organisation-wide install, no organisation", ORG_WIDE, _user(), Standing.EXTERNAL),
    (
        "our enterprise id where it is a string only",
        GRID,
        _user(team_id="T0X", enterprise_user="E0ORG"),
        Standing.EXTERNAL,
    ),
    (
        "is_stranger as a string is not taken as true, the team decides",
        WORKSPACE,
        _user(is_stranger="yes"),
        Standing.MEMBER,
    ),
]


@pytest.mark.parametrize(("case", "ours", "user", "expected"), CASES, ids=[c[0] for c in CASES])
def test_standing(case: str, ours: Installation, user: dict[str, Any], expected: Standing) -> None:
    assert standing_of(user, ours) is expected
