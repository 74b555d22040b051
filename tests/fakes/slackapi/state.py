"""The emulated workspace: who exists, what was posted, which modals are open. Thread-safe.

Every public reader returns deep copies, so a test can never mutate the emulator by accident.
"""

from __future__ import annotations

import copy
import itertools
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .blockkit import Limits, blocks_text_length, validate_blocks, with_block_ids
from .clock import Clock

JSON = dict[str, Any]
_T = TypeVar("_T")

RESPONSE_URL_MAX_USES = 5
RESPONSE_URL_LIFETIME = 30 * 60.0
TRIGGER_LIFETIME = 3.0
MAX_VIEW_STACK = 3


@dataclass
class Identity:
    """The workspace, the app and its bot user, as ``auth.test`` and every payload present them."""

    team_id: str = "T111"
    team_domain: str = "emu"
    team_name: str = "Emu"
    app_id: str = "A111"
    bot_id: str = "B111"
    bot_user_id: str = "U0BOT"
    bot_name: str = "nsstuck"
    verification_token: str = "emulator-verification-token"
    # Enterprise Grid: the organisation, and whether the app is installed organisation-wide
    enterprise_id: str | None = None
    is_enterprise_install: bool = False
    scopes: tuple[str, ...] = (
        "chat:write",
        "commands",
        "users:read",
        "users:read.email",
        "channels:read",
        "channels:history",
        "groups:read",
        "groups:history",
        "usergroups:read",
        "files:write",
        "app_mentions:read",
    )


@dataclass
class User:
    id: str
    name: str
    real_name: str = ""
    email: str | None = None
    tz: str = "Europe/Berlin"
    is_bot: bool = False
    deleted: bool = False
    # who they are to the workspace: another workspace's person (``team_id``, and on Enterprise Grid their
    # organisation, ``enterprise_id``), a guest (multi-channel: restricted; single-channel: ultra
    # restricted), or a stranger (someone the workspace shares no channel with)
    team_id: str | None = None  # None: the emulated workspace's
    enterprise_id: str | None = None  # None: the emulated organisation's, if there is one
    is_restricted: bool = False
    is_ultra_restricted: bool = False
    is_stranger: bool = False

    def to_api(self, team_id: str, enterprise_id: str | None = None) -> JSON:
        """As users.info shows them: ``is_stranger`` only when true, ``enterprise_user`` only on Grid."""
        real = self.real_name or self.name.title()
        profile: JSON = {"display_name": self.name, "real_name": real}
        if self.email is not None:
            profile["email"] = self.email
        user: JSON = {
            "id": self.id,
            "team_id": self.team_id or team_id,
            "name": self.name,
            "deleted": self.deleted,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "is_restricted": self.is_restricted,
            "is_ultra_restricted": self.is_ultra_restricted,
            "real_name": real,
            "tz": self.tz,
            "profile": profile,
        }
        if self.is_stranger:
            user["is_stranger"] = True
        enterprise = self.enterprise_id or enterprise_id
        if enterprise:
            user["enterprise_user"] = {"id": self.id, "enterprise_id": enterprise, "teams": [user["team_id"]]}
        return user


@dataclass
class Channel:
    id: str
    name: str
    members: list[str] = field(default_factory=list)
    is_private: bool = False
    is_archived: bool = False
    bot_is_member: bool = True

    def to_api(self) -> JSON:
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": not self.is_private,
            "is_group": False,
            "is_im": False,
            "is_private": self.is_private,
            "is_archived": self.is_archived,
            "is_member": self.bot_is_member,
            "num_members": len(self.members),
        }


@dataclass
class UserGroup:
    id: str
    handle: str
    name: str = ""
    users: list[str] = field(default_factory=list)
    disabled: bool = False


@dataclass
class Trigger:
    id: str
    user: str
    issued: float
    used: bool = False


@dataclass
class ResponseUrl:
    """A ``response_url`` handed out with a slash command (``kind="commands"``) or an action (``"actions"``)."""

    url: str
    path: str
    kind: str
    channel: str
    user: str
    created: float
    message_ts: str | None = None  # the message the action came from
    is_ephemeral: bool = False
    thread_ts: str | None = None
    uses: int = 0
    last_ts: str | None = None  # the last reply posted through it (what replace_original of a command replaces)
    last_ephemeral: bool = True


