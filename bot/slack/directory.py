"""Who is in a Slack user group (usergroups.users.list), for the approval policy, and a person's e-mail
(users.info), for acting as the approver."""

from __future__ import annotations

import logging
import threading
import time

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

GROUP_CACHE_SECONDS = 60.0


class GroupDirectory:
    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def members(self, group: str) -> frozenset[str]:
        """The members of a Slack user group, cached for a minute."""
        now = time.monotonic()
        with self._lock:
            cached = self._groups.get(group)
            if cached and now - cached[0] < GROUP_CACHE_SECONDS:
                return cached[1]
        try:
            response = self.client.usergroups_users_list(usergroup=group)
            users = response.get("users")
            # only a list of user ids counts: any other shape approves nobody (and says so)
            members = frozenset(u for u in users if isinstance(u, str)) if isinstance(users, list) else frozenset()
            if not isinstance(users, list):
                log.warning("cannot resolve user group %s: users is not a list", group)
        except SlackApiError as e:
            log.warning("cannot resolve user group %s: %s", group, e.response.get("error"))
            members = frozenset()
        with self._lock:
            self._groups[group] = (now, members)
        return members


class PeopleDirectory:
    """A Slack user's e-mail from their profile (users.info; the app needs `users:read.email`)."""

    def __init__(self, client: WebClient) -> None:
        self.client = client

    def email_of(self, user: str) -> str | None:
        try:
            response = self.client.users_info(user=user)
        except SlackApiError as e:
            log.warning("cannot read the profile of %s: %s", user, e.response.get("error"))
            return None
        except (OSError, ValueError) as e:  # Slack did not answer: no identity now, the change is refused
            log.warning("cannot read the profile of %s: %s", user, e.__class__.__name__)
            return None
        profile = (response.get("user") or {}).get("profile") or {}
        email = profile.get("email") if isinstance(profile, dict) else None
        return email if isinstance(email, str) and email else None
