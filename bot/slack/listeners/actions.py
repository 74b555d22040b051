"""The remediation buttons: a remedy's Request button files a request in the thread, approvers decide
with Approve and Reject, and the outcome is said in the same thread (by the remediation use case,
through the notifier). Every listener acknowledges first (Slack wants an answer within 3 s); refusals
are ephemeral, and every decision lives in the database."""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk.errors import SlackApiError

from bot.errors import UnknownClusterError, UserError
from bot.logs import log_context
from bot.remediation.requests import VoteKind
from bot.services.remediating import Remediation
from bot.slack import ids
from bot.slack.directory import GroupDirectory, GroupsUnavailable
from bot.slack.notifier import SlackNotifier
from bot.slack.people import People
from bot.slack.shapes import click_channel

log = logging.getLogger(__name__)

# the values the bot puts on its buttons, exactly: "<run id>:<remedy id>" and "<request id>" (ASCII
# digits only: int() would also take " 1", "1_0" or "١", and an id past 2**63 breaks the query)
_REMEDY_VALUE = re.compile(r"([1-9][0-9]{0,17}):([A-Za-z0-9_-]{1,64})")
_REQUEST_VALUE = re.compile(r"[1-9][0-9]{0,17}")
NOT_OURS = "That button is not one of nsstuck's."


class ActionListener:
    def __init__(
        self, *, remediation: Remediation, slack: SlackNotifier, directory: GroupDirectory, people: People
    ) -> None:
        self.remediation = remediation
        self.slack = slack
        self.directory = directory
        self.people = people

    def register(self, app: App) -> None:
        app.action(ids.REQUEST_REMEDY_PATTERN)(self.on_request)
        app.action(ids.APPROVE)(self.on_approve)
        app.action(ids.REJECT)(self.on_reject)

    def _tell(self, body: dict[str, Any], text: str) -> None:
        """An ephemeral answer to whoever clicked, in the thread they clicked in: through the click's
        response_url (which reaches people who are not members of the channel), else the Web API."""
        if body.get("response_url"):
            try:
                Respond(response_url=str(body["response_url"]))(
                    text=text, response_type="ephemeral", replace_original=False
                )
                return
            except (SlackApiError, OSError, ValueError) as e:
                log.warning("ephemeral answer through response_url failed: %s", e.__class__.__name__)
        channel = click_channel(body)
        user = str((body.get("user") or {}).get("id") or "")
        message = body.get("message") or {}
        thread = message.get("thread_ts") or message.get("ts")
        try:
            self.slack.client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread)
        except SlackApiError as e:
            log.warning("ephemeral to %s failed: %s", user, e.response.get("error"))

    # -- a remedy's button -------------------------------------------------------------------

    def on_request(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        with log_context(slack_user=str((body.get("user") or {}).get("id") or "")):
            self._request(body, action)

    def _request(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        user = str((body.get("user") or {}).get("id") or "")
        channel = click_channel(body)
        value = action.get("value")
        matched = _REMEDY_VALUE.fullmatch(value) if isinstance(value, str) else None
        if matched is None or not user:
            self._tell(body, NOT_OURS)
            return
        message = body.get("message") or {}
        thread = str(message.get("thread_ts") or message.get("ts") or "") or None
        try:
            filed = self.remediation.file(
                run_id=int(matched.group(1)),
                remedy_id=matched.group(2),
                user=user,
                channel=channel,
                thread_ts=thread,
                standing=lambda: self.people.standing(user),
            )
        except UnknownClusterError as e:  # its own words list every registered cluster: not for a channel
            self._tell(body, f"Cluster `{e.name}` is no longer registered; nothing can be changed there.")
            return
        except UserError as e:
            self._tell(body, str(e))
            return
        if not filed.created:
            self._tell(body, f"Remediation request #{filed.view.id} for this is waiting for approval already.")

    # -- Approve and Reject ------------------------------------------------------------------

    def on_approve(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        self._decide(body, action, approve=True)

    def on_reject(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        self._decide(body, action, approve=False)

    def _decide(self, body: dict[str, Any], action: dict[str, Any], *, approve: bool) -> None:
        with log_context(slack_user=str((body.get("user") or {}).get("id") or "")):
            self._vote(body, action, approve=approve)

    def _vote(self, body: dict[str, Any], action: dict[str, Any], *, approve: bool) -> None:
        user = str((body.get("user") or {}).get("id") or "")
        value = action.get("value")
        if not (isinstance(value, str) and _REQUEST_VALUE.fullmatch(value)) or not user:
            self._tell(body, NOT_OURS)
            return
        request_id = int(value)
        view = self.remediation.load(request_id)
        if view is None:
            self._tell(body, "That request is not on record.")
            return
        if view.channel and click_channel(body) != view.channel:  # its buttons are on its message, in its channel
            self._tell(body, NOT_OURS)
            return
        try:
            # the groups are read now, for this decision: someone removed from one a moment ago is out
            eligible = self.remediation.approvers(view.cluster, self.directory.members)
        except UnknownClusterError:
            self._tell(body, f"Cluster `{view.cluster}` is no longer registered; nothing can be changed there.")
            return
        except GroupsUnavailable:
            if approve or user != view.requested_by:  # whoever asked may withdraw without the groups
                self._tell(body, "Could not check who may approve here with Slack just now; try again in a moment.")
                return
            eligible = frozenset()
        vote = self.remediation.decide(
            request_id,
            user=user,
            approve=approve,
            approvers=eligible,
            standing=lambda: self.people.standing(user),
            standing_of=self.people.standing,  # the earlier approvers, asked again when the quorum is judged
        )
        if vote.kind in (VoteKind.REFUSED, VoteKind.DUPLICATE, VoteKind.CLOSED, VoteKind.UNKNOWN, VoteKind.EXPIRED):
            self._tell(body, vote.message)
