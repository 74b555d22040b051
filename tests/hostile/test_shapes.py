"""The shapes of the payloads that `bot.slack.shapes.problem` judges by their `type`, each case written
out: the property tests of test_payloads.py and test_socket_mode.py reach these only when their random
draws do."""

from __future__ import annotations

from typing import Any

import pytest

from bot.slack.shapes import problem

API = "https://slack.com/api/"
USER = {"id": "U0123ABCD"}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"type": "view_submission", "view": "modal", "user": USER}, "`view` is not an object"),
        ({"type": "view_submission", "view": {"id": "V1"}, "user": USER}, "`view` is not a view with a type"),
        ({"type": "view_closed", "view": {"type": "modal"}, "user": {"id": "not a user"}}, "`user.id` is not"),
        ({"type": "block_suggestion", "user": {"id": "W"}}, "`user.id` is not a Slack user ID"),
        ({"type": "block_suggestion", "user": {"id": 7}}, "`user.id` is not a string"),
        ({"type": "view_submission", "view": {"type": "modal"}, "user": USER}, None),
        ({"type": "block_suggestion", "user": USER}, None),
        ({"type": "url_verification", "challenge": ""}, "`challenge` is not a short string"),
        ({"type": "url_verification", "challenge": ["x"]}, "`challenge` is not a short string"),
        ({"type": "url_verification", "challenge": "x" * 10_000}, "`challenge` is not a short string"),
        ({"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}, None),
    ],
)
def test_a_payload_of_each_type_is_judged_by_its_own_fields(body: dict[str, Any], said: str | None) -> None:
    found = problem(body, api_url=API)
    if said is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(said), found