@dataclass
class WebhookPost:
    """One POST to a ``response_url``, whatever the outcome."""

    path: str
    raw: str
    json: Any
    status: int
    answer: str
    time: float
    kind: str | None
    channel: str | None
    user: str | None


@dataclass
class UploadedFile:
    id: str
    filename: str
    length: int
    title: str
    content: bytes | None = None
    alt_txt: str | None = None
    snippet_type: str | None = None
    completed: bool = False
    shares: list[tuple[str, str]] = field(default_factory=list)  # (channel, message ts)

    @property
    def text(self) -> str:
        return (self.content or b"").decode("utf-8", errors="replace")


@dataclass
class MessageUpdate:
    channel: str
    ts: str
    before: JSON
    after: JSON
    time: float


class SlackError(Exception):
    """A Web API refusal: ``{"ok": false, "error": code, ...extra}``."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra


def _clone(value: _T) -> _T:
    return copy.deepcopy(value)


class State:
    """Everything the emulated Slack knows. All methods take the (re-entrant) lock themselves."""

    def __init__(self, identity: Identity, clock: Clock, limits: Limits) -> None:
        self.identity = identity
        self.clock = clock
        self.limits = limits
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.version = 0  # bumped by every change; lets waiters sleep without missing one
        self.base_url = "http://127.0.0.1:0"  # set by the HTTP server once it is bound
        self.issue_socket_url: Callable[[], str] | None = None  # set by the emulator (apps.connections.open)
        self.users: dict[str, User] = {}
        self.channels: dict[str, Channel] = {}
        self.usergroups: dict[str, UserGroup] = {}
        self._last_micro = 0
        self._ids = itertools.count(1)
        self._channel_msgs: dict[str, list[JSON]] = {}
        self._replies: dict[tuple[str, str], list[JSON]] = {}
        self._by_ts: dict[tuple[str, str], JSON] = {}
        self._ephemerals: dict[tuple[str, str], list[JSON]] = {}
        self.deleted: list[tuple[str, JSON]] = []
        self.updates: list[MessageUpdate] = []
        self.triggers: dict[str, Trigger] = {}
        self.views: dict[str, JSON] = {}
        self.view_owner: dict[str, str] = {}
        self.modal_stacks: dict[str, list[str]] = {}
        self.home_views: dict[str, str] = {}
        self.view_errors: dict[str, JSON] = {}
        self.closed_views: list[tuple[str, str]] = []  # (user, view_id)
        self.response_urls: dict[str, ResponseUrl] = {}
        self.webhook_posts: list[WebhookPost] = []
        self.files: dict[str, UploadedFile] = {}
        self.bot_user = User(identity.bot_user_id, identity.bot_name, real_name="nsstuck", is_bot=True)
        self.users[self.bot_user.id] = self.bot_user

    # ----------------------------------------------------------------- helpers

    def notify(self) -> None:
        with self.changed:
            self.version += 1
            self.changed.notify_all()

    def new_ts(self) -> str:
        """A message timestamp: strictly increasing, microsecond resolution, from the clock."""
        with self.lock:
            micro = max(int(self.clock() * 1_000_000), self._last_micro + 1)
            self._last_micro = micro
            return f"{micro // 1_000_000}.{micro % 1_000_000:06d}"

    def new_id(self, prefix: str, width: int = 9) -> str:
        with self.lock:
            n = next(self._ids)
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        out = ""
        while n:
            n, r = divmod(n, 36)
            out = digits[r] + out
        return prefix + out.rjust(width - len(prefix), "0")

    def _block_id(self) -> str:
        return secrets.token_urlsafe(4)

    # ------------------------------------------------------------ directory

    def add_user(self, user: User) -> User:
        with self.lock:
            self.users[user.id] = user
        return user

    def add_channel(self, channel: Channel) -> Channel:
        with self.lock:
            self.channels[channel.id] = channel
            self._channel_msgs.setdefault(channel.id, [])
        return channel

    def add_usergroup(self, group: UserGroup) -> UserGroup:
        with self.lock:
            self.usergroups[group.id] = group
        return group

    def resolve_channel(self, ref: Any) -> Channel:
        """By id, ``#name`` or name; ``channel_not_found`` otherwise."""
        with self.lock:
            if isinstance(ref, str) and ref:
                if ref in self.channels:
                    return self.channels[ref]
                name = ref.removeprefix("#")
                for channel in self.channels.values():
                    if channel.name == name:
                        return channel
            raise SlackError("channel_not_found")

    def writable_channel(self, ref: Any) -> Channel:
        channel = self.resolve_channel(ref)
        if channel.is_archived:
            raise SlackError("is_archived")
        if not channel.bot_is_member:
            raise SlackError("not_in_channel")
        return channel

    # ------------------------------------------------------------- messages

    def check_message_content(
        self, text: Any, blocks: Any, attachments: Any = None, *, require_content: bool = True
    ) -> None:
        """Raises what Slack answers for bad message content (``no_text``, ``msg_too_long``, ``invalid_blocks``...)."""
        if text is not None and not isinstance(text, str):
            text = str(text)
        if require_content and not text and not blocks and not attachments:
            raise SlackError("no_text")
        if text and len(text) > self.limits.message_text:
            raise SlackError("msg_too_long")
        if blocks is not None and blocks != []:
            errors = validate_blocks(blocks, max_blocks=self.limits.message_blocks, limits=self.limits)
            if errors:
                raise SlackError(
                    "invalid_blocks",
                    errors=errors,
                    response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
                )
            if blocks_text_length(blocks) > self.limits.message_blocks_chars:
                raise SlackError("msg_blocks_too_long")

    def find_message(self, channel: str, ts: str) -> JSON | None:
        with self.lock:
            return self._by_ts.get((channel, ts))

    def post_message(
        self,
        channel: str,
        *,
        text: str = "",
        blocks: list[Any] | None = None,
        attachments: list[Any] | None = None,
        thread_ts: str | None = None,
        user: str | None = None,
        reply_broadcast: bool = False,
        files: list[JSON] | None = None,
        metadata: Any = None,
    ) -> JSON:
        """Stores a message (from the bot unless ``user`` is given) and returns a copy of it."""
        with self.lock:
            ts = self.new_ts()
            msg: JSON = {"type": "message", "text": text or "", "ts": ts, "team": self.identity.team_id}
            if user is None or user == self.identity.bot_user_id:
                msg.update(
                    subtype="bot_message",
                    user=self.identity.bot_user_id,
                    bot_id=self.identity.bot_id,
                    app_id=self.identity.app_id,
                )
            else:
                msg["user"] = user
            if blocks:
                msg["blocks"] = with_block_ids(blocks, self._block_id)
            if attachments:
                msg["attachments"] = _clone(attachments)
            if files:
                msg["files"] = _clone(files)
            if metadata is not None:
                msg["metadata"] = _clone(metadata)
            if thread_ts is not None:
                parent = self._by_ts.get((channel, thread_ts))
                if parent is None:
                    raise SlackError("thread_not_found")
                root_ts = str(parent.get("thread_ts", parent["ts"]))
                root = self._by_ts[(channel, root_ts)]
                msg["thread_ts"] = root_ts
                msg["parent_user_id"] = root.get("user")
                root["thread_ts"] = root_ts
                root["reply_count"] = root.get("reply_count", 0) + 1
                reply_users = root.setdefault("reply_users", [])
                if msg["user"] not in reply_users:
                    reply_users.append(msg["user"])
                root["latest_reply"] = ts
                self._replies.setdefault((channel, root_ts), []).append(msg)
                if reply_broadcast:
                    msg["subtype"] = "thread_broadcast"
                    self._channel_msgs.setdefault(channel, []).append(msg)
            else:
                self._channel_msgs.setdefault(channel, []).append(msg)
            self._by_ts[(channel, ts)] = msg
            out: JSON = _clone(msg)
        self.notify()
        return out

    def update_message(
        self, channel: str, ts: str, *, text: str | None, blocks: list[Any] | None, attachments: Any = None
    ) -> JSON:
        with self.lock:
            msg = self._by_ts.get((channel, ts))
            if msg is None:
                raise SlackError("message_not_found")
            if msg.get("bot_id") != self.identity.bot_id:
                raise SlackError("cant_update_message")
            before = _clone(msg)
            if text is not None:
                msg["text"] = text
            if blocks is not None:
                if blocks:
                    msg["blocks"] = with_block_ids(blocks, self._block_id)
                else:
                    msg.pop("blocks", None)
            if attachments is not None:
                msg["attachments"] = _clone(attachments)
            msg["edited"] = {"user": self.identity.bot_user_id, "ts": self.new_ts()}
            self.updates.append(MessageUpdate(channel, ts, before, _clone(msg), self.clock()))
            out: JSON = _clone(msg)
        self.notify()
        return out

    def delete_message(self, channel: str, ts: str, *, as_bot: bool = True) -> None:
        with self.lock:
            msg = self._by_ts.get((channel, ts))
            if msg is None:
                raise SlackError("message_not_found")
            if as_bot and msg.get("bot_id") != self.identity.bot_id:
                raise SlackError("cant_delete_message")
            del self._by_ts[(channel, ts)]
            top = self._channel_msgs.get(channel, [])
            if msg in top:
                top.remove(msg)
            if "thread_ts" in msg and msg["thread_ts"] != ts:
                replies = self._replies.get((channel, msg["thread_ts"]), [])
                if msg in replies:
                    replies.remove(msg)
            self.deleted.append((channel, _clone(msg)))
        self.notify()

    def post_ephemeral(
        self, channel: str, user: str, *, text: str = "", blocks: list[Any] | None = None, thread_ts: str | None = None
    ) -> JSON:
        with self.lock:
            ts = self.new_ts()
            msg: JSON = {
                "type": "message",
                "subtype": "bot_message",
                "text": text or "",
                "ts": ts,
                "user": self.identity.bot_user_id,
                "bot_id": self.identity.bot_id,
                "app_id": self.identity.app_id,
                "is_ephemeral": True,
            }
            if blocks:
                msg["blocks"] = with_block_ids(blocks, self._block_id)
            if thread_ts is not None:
                msg["thread_ts"] = thread_ts
            self._ephemerals.setdefault((channel, user), []).append(msg)
            out: JSON = _clone(msg)
        self.notify()
        return out

    def _find_ephemeral(self, channel: str, user: str, ts: str) -> JSON | None:
        for msg in self._ephemerals.get((channel, user), []):
            if msg["ts"] == ts:
                return msg
        return None

    def find_ephemeral(self, channel: str, user: str, ts: str) -> JSON | None:
        with self.lock:
            return self._find_ephemeral(channel, user, ts)

    def channel_messages(self, channel: str) -> list[JSON]:
        with self.lock:
            return _clone(self._channel_msgs.get(channel, []))

    def thread(self, channel: str, ts: str) -> list[JSON]:
        with self.lock:
            msg = self._by_ts.get((channel, ts))
            root = str(msg.get("thread_ts", ts)) if msg is not None else ts
            return _clone(self._replies.get((channel, root), []))

    def ephemerals(self, channel: str, user: str) -> list[JSON]:
        with self.lock:
            return _clone(self._ephemerals.get((channel, user), []))

    def thread_with_parent(self, channel: str, ts: str) -> list[JSON]:
        """What ``conversations.replies`` reads: the thread's parent, then its replies, oldest first; ``ts``
        may be the parent's or any reply's. ``thread_not_found`` for an unknown ``ts``."""
        with self.lock:
            msg = self._by_ts.get((channel, ts))
            if msg is None:
                raise SlackError("thread_not_found")
            root_ts = str(msg.get("thread_ts", ts))
            root = self._by_ts.get((channel, root_ts))
            if root is None:
                raise SlackError("thread_not_found")
            return _clone([root, *self._replies.get((channel, root_ts), [])])

    # ---------------------------------------------------------------- views

    def issue_trigger(self, user: str) -> str:
        with self.lock:
            n = next(self._ids)
            trigger_id = f"{n}.{self.identity.team_id.lstrip('T')}.{secrets.token_hex(16)}"
            self.triggers[trigger_id] = Trigger(trigger_id, user, self.clock())
            return trigger_id

    def consume_trigger(self, trigger_id: Any) -> str:
        """The user the trigger belongs to; the trigger is used up."""
        with self.lock:
            trigger = self.triggers.get(trigger_id) if isinstance(trigger_id, str) else None
            if trigger is None:
                raise SlackError("invalid_trigger_id")
            if trigger.used:
                raise SlackError("exchanged_trigger_id")
            if self.clock() - trigger.issued > TRIGGER_LIFETIME:
                raise SlackError("expired_trigger_id")
            trigger.used = True
            return trigger.user

    def build_view(
        self,
        args: JSON,
        *,
        view_id: str | None = None,
        previous_view_id: str | None = None,
        root_view_id: str | None = None,
    ) -> JSON:
        vid = view_id or self.new_id("V", 11)
        view: JSON = {
            "id": vid,
            "team_id": self.identity.team_id,
            "type": args.get("type"),
            "blocks": with_block_ids(list(args.get("blocks") or []), self._block_id),
            "private_metadata": args.get("private_metadata", ""),
            "callback_id": args.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(self.clock())}.{secrets.token_hex(4)}",
            "clear_on_close": bool(args.get("clear_on_close", False)),
            "notify_on_close": bool(args.get("notify_on_close", False)),
            "previous_view_id": previous_view_id,
            "root_view_id": root_view_id or vid,
            "app_id": self.identity.app_id,
            "external_id": args.get("external_id", ""),
            "app_installed_team_id": self.identity.team_id,
            "bot_id": self.identity.bot_id,
        }
        for name in ("title", "submit", "close"):
            if args.get(name) is not None:
                view[name] = _clone(args[name])
        return view

    def store_view(self, view: JSON, user: str) -> None:
        with self.lock:
            self.views[view["id"]] = view
            self.view_owner[view["id"]] = user
            self.view_errors.pop(view["id"], None)
        self.notify()

    def find_view(self, view_id: str | None = None, external_id: str | None = None) -> JSON | None:
        with self.lock:
            if view_id:
                return self.views.get(view_id)
            if external_id:
                for view in self.views.values():
                    if view.get("external_id") == external_id:
                        return view
            return None

    def open_modal(self, user: str, view: JSON) -> None:
        with self.lock:
            for old in self.modal_stacks.get(user, []):
                self.closed_views.append((user, old))
            self.modal_stacks[user] = [view["id"]]
            self.store_view(view, user)

    def push_modal(self, user: str, view: JSON) -> None:
        with self.lock:
            stack = self.modal_stacks.get(user) or []
            if not stack:
                raise SlackError("not_found")
            if len(stack) >= MAX_VIEW_STACK:
                raise SlackError("push_limit_reached")
            stack.append(view["id"])
            self.store_view(view, user)

    def close_top_modal(self, user: str) -> None:
        with self.lock:
            stack = self.modal_stacks.get(user) or []
            if stack:
                self.closed_views.append((user, stack.pop()))
        self.notify()

    def clear_modals(self, user: str) -> None:
        with self.lock:
            for vid in reversed(self.modal_stacks.get(user) or []):
                self.closed_views.append((user, vid))
            self.modal_stacks[user] = []
        self.notify()

    def modal_stack(self, user: str) -> list[JSON]:
        with self.lock:
            return [_clone(self.views[vid]) for vid in self.modal_stacks.get(user, [])]

    def home_view(self, user: str) -> JSON | None:
        with self.lock:
            vid = self.home_views.get(user)
            return _clone(self.views[vid]) if vid else None

    # -------------------------------------------------------- response_url

    def issue_response_url(
        self,
        kind: str,
        channel: str,
        user: str,
        *,
        message_ts: str | None = None,
        is_ephemeral: bool = False,
        thread_ts: str | None = None,
    ) -> str:
        with self.lock:
            n = next(self._ids)
            path = f"/webhook/{kind}/{self.identity.team_id}/{n}/{secrets.token_urlsafe(12)}"
            hook = ResponseUrl(
                url=self.base_url + path,
                path=path,
                kind=kind,
                channel=channel,
                user=user,
                created=self.clock(),
                message_ts=message_ts,
                is_ephemeral=is_ephemeral,
                thread_ts=thread_ts,
            )
            self.response_urls[path] = hook
            return hook.url

    def hook_for_url(self, url: Any) -> ResponseUrl | None:
        if not isinstance(url, str):
            return None
        with self.lock:
            for path, hook in self.response_urls.items():
                if url.endswith(path):
                    return hook
        return None

    def deliver_reply(self, hook: ResponseUrl, body: JSON) -> None:
        """What Slack does with a reply (a ``response_url`` post or a slash command's ack body)."""
        text = body.get("text")
        blocks = body.get("blocks")
        thread_ts = body.get("thread_ts") or hook.thread_ts
        in_channel = body.get("response_type") == "in_channel"
        with self.lock:
            if body.get("delete_original"):
                target_ts = hook.message_ts if hook.kind == "actions" else hook.last_ts
                if target_ts is not None:
                    self._delete_target(hook, target_ts)
                return
            if body.get("replace_original"):
                target_ts = hook.message_ts if hook.kind == "actions" else hook.last_ts
                ephemeral = hook.is_ephemeral if hook.kind == "actions" else hook.last_ephemeral
                if target_ts is not None and self._replace_target(hook, target_ts, ephemeral, text, blocks):
                    return
            if in_channel:
                msg = self.post_message(hook.channel, text=text or "", blocks=blocks, thread_ts=thread_ts)
                hook.last_ephemeral = False
            else:
                msg = self.post_ephemeral(hook.channel, hook.user, text=text or "", blocks=blocks, thread_ts=thread_ts)
                hook.last_ephemeral = True
            hook.last_ts = msg["ts"]

    def _delete_target(self, hook: ResponseUrl, ts: str) -> None:
        eph = self._find_ephemeral(hook.channel, hook.user, ts)
        if eph is not None:
            self._ephemerals[(hook.channel, hook.user)].remove(eph)
            self.deleted.append((hook.channel, _clone(eph)))
            self.notify()
        elif self._by_ts.get((hook.channel, ts)) is not None:
            self.delete_message(hook.channel, ts, as_bot=False)

    def _replace_target(self, hook: ResponseUrl, ts: str, ephemeral: bool, text: Any, blocks: Any) -> bool:
        if ephemeral:
            eph = self._find_ephemeral(hook.channel, hook.user, ts)
            if eph is None:
                return False
            eph["text"] = text or ""
            if blocks:
                eph["blocks"] = with_block_ids(blocks, self._block_id)
            else:
                eph.pop("blocks", None)
            self.notify()
            return True
        msg = self._by_ts.get((hook.channel, ts))
        if msg is None:
            return False
        before = _clone(msg)
        msg["text"] = text or ""
        if blocks:
            msg["blocks"] = with_block_ids(blocks, self._block_id)
        else:
            msg.pop("blocks", None)
        self.updates.append(MessageUpdate(hook.channel, ts, before, _clone(msg), self.clock()))
        self.notify()
        return True

    def handle_webhook(self, path: str, raw: str) -> tuple[int, str]:
        """A POST to a ``response_url``: ``(status, text body)``; real Slack answers ``200 ok``."""
        with self.lock:
            hook = self.response_urls.get(path)
            parsed: Any = None
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            status, answer = self._webhook_outcome(hook, parsed)
            self.webhook_posts.append(
                WebhookPost(
                    path=path,
                    raw=raw,
                    json=parsed,
                    status=status,
                    answer=answer,
                    time=self.clock(),
                    kind=hook.kind if hook else None,
                    channel=hook.channel if hook else None,
                    user=hook.user if hook else None,
                )
            )
        self.notify()
        return status, answer

    def _webhook_outcome(self, hook: ResponseUrl | None, body: Any) -> tuple[int, str]:
        if hook is None:
            return 404, "no_service"
        if hook.uses >= RESPONSE_URL_MAX_USES or self.clock() - hook.created > RESPONSE_URL_LIFETIME:
            return 404, "expired_url"
        if not isinstance(body, dict):
            return 400, "invalid_payload"
        if not body.get("delete_original"):
            try:
                self.check_message_content(body.get("text"), body.get("blocks"), body.get("attachments"))
            except SlackError as exc:
                return 400, exc.code
        hook.uses += 1
        self.deliver_reply(hook, body)
        return 200, "ok"

    # ---------------------------------------------------------------- files

    def add_file(self, filename: str, length: int, alt_txt: str | None, snippet_type: str | None) -> UploadedFile:
        with self.lock:
            record = UploadedFile(
                id=self.new_id("F", 11),
                filename=filename,
                length=length,
                title=filename,
                alt_txt=alt_txt,
                snippet_type=snippet_type,
            )
            self.files[record.id] = record
            return record
