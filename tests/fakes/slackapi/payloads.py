"""What Slack sends to the bot: slash commands, interactivity payloads and Events API callbacks.

The builders fill in what a real payload carries (a fresh ``trigger_id``, a ``response_url`` pointing back
at the emulator, the message as stored with its ``block_id``s), so the same payload can go over HTTP
(``driver.HttpDriver``) or Socket Mode (``driver.SocketModeDriver``). ``apply_ack`` does what Slack does
with the bot's acknowledgement (a slash command's reply, a view_submission's ``response_action``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .state import JSON, SlackError, State

INPUT_VALUE_KEYS = {
    "plain_text_input": "value",
    "number_input": "value",
    "email_text_input": "value",
    "url_text_input": "value",
    "users_select": "selected_user",
    "conversations_select": "selected_conversation",
    "channels_select": "selected_channel",
    "datepicker": "selected_date",
    "timepicker": "selected_time",
}


def _find_element(blocks: list[Any], action_id: str, block_id: str | None) -> tuple[JSON, str]:
    for block in blocks:
        if not isinstance(block, dict) or (block_id is not None and block.get("block_id") != block_id):
            continue
        candidates = list(block.get("elements") or [])
        for key in ("accessory", "element"):
            if isinstance(block.get(key), dict):
                candidates.append(block[key])
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return element, str(block.get("block_id", ""))
    raise LookupError(f"no element with action_id {action_id!r}" + (f" in block {block_id!r}" if block_id else ""))


def _options(element: JSON) -> list[JSON]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    return options


def _option(element: JSON, value: Any) -> JSON:
    for option in _options(element):
        if option.get("value") == value:
            return copy.deepcopy(option)
    raise LookupError(f"no option with value {value!r} in {element.get('action_id')!r}")


class PayloadBuilder:
    def __init__(self, state: State) -> None:
        self.state = state

    @property
    def ident(self) -> Any:
        return self.state.identity

    def _user_obj(self, user_id: str) -> JSON:
        user = self.state.users.get(user_id)
        name = user.name if user else user_id.lower()
        return {"id": user_id, "username": name, "name": name, "team_id": self.ident.team_id}

    def _team(self) -> JSON:
        return {"id": self.ident.team_id, "domain": self.ident.team_domain}

    # ----------------------------------------------------------------- commands

    def slash_command(self, command: str, text: str = "", *, user: str, channel: str) -> dict[str, str]:
        """The fields of a slash command (form-encoded over HTTP, a JSON object over Socket Mode)."""
        st = self.state
        chan = st.resolve_channel(channel)
        user_obj = st.users.get(user)
        return {
            "token": self.ident.verification_token,
            "team_id": self.ident.team_id,
            "team_domain": self.ident.team_domain,
            "channel_id": chan.id,
            "channel_name": chan.name,
            "user_id": user,
            "user_name": user_obj.name if user_obj else user.lower(),
            "command": command,
            "text": text,
            "api_app_id": self.ident.app_id,
            "is_enterprise_install": "false",
            "response_url": st.issue_response_url("commands", chan.id, user),
            "trigger_id": st.issue_trigger(user),
        }

    # ----------------------------------------------------------- interactivity

    def _action(self, element: JSON, block_id: str, value: Any) -> JSON:
        kind = element.get("type")
        action: JSON = {"type": kind, "action_id": element["action_id"], "block_id": block_id}
        if kind == "button":
            action["text"] = copy.deepcopy(element.get("text"))
            if "value" in element:
                action["value"] = element["value"]
            if "style" in element:
                action["style"] = element["style"]
        elif kind in ("static_select", "external_select", "overflow", "radio_buttons"):
            action["selected_option"] = _option(element, value) if kind != "external_select" else value
        elif kind in ("multi_static_select", "checkboxes"):
            action["selected_options"] = [_option(element, v) for v in (value or [])]
        elif kind in INPUT_VALUE_KEYS:
            action[INPUT_VALUE_KEYS[kind]] = value
        else:
            action["value"] = value
        action["action_ts"] = self.state.new_ts()
        return action

    def block_actions(
        self,
        channel: str,
        message_ts: str,
        action_id: str,
        *,
        user: str,
        block_id: str | None = None,
        value: Any = None,
    ) -> JSON:
        """A click on (or selection in) an element of a message the emulator stored; ephemeral messages of
        ``user`` are found too (then ``container.is_ephemeral`` is true and no ``message`` is sent, as in Slack)."""
        st = self.state
        chan = st.resolve_channel(channel)
        message = st.find_message(chan.id, message_ts)
        ephemeral = False
        if message is None:
            message = st.find_ephemeral(chan.id, user, message_ts)
            ephemeral = True
        if message is None:
            raise SlackError("message_not_found")
        message = copy.deepcopy(message)
        element, found_block_id = _find_element(message.get("blocks") or [], action_id, block_id)
        payload: JSON = {
            "type": "block_actions",
            "user": self._user_obj(user),
            "api_app_id": self.ident.app_id,
            "token": self.ident.verification_token,
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": chan.id,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": st.issue_trigger(user),
            "team": self._team(),
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": chan.id, "name": chan.name},
            "state": {"values": {}},
            "response_url": st.issue_response_url(
                "actions",
                chan.id,
                user,
                message_ts=message_ts,
                is_ephemeral=ephemeral,
                thread_ts=message.get("thread_ts"),
            ),
            "actions": [self._action(element, found_block_id, value)],
        }
        if message.get("thread_ts"):
            payload["container"]["thread_ts"] = message["thread_ts"]
        if not ephemeral:
            message.pop("is_ephemeral", None)
            if message.get("subtype") == "bot_message":
                del message["subtype"]  # interactivity payloads carry the bot message without it
            payload["message"] = message
        return payload

    def _view_with_state(self, view: JSON, values: dict[str, dict[str, Any]] | None) -> JSON:
        view = copy.deepcopy(view)
        state_values: dict[str, dict[str, Any]] = {}
        given = values or {}
        for block in view.get("blocks") or []:
            if block.get("type") != "input" or not isinstance(block.get("element"), dict):
                continue
            element = block["element"]
            block_id, action_id, kind = block["block_id"], element.get("action_id", ""), element.get("type")
            raw = given.get(block_id, {}).get(action_id)
            entry: JSON = {"type": kind}
            if kind in ("static_select", "radio_buttons"):
                entry["selected_option"] = _option(element, raw) if raw is not None else None
            elif kind in ("multi_static_select", "checkboxes"):
                entry["selected_options"] = [_option(element, v) for v in (raw or [])]
            elif kind in ("multi_users_select", "multi_conversations_select", "multi_channels_select"):
                entry[kind.replace("multi_", "selected_").replace("_select", "s")] = list(raw or [])
            else:
                entry[INPUT_VALUE_KEYS.get(kind or "", "value")] = raw
            state_values.setdefault(block_id, {})[action_id] = entry
        unknown = {b for b in given if b not in state_values}
        if unknown:
            raise LookupError(f"no input block(s) {sorted(unknown)} in view {view['id']}")
        view["state"] = {"values": state_values}
        return view

    def view_submission(self, view_id: str, values: dict[str, dict[str, Any]] | None = None, *, user: str) -> JSON:
        """The user presses the modal's submit button. ``values`` is ``{block_id: {action_id: value}}`` where
        value is the text typed, the option value chosen (a list for multi-selects), or the user/channel id."""
        view = self.state.find_view(view_id)
        if view is None:
            raise SlackError("not_found")
        return {
            "type": "view_submission",
            "team": self._team(),
            "user": self._user_obj(user),
            "api_app_id": self.ident.app_id,
            "token": self.ident.verification_token,
            "trigger_id": self.state.issue_trigger(user),
            "view": self._view_with_state(view, values),
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }

    def view_closed(self, view_id: str, *, user: str) -> JSON:
        view = self.state.find_view(view_id)
        if view is None:
            raise SlackError("not_found")
        return {
            "type": "view_closed",
            "team": self._team(),
            "user": self._user_obj(user),
            "api_app_id": self.ident.app_id,
            "token": self.ident.verification_token,
            "view": copy.deepcopy(view),
            "is_cleared": False,
            "is_enterprise_install": False,
        }

    def view_block_actions(
        self, view_id: str, action_id: str, *, user: str, block_id: str | None = None, value: Any = None
    ) -> JSON:
        """A click on an element inside a modal or the Home tab (``container.type == "view"``)."""
        view = self.state.find_view(view_id)
        if view is None:
            raise SlackError("not_found")
        element, found_block_id = _find_element(view.get("blocks") or [], action_id, block_id)
        return {
            "type": "block_actions",
            "user": self._user_obj(user),
            "api_app_id": self.ident.app_id,
            "token": self.ident.verification_token,
            "container": {"type": "view", "view_id": view_id},
            "trigger_id": self.state.issue_trigger(user),
            "team": self._team(),
            "enterprise": None,
            "is_enterprise_install": False,
            "view": copy.deepcopy(view),
            "state": copy.deepcopy(view.get("state", {"values": {}})),
            "actions": [self._action(element, found_block_id, value)],
        }

    # ------------------------------------------------------------------ events

    def event_callback(self, event: JSON, *, event_id: str | None = None) -> JSON:
        """Wraps an inner event the way the Events API delivers it."""
        return {
            "token": self.ident.verification_token,
            "team_id": self.ident.team_id,
            "api_app_id": self.ident.app_id,
            "event": copy.deepcopy(event),
            "type": "event_callback",
            "event_id": event_id or self.state.new_id("Ev", 11),
            "event_time": int(self.state.clock()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.ident.team_id,
                    "user_id": self.ident.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{self.state.new_id('ctx', 12)}",
        }

    def user_message(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> JSON:
        """Stores a message written by ``user`` (visible in channel/thread) and returns it."""
        chan = self.state.resolve_channel(channel)
        return self.state.post_message(chan.id, text=text, user=user, thread_ts=thread_ts)

    def app_mention(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> JSON:
        """``user`` writes ``text`` (which should contain ``<@bot>``) in the channel; the ``app_mention`` callback."""
        msg = self.user_message(channel, text, user=user, thread_ts=thread_ts)
        chan = self.state.resolve_channel(channel)
        event: JSON = {
            "type": "app_mention",
            "user": user,
            "text": text,
            "ts": msg["ts"],
            "channel": chan.id,
            "event_ts": msg["ts"],
            "team": self.ident.team_id,
        }
        if "thread_ts" in msg:
            event["thread_ts"] = msg["thread_ts"]
        return self.event_callback(event)

    def message_event(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> JSON:
        msg = self.user_message(channel, text, user=user, thread_ts=thread_ts)
        chan = self.state.resolve_channel(channel)
        event: JSON = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": msg["ts"],
            "channel": chan.id,
            "event_ts": msg["ts"],
            "channel_type": "group" if chan.is_private else "channel",
            "team": self.ident.team_id,
        }
        if "thread_ts" in msg:
            event["thread_ts"] = msg["thread_ts"]
        return self.event_callback(event)

    def app_home_opened(self, user: str) -> JSON:
        return self.event_callback(
            {
                "type": "app_home_opened",
                "user": user,
                "channel": "D0" + user[1:],
                "tab": "home",
                "event_ts": self.state.new_ts(),
            }
        )

    # -------------------------------------------------------------------- acks

    def apply_ack(self, payload: JSON, body: Any) -> None:
        """What Slack does with the bot's ack: ``body`` is the parsed response (dict), text (str) or None."""
        if body is None or body in ("", {}):
            user = payload.get("user")
            # (a payload Slack would never send, as tests of hostile input do, closes nothing)
            if payload.get("type") == "view_submission" and isinstance(user, dict) and isinstance(user.get("id"), str):
                self.state.close_top_modal(user["id"])
            return
        if "command" in payload:
            hook = self.state.hook_for_url(payload.get("response_url"))
            if hook is None:
                return
            reply = body if isinstance(body, dict) else {"text": str(body)}
            if reply.get("text") or reply.get("blocks"):
                self.state.deliver_reply(hook, reply)
        elif payload.get("type") == "view_submission" and isinstance(body, dict):
            self._apply_response_action(payload, body)

    def _apply_response_action(self, payload: JSON, body: JSON) -> None:
        st = self.state
        user = payload["user"]["id"]
        view_id = payload["view"]["id"]
        action = body.get("response_action")
        if action == "errors":
            with st.lock:
                st.view_errors[view_id] = copy.deepcopy(body.get("errors") or {})
            st.notify()
        elif action == "clear":
            st.clear_modals(user)
        elif action in ("update", "push") and isinstance(body.get("view"), dict):
            with st.lock:
                stack = st.modal_stacks.get(user) or []
                if action == "update":
                    old = st.views[view_id]
                    view = st.build_view(
                        body["view"],
                        view_id=view_id,
                        previous_view_id=old.get("previous_view_id"),
                        root_view_id=old["root_view_id"],
                    )
                    st.store_view(view, user)
                elif len(stack) < 3:
                    view = st.build_view(
                        body["view"], previous_view_id=view_id, root_view_id=stack[0] if stack else None
                    )
                    stack.append(view["id"])
                    st.store_view(view, user)
        else:
            st.close_top_modal(user)


def parse_ack_body(content_type: str, text: str) -> Any:
    """An HTTP ack body as Slack reads it: JSON when labelled so, else text, else None."""
    if not text:
        return None
    if "json" in content_type.lower():
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text
