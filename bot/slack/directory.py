"""Who is in what, as Slack says: the members of a user group (for the approval decision: read fresh,
every time) and the members of a channel (for what the App Home shows: cached briefly). A person's
own `users.info` is read in `bot.slack.people`.

What this relies on of Slack's Web API:

- `usergroups.users.list` (scope `usergroups:read`, rate tier 2: 20+ a minute) answers a group's
  user ids in one page. It is called on every Approve and Reject click that needs the group, and its
  answer is never kept: a person removed from the group can no longer approve at the next click. An
  error (the group gone, Slack down, rate-limited) refuses the click with "try again" (closed, not
  open); an answer of the wrong shape counts nobody as a member.
- `conversations.members` (scopes `channels:read` for public channels, `groups:read` for private
  ones, where the bot must be a member; rate tier 4: 100+ a minute) pages a channel's member ids by
  `cursor` (`response_metadata.next_cursor`, empty on the last page; Slack recommends pages of at most
  200). Only the channels named in the config are read, at most `MAX_MEMBER_PAGES` pages each, and a
  channel's members are kept `MEMBERS_CACHE_SECONDS` (60 s) for display only; a channel that cannot be
  read counts nobody as a member for 10 s (the Home tab shows less, never more).
"""

from __future__ import annotations

import logging
import threading
import time

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

log = logging.getLogger(__name__)

MEMBERS_CACHE_SECONDS = 60.0
FAILED_CACHE_SECONDS = 10.0
MEMBERS_PAGE = 200
MAX_MEMBER_PAGES = 50  # 10,000 members; past that a channel's other members do not see its clusters at home


class GroupsUnavailable(Exception):
    """Slack did not say who is in a user group (an error, a timeout)."""


class GroupDirectory:
    def __init__(self, client: WebClient) -> None:
        self.client = client

    def members(self, group: str) -> frozenset[str]:
        """The members of a Slack user group, asked now; GroupsUnavailable when Slack does not answer."""
        try:
            response = self.client.usergroups_users_list(usergroup=group)
        except (SlackClientError, OSError, ValueError) as e:
            error = e.response.get("error") if hasattr(e, "response") else e.__class__.__name__
            log.warning("cannot resolve user group %s: %s", group, error)
            raise GroupsUnavailable(group) from None
        users = response.get("users")
        # only a list of user ids counts: any other shape approves nobody (and says so)
        if not isinstance(users, list):
            log.warning("cannot resolve user group %s: users is not a list", group)
            return frozenset()
        return frozenset(u for u in users if isinstance(u, str))


class ChannelMembers:
    """Channel members for display (the App Home), each channel's kept for a minute."""

    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._kept: dict[str, tuple[float, frozenset[str]]] = {}  # channel -> (until, members)
        self._lock = threading.Lock()

    def is_member(self, user: str, channel: str) -> bool:
        return user in self.members(channel)

    def members(self, channel: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(channel)
            if kept and now < kept[0]:
                return kept[1]
        found = self._read(channel)
        # a channel that could not be read is asked again sooner
        keep = MEMBERS_CACHE_SECONDS if found is not None else FAILED_CACHE_SECONDS
        with self._lock:
            self._kept[channel] = (now + keep, found or frozenset())
        return found or frozenset()

    def _read(self, channel: str) -> frozenset[str] | None:
        members: set[str] = set()
        cursor = ""
        for _ in range(MAX_MEMBER_PAGES):
            try:
                response = self.client.conversations_members(channel=channel, limit=MEMBERS_PAGE, cursor=cursor or None)
            except (SlackClientError, OSError, ValueError) as e:
                error = e.response.get("error") if hasattr(e, "response") else e.__class__.__name__
                log.warning("cannot read the members of channel %s: %s", channel, error)
                return None
            page = response.get("members")
            if isinstance(page, list):
                members.update(m for m in page if isinstance(m, str))
            metadata = response.get("response_metadata")
            cursor = str(metadata.get("next_cursor") or "") if isinstance(metadata, dict) else ""
            if not cursor:
                return frozenset(members)
        log.warning("channel %s has more than %d members; only those were read", channel, len(members))
        return frozenset(members)
