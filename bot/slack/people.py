"""Who a person is, from `users.info` (scope `users:read`, rate tier 4: 100+ a minute), asked each time
and never kept: whether someone is a guest or from another organisation can change at any time.

`People.standing`, at each Request and Approve click on a cluster that does not allow external users:

- external: `is_stranger` (someone the workspace shares no channel with), or a `team_id` that is not
  ours with an `enterprise_user.enterprise_id` that is not ours either (a person of another
  organisation in a Slack Connect channel; on Enterprise Grid, a person of any workspace of our
  organisation is one of ours);
- guest: `is_restricted` (multi-channel guest) or `is_ultra_restricted` (single-channel guest);
- unknown: Slack did not answer, or answered an error (`user_not_found`...) or a user of the wrong
  shape: the click is refused with "try again".

`PeopleDirectory.email_of`, for `act_as_approver` with `impersonation.email`: the e-mail of the
approver's profile (`users:read.email`), read right before the change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from bot.domain.people import Standing
from bot.slack.installation import Installation
from bot.slack.shapes import USER_ID

log = logging.getLogger(__name__)


def standing_of(user: Mapping[str, Any], ours: Installation) -> Standing:
    """A `users.info` user as our installation sees them."""
    if user.get("is_stranger") is True:
        return Standing.EXTERNAL
    team = user.get("team_id")
    enterprise_user = user.get("enterprise_user")
    enterprise = enterprise_user.get("enterprise_id") if isinstance(enterprise_user, Mapping) else None
    ours_by_team = bool(ours.team_id) and team == ours.team_id
    ours_by_enterprise = bool(ours.enterprise_id) and enterprise == ours.enterprise_id
    if not (ours_by_team or ours_by_enterprise):
        return Standing.EXTERNAL
    if user.get("is_restricted") is True or user.get("is_ultra_restricted") is True:
        return Standing.GUEST
    return Standing.MEMBER


def read_user(client: WebClient, user: str) -> Mapping[str, Any] | None:
    """`users.info`'s user, asked now; None (and a warning in the log) when Slack does not answer, answers
    an error, or answers another user or none."""
    if not USER_ID.fullmatch(user):
        return None
    try:
        response = client.users_info(user=user)
    except (SlackClientError, OSError, ValueError) as e:
        error = e.response.get("error") if hasattr(e, "response") else e.__class__.__name__
        log.warning("users.info for %s failed: %s", user, error)
        return None
    found = response.get("user")
    if not isinstance(found, Mapping) or found.get("id") != user:
        log.warning("users.info for %s answered no such user", user)
        return None
    return found


class People:
    def __init__(self, client: WebClient, ours: Installation) -> None:
        self.client = client
        self.ours = ours

    def standing(self, user: str) -> Standing:
        """Asked of Slack now; UNKNOWN when it does not say."""
        found = read_user(self.client, user)
        return Standing.UNKNOWN if found is None else standing_of(found, self.ours)


class PeopleDirectory:
    """A Slack user's e-mail from their profile (the app needs `users:read.email`)."""

    def __init__(self, client: WebClient) -> None:
        self.client = client

    def email_of(self, user: str) -> str | None:
        """None when Slack does not say (then the approver has no identity and the change is refused)."""
        found = read_user(self.client, user)
        profile = found.get("profile") if found is not None else None
        email = profile.get("email") if isinstance(profile, Mapping) else None
        return email if isinstance(email, str) and email else None
