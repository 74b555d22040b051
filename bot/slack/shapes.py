"""The shape of a payload from Slack, checked before Bolt reads it. Pure.

Bolt reads payloads with the trust of a library that only ever meets Slack: `body["actions"][0]`,
`"id" in body["user"]`, `len(body["authorizations"])`. A payload of another shape makes it raise
deep inside, which is an HTTP 500 (or a Socket Mode envelope never acknowledged), and the listeners
would act on whatever is left. Slack never sends such a payload, so one that has another shape is
refused whole with a short reason, before anything runs.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

USER_ID = re.compile(r"[UW][A-Z0-9]{2,30}")
CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,30}")
SLASH_COMMAND = re.compile(r"/[a-z0-9_.-]{1,31}", re.ASCII)
MAX_ID = 255  # action_id, block_id, callback_id (Block Kit's limit)
MAX_CHALLENGE = 200

# Bolt reads these as "a string, or an object with an id"
_STRING_OR_OBJECT = ("user", "team", "enterprise", "channel")
# and these as objects it looks into, whenever the key is there: `body.get("event", {}).get("bot_id")`
# and `body["view"]["type"]` fail on a null as on a string
_OBJECTS = ("event", "view", "message", "previous_message", "container", "state", "item", "assistant_thread")
# Slack sends these as strings (or null) wherever they appear
_STRINGS = (
    "type",
    "command",
    "text",
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "api_app_id",
    "response_url",
    "trigger_id",
    "enterprise_id",
    "event_id",
    "thread_ts",
    "callback_id",
    "action_id",
    "block_id",
)
# the hosts of Slack's response_url webhooks, besides the configured Web API's own
_SLACK_DOMAINS = ("slack.com", "slack-gov.com")


def problem(body: object, *, api_url: str) -> str | None:
    """None when `body` has the shape that Bolt and the listeners rely on; otherwise a short reason.
    `api_url` is the Slack Web API in use: a `response_url` elsewhere than Slack (or it) is refused."""
    if not isinstance(body, dict):
        return "the payload is not a JSON object"
    found = _fields(body, "")
    if found:
        return found
    for key in ("event", "message", "previous_message", "item", "assistant_thread"):
        nested = body.get(key)
        if isinstance(nested, dict):
            found = _fields(nested, f"{key}.")
            if found:
                return found
            for inner in ("message", "previous_message"):
                if isinstance(nested.get(inner), dict):
                    found = _fields(nested[inner], f"{key}.{inner}.")
                    if found:
                        return found
    authorizations = body.get("authorizations")
    if authorizations is not None:
        if not isinstance(authorizations, list) or not all(isinstance(a, dict) for a in authorizations):
            return "`authorizations` is not a list of objects"
        if authorizations:
            found = _fields(authorizations[0], "authorizations[0].")
            if found:
                return found
    response_urls = body.get("response_urls")
    if response_urls is not None and not (
        isinstance(response_urls, list)
        and all(isinstance(r, dict) and isinstance(r.get("response_url"), str) for r in response_urls)
    ):
        return "`response_urls` is not a list of objects with a response_url"
    for url in [body.get("response_url")] + [r["response_url"] for r in response_urls or ()]:
        if url is not None and not trusted_response_url(url, api_url):
            return "`response_url` does not point at Slack"
    return _by_kind(body)


def _fields(obj: dict[str, Any], where: str) -> str | None:
    for key in _STRING_OR_OBJECT:
        value = obj.get(key)
        if value is not None and not isinstance(value, str | dict):
            return f"`{where}{key}` is neither a string nor an object"
        if isinstance(value, dict) and value.get("id") is not None and not isinstance(value["id"], str):
            return f"`{where}{key}.id` is not a string"
    for key in _OBJECTS:
        if key in obj and not isinstance(obj[key], dict):
            return f"`{where}{key}` is not an object"
    for key in _STRINGS:
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return f"`{where}{key}` is not a string"
    return None


def _by_kind(body: dict[str, Any]) -> str | None:
    kind = body.get("type")
    if "command" in body:  # a slash command
        # Bolt matches names with `^name$`, and `$` also matches before a final newline: names are exact
        if not SLASH_COMMAND.fullmatch(str(body["command"])):
            return "`command` is not a slash command"
        if not isinstance(body.get("response_url"), str):
            return "`response_url` is missing"
        if not USER_ID.fullmatch(str(body.get("user_id") or "")):
            return "`user_id` is not a Slack user ID"
        if not CHANNEL_ID.fullmatch(str(body.get("channel_id") or "")):
            return "`channel_id` is not a Slack channel ID"
    elif kind == "block_actions":
        if not _user_id_ok(body):
            return "`user.id` is not a Slack user ID"
        container = body.get("container") or {}
        if container.get("type", "message") == "message" and not CHANNEL_ID.fullmatch(click_channel(body)):
            return "the click comes from no channel"
        return _actions_problem(body.get("actions"), "action_id")
    elif kind == "interactive_message":  # a button in a legacy attachment: Bolt reads `actions[0]` too
        return _actions_problem(body.get("actions"), "name")
    elif kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return "`event` is not an event with a type"
    elif kind in ("view_submission", "view_closed", "block_suggestion"):
        view = body.get("view")
        if kind != "block_suggestion" and not (isinstance(view, dict) and isinstance(view.get("type"), str)):
            return "`view` is not a view with a type"
        if not _user_id_ok(body):
            return "`user.id` is not a Slack user ID"
    elif kind == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or not 0 < len(challenge) <= MAX_CHALLENGE:
            return "`challenge` is not a short string"
    return None


def _actions_problem(actions: object, id_key: str) -> str | None:
    if not isinstance(actions, list) or not actions:
        return "`actions` is not a list of actions"
    for action in actions:
        if not isinstance(action, dict):
            return "an action is not an object"
        if not _id_ok(action.get(id_key)):
            return f"an action has no valid `{id_key}`"
        if action.get("block_id") is not None and not _id_ok(action["block_id"]):
            return "an action has an invalid `block_id`"
    return None


def click_channel(body: dict[str, Any]) -> str:
    """The channel a click came from (`channel.id`, else `container.channel_id`), or ""."""
    channel = body.get("channel")
    found = channel.get("id") if isinstance(channel, dict) else channel
    if not found:
        container = body.get("container")
        found = container.get("channel_id") if isinstance(container, dict) else None
    return found if isinstance(found, str) else ""


def sender(body: dict[str, Any]) -> str | None:
    """Who a payload comes from, for the log's context: a slash command's `user_id`, a click's
    `user.id`, an event's `event.user`; None when it names nobody or not in the shape of a user id."""
    user = body.get("user")
    event = body.get("event")
    for found in (
        body.get("user_id"),
        user.get("id") if isinstance(user, dict) else user,
        event.get("user") if isinstance(event, dict) else None,
    ):
        if isinstance(found, str) and USER_ID.fullmatch(found):
            return found
    return None


def _user_id_ok(body: dict[str, Any]) -> bool:
    user = body.get("user")
    return isinstance(user, dict) and isinstance(user.get("id"), str) and bool(USER_ID.fullmatch(user["id"]))


def _id_ok(value: object) -> bool:
    """An action_id or block_id as Block Kit allows them, and nothing Bolt's `^id$` would match by accident."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID and value.isprintable() and value == value.strip()


def trusted_response_url(url: object, api_url: str) -> bool:
    """Whether a `response_url` is one of Slack's: https on slack.com or slack-gov.com, or the host
    (and scheme) of the configured Web API (a proxy, or an emulator in tests)."""
    if not isinstance(url, str):
        return False
    try:
        parts, api = urlsplit(url), urlsplit(api_url)
        host, port, api_host, api_port = parts.hostname, parts.port, api.hostname, api.port
    except ValueError:  # an unparsable address or port
        return False
    if not host or parts.username is not None or parts.password is not None:
        return False
    if (host, port, parts.scheme) == (api_host, api_port, api.scheme):
        return True
    return (
        parts.scheme == "https"
        and port in (None, 443)
        and any(host == domain or host.endswith("." + domain) for domain in _SLACK_DOMAINS)
    )
