"""The app manifest asks for exactly the scopes the code's Web API calls need: a call added without its
scope fails here (and not at a customer's, with `missing_scope`), and a scope no call needs any more
is not asked of the people who install the app."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]

# the bot-token scopes each Web API method needs (docs.slack.dev/reference/methods/<method>); where
# two are given, one is for public channels and the other for private ones, and both are asked for
METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    "auth_test": (),
    "bots_info": ("users:read",),
    "chat_postMessage": ("chat:write",),
    "chat_update": ("chat:write",),
    "chat_postEphemeral": ("chat:write",),
    "conversations_history": ("channels:history", "groups:history"),
    "conversations_replies": ("channels:history", "groups:history"),
    "conversations_members": ("channels:read", "groups:read"),
    "files_upload_v2": ("files:write",),
    "usergroups_users_list": ("usergroups:read",),
    "users_info": ("users:read",),
    "views_publish": (),
}
# scopes that no method needs but a field of an answer does: users.info shows `profile.email` only with
# users:read.email (read where act_as_approver derives the Kubernetes user from the e-mail)
FIELD_SCOPES: dict[str, str] = {"users:read.email": '.get("email")'}
_FAMILIES = "admin|apps|auth|bots|chat|conversations|dnd|emoji|files|pins|reactions|team|usergroups|users|views"
_CALL = re.compile(rf"\.((?:{_FAMILIES})_[A-Za-z0-9_]+)\(")


def _called() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "bot").rglob("*.py"):
        found.update(_CALL.findall(path.read_text()))
    return found


def _manifest(name: str = "manifest.yaml") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "slack" / name).read_text())
    return loaded


def _manifest_scopes() -> set[str]:
    return set(_manifest()["oauth_config"]["scopes"]["bot"])


def test_every_web_api_call_of_the_bot_is_known_here() -> None:
    called = _called()
    assert {"chat_postMessage", "users_info", "conversations_members", "usergroups_users_list"} <= called
    assert called <= set(METHOD_SCOPES), f"add the scopes of {sorted(called - set(METHOD_SCOPES))} to METHOD_SCOPES"


def test_the_manifest_asks_for_exactly_the_scopes_the_calls_need() -> None:
    needed = {"commands"}  # the /nsstuck slash command
    for method in _called():
        needed.update(METHOD_SCOPES[method])
    sources = "".join(path.read_text() for path in (REPO / "bot").rglob("*.py"))
    needed.update(scope for scope, read in FIELD_SCOPES.items() if read in sources)
    assert _manifest_scopes() == needed


def test_the_socket_mode_manifest_is_the_same_app_without_an_address() -> None:
    """slack/manifest-socket-mode.yaml: Socket Mode on, no URL anywhere (Slack refuses a Socket Mode
    manifest's request URLs), and otherwise what manifest.yaml says: the same scopes, command, events."""
    http, socket = _manifest(), _manifest("manifest-socket-mode.yaml")
    assert http["settings"]["socket_mode_enabled"] is False
    assert socket["settings"]["socket_mode_enabled"] is True
    text = (REPO / "slack" / "manifest-socket-mode.yaml").read_text()
    assert "url:" not in text
    assert "https://" not in text.split("\n", 5)[-1]  # past the header comment
    for manifest in (http, socket):
        for command in manifest["features"]["slash_commands"]:
            command.pop("url", None)
        manifest["settings"]["event_subscriptions"].pop("request_url", None)
        manifest["settings"]["interactivity"].pop("request_url", None)
        manifest["settings"].pop("socket_mode_enabled")
    assert socket == http
