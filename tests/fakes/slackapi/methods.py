"""The Web API methods the emulator implements, as plain functions of (State, Call) -> Reply."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .blockkit import validate_view
from .state import JSON, SlackError, State


@dataclass
class Call:
    method: str
    params: JSON
    token_kind: str  # "bot" or "app"


@dataclass
class Reply:
    body: JSON
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[State, Call], Reply]
METHODS: dict[str, Handler] = {}
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})


def method(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        METHODS[name] = fn
        return fn

    return register


def ok(**fields: Any) -> Reply:
    return Reply({"ok": True, **fields})


def _str(params: JSON, name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bool(params: JSON, name: str, default: bool = False) -> bool:
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes")


def _json(params: JSON, name: str) -> Any:
    value = params.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(
                "invalid_arguments", response_metadata={"messages": [f"[ERROR] invalid JSON in {name}"]}
            ) from None
    return value


def _int(params: JSON, name: str, default: int) -> int:
    value = params.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SlackError("invalid_arguments") from None


def _view_arg(params: JSON) -> JSON:
    view = _json(params, "view")
    if view is None:
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing required field: view"]})
    return view  # type: ignore[no-any-return]


def _check_view(st: State, view: Any, *, kind: str) -> None:
    errors = validate_view(view, st.limits)
    if not errors and view.get("type") != kind:
        errors = ["must be a valid enum value [json-pointer:/view/type]"]
    if errors:
        raise SlackError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {e}" for e in errors]})


# ----------------------------------------------------------------------------- auth / socket mode


@method("auth.test")
def auth_test(st: State, call: Call) -> Reply:
    ident = st.identity
    reply = ok(
        url=f"https://{ident.team_domain}.slack.com/",
        team=ident.team_name,
        user=ident.bot_name,
        team_id=ident.team_id,
        user_id=ident.bot_user_id,
        bot_id=ident.bot_id,
        is_enterprise_install=ident.is_enterprise_install,
        **({"enterprise_id": ident.enterprise_id} if ident.enterprise_id else {}),
    )
    reply.headers["x-oauth-scopes"] = ",".join(ident.scopes)
    return reply


@method("bots.info")
def bots_info(st: State, call: Call) -> Reply:
    """Our own bot only (the emulator knows no other app); `bot_not_found` for any other id."""
    ident = st.identity
    if (_str(call.params, "bot") or "") != ident.bot_id:
        raise SlackError("bot_not_found")
    return ok(
        bot={
            "id": ident.bot_id,
            "deleted": False,
            "name": ident.bot_name,
            "updated": 1_700_000_000,
            "app_id": ident.app_id,
            "user_id": ident.bot_user_id,
            "icons": {},
        }
    )


@method("apps.connections.open")
def apps_connections_open(st: State, call: Call) -> Reply:
    if st.issue_socket_url is None:
        raise SlackError("internal_error")
    return ok(url=st.issue_socket_url())


# ------------------------------------------------------------------------------------- chat.*


@method("chat.postMessage")
def chat_post_message(st: State, call: Call) -> Reply:
    p = call.params
    channel = st.writable_channel(p.get("channel"))
    text = _str(p, "text")
    blocks = _json(p, "blocks")
    attachments = _json(p, "attachments")
    st.check_message_content(text, blocks, attachments)
    msg = st.post_message(
        channel.id,
        text=text or "",
        blocks=blocks or None,
        attachments=attachments or None,
        thread_ts=_str(p, "thread_ts") or None,
        reply_broadcast=_bool(p, "reply_broadcast"),
        metadata=_json(p, "metadata"),
    )
    return ok(channel=channel.id, ts=msg["ts"], message=msg)


@method("chat.update")
def chat_update(st: State, call: Call) -> Reply:
    p = call.params
    channel = st.resolve_channel(p.get("channel"))
    ts = _str(p, "ts")
    if not ts or st.find_message(channel.id, ts) is None:
        raise SlackError("message_not_found")
    text = _str(p, "text")
    blocks = _json(p, "blocks")
    attachments = _json(p, "attachments")
    st.check_message_content(text, blocks, attachments)
    msg = st.update_message(channel.id, ts, text=text, blocks=blocks, attachments=attachments)
    return ok(channel=channel.id, ts=ts, text=msg.get("text", ""), message=msg)


@method("chat.delete")
def chat_delete(st: State, call: Call) -> Reply:
    p = call.params
    channel = st.resolve_channel(p.get("channel"))
    ts = _str(p, "ts") or ""
    st.delete_message(channel.id, ts)
    return ok(channel=channel.id, ts=ts)


@method("chat.postEphemeral")
def chat_post_ephemeral(st: State, call: Call) -> Reply:
    p = call.params
    channel = st.writable_channel(p.get("channel"))
    user = _str(p, "user")
    if not user or user not in st.users:
        raise SlackError("user_not_found")
    if user not in channel.members:
        raise SlackError("user_not_in_channel")
    text = _str(p, "text")
    blocks = _json(p, "blocks")
    st.check_message_content(text, blocks, _json(p, "attachments"))
    msg = st.post_ephemeral(channel.id, user, text=text or "", blocks=blocks or None, thread_ts=_str(p, "thread_ts"))
    return ok(message_ts=msg["ts"])


@method("chat.getPermalink")
def chat_get_permalink(st: State, call: Call) -> Reply:
    channel = st.resolve_channel(call.params.get("channel"))
    ts = _str(call.params, "message_ts") or ""
    if st.find_message(channel.id, ts) is None:
        raise SlackError("message_not_found")
    link = f"https://{st.identity.team_domain}.slack.com/archives/{channel.id}/p{ts.replace('.', '')}"
    return ok(channel=channel.id, permalink=link)


# ------------------------------------------------------------------------------------ views.*


@method("views.open")
def views_open(st: State, call: Call) -> Reply:
    view_args = _view_arg(call.params)
    _check_view(st, view_args, kind="modal")
    user = st.consume_trigger(call.params.get("trigger_id"))
    view = st.build_view(view_args)
    st.open_modal(user, view)
    return ok(view=view)


@method("views.push")
def views_push(st: State, call: Call) -> Reply:
    view_args = _view_arg(call.params)
    _check_view(st, view_args, kind="modal")
    user = st.consume_trigger(call.params.get("trigger_id"))
    with st.lock:
        stack = st.modal_stacks.get(user) or []
        previous = stack[-1] if stack else None
        root = stack[0] if stack else None
        view = st.build_view(view_args, previous_view_id=previous, root_view_id=root)
        st.push_modal(user, view)
    return ok(view=view)


@method("views.update")
def views_update(st: State, call: Call) -> Reply:
    p = call.params
    view_args = _view_arg(p)
    _check_view(st, view_args, kind=str(view_args.get("type") or "modal") if isinstance(view_args, dict) else "modal")
    with st.lock:
        old = st.find_view(_str(p, "view_id"), _str(p, "external_id"))
        if old is None:
            raise SlackError("not_found")
        wanted_hash = _str(p, "hash")
        if wanted_hash and wanted_hash != old["hash"]:
            raise SlackError("hash_conflict")
        view = st.build_view(
            view_args, view_id=old["id"], previous_view_id=old.get("previous_view_id"), root_view_id=old["root_view_id"]
        )
        st.store_view(view, st.view_owner[old["id"]])
    return ok(view=view)


@method("views.publish")
def views_publish(st: State, call: Call) -> Reply:
    p = call.params
    user = _str(p, "user_id")
    if not user or user not in st.users:
        raise SlackError("user_not_found")
    view_args = _view_arg(p)
    _check_view(st, view_args, kind="home")
    with st.lock:
        old_id = st.home_views.get(user)
        wanted_hash = _str(p, "hash")
        if old_id and wanted_hash and wanted_hash != st.views[old_id]["hash"]:
            raise SlackError("hash_conflict")
        view = st.build_view(view_args, view_id=old_id)
        st.home_views[user] = view["id"]
        st.store_view(view, user)
    return ok(view=view)


# ---------------------------------------------------------------------------- directory reads


@method("users.info")
def users_info(st: State, call: Call) -> Reply:
    user = st.users.get(_str(call.params, "user") or "")
    if user is None:
        raise SlackError("user_not_found")
    return ok(user=user.to_api(st.identity.team_id, st.identity.enterprise_id))


@method("users.lookupByEmail")
def users_lookup_by_email(st: State, call: Call) -> Reply:
    email = (_str(call.params, "email") or "").lower()
    for user in list(st.users.values()):
        if user.email and user.email.lower() == email:
            return ok(user=user.to_api(st.identity.team_id, st.identity.enterprise_id))
    raise SlackError("users_not_found")


@method("conversations.info")
def conversations_info(st: State, call: Call) -> Reply:
    return ok(channel=st.resolve_channel(call.params.get("channel")).to_api())


def _encode_cursor(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.b64decode(cursor.encode(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise SlackError("invalid_cursor") from None
    if not text.startswith("offset:") or not text[7:].isdigit():
        raise SlackError("invalid_cursor")
    return int(text[7:])


@method("conversations.members")
def conversations_members(st: State, call: Call) -> Reply:
    """A page of the channel's member ids (``limit`` under 1000, ``cursor``); a private channel the bot is
    not in is not found, as Slack answers."""
    channel = st.resolve_channel(call.params.get("channel"))
    if channel.is_private and not channel.bot_is_member:
        raise SlackError("channel_not_found")
    limit = max(1, min(1000, _int(call.params, "limit", 100)))
    cursor = _str(call.params, "cursor")
    start = _decode_cursor(cursor) if cursor else 0
    members = list(channel.members)
    page = members[start : start + limit]
    next_cursor = _encode_cursor(start + limit) if start + limit < len(members) else ""
    return ok(members=page, response_metadata={"next_cursor": next_cursor})


def _ts_arg(params: JSON, name: str, default: float) -> float:
    value = params.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SlackError(f"invalid_ts_{name}") from None


def _timeline(st: State, call: Call, messages: list[JSON], *, newest_first: bool, default_limit: int) -> Reply:
    """A page of ``messages`` the way conversations.history/replies answer: the ``oldest``/``latest`` window
    (exclusive unless ``inclusive``), ``limit`` + ``cursor``, ``has_more``; message ``metadata`` only with
    ``include_all_metadata``."""
    p = call.params
    oldest = _ts_arg(p, "oldest", 0.0)
    latest = _ts_arg(p, "latest", float("inf"))
    inclusive = _bool(p, "inclusive")

    def inside(message: JSON) -> bool:
        ts = float(message["ts"])
        if inclusive:
            return oldest <= ts <= latest
        return oldest < ts < latest

    chosen = [m for m in messages if inside(m)]
    if newest_first:
        chosen.reverse()
    limit = max(1, min(999, _int(p, "limit", default_limit)))
    cursor = _str(p, "cursor")
    start = _decode_cursor(cursor) if cursor else 0
    page = chosen[start : start + limit]
    if not _bool(p, "include_all_metadata"):
        for message in page:
            message.pop("metadata", None)
    more = start + limit < len(chosen)
    return ok(
        messages=page,
        has_more=more,
        response_metadata={"next_cursor": _encode_cursor(start + limit) if more else ""},
    )


@method("conversations.history")
def conversations_history(st: State, call: Call) -> Reply:
    """The channel's messages, newest first: thread parents and broadcast replies, not other replies."""
    channel = st.resolve_channel(call.params.get("channel"))
    if not channel.bot_is_member:
        raise SlackError("not_in_channel")
    reply = _timeline(st, call, st.channel_messages(channel.id), newest_first=True, default_limit=100)
    reply.body["pin_count"] = 0
    return reply


@method("conversations.replies")
def conversations_replies(st: State, call: Call) -> Reply:
    """A thread, oldest first, its parent first."""
    channel = st.resolve_channel(call.params.get("channel"))
    if not channel.bot_is_member:
        raise SlackError("not_in_channel")
    ts = _str(call.params, "ts")
    if not ts:
        raise SlackError("thread_not_found")
    return _timeline(st, call, st.thread_with_parent(channel.id, ts), newest_first=False, default_limit=1000)


@method("usergroups.users.list")
def usergroups_users_list(st: State, call: Call) -> Reply:
    group = st.usergroups.get(_str(call.params, "usergroup") or "")
    if group is None:
        raise SlackError("no_such_subteam")
    if group.disabled and not _bool(call.params, "include_disabled"):
        raise SlackError("no_such_subteam")
    return ok(users=list(group.users))


# ---------------------------------------------------------------------------------- files (v2)


@method("files.getUploadURLExternal")
def files_get_upload_url_external(st: State, call: Call) -> Reply:
    filename = _str(call.params, "filename")
    length = _int(call.params, "length", -1)
    if not filename or length < 0:
        raise SlackError("invalid_arguments")
    record = st.add_file(filename, length, _str(call.params, "alt_txt"), _str(call.params, "snippet_type"))
    return ok(upload_url=f"{st.base_url}/upload/v1/{record.id}", file_id=record.id)


@method("files.completeUploadExternal")
def files_complete_upload_external(st: State, call: Call) -> Reply:
    p = call.params
    wanted = _json(p, "files")
    if not isinstance(wanted, list) or not wanted:
        raise SlackError("invalid_arguments")
    channel_ref = _str(p, "channel_id") or (_str(p, "channels") or "").split(",")[0] or None
    channel = st.writable_channel(channel_ref) if channel_ref else None
    thread_ts = _str(p, "thread_ts") or None
    with st.lock:
        records = []
        for item in wanted:
            record = st.files.get(item.get("id", "") if isinstance(item, dict) else "")
            if record is None or record.content is None:
                raise SlackError("file_not_found")
            if isinstance(item, dict) and item.get("title"):
                record.title = str(item["title"])
            records.append(record)
        if thread_ts and channel and st.find_message(channel.id, thread_ts) is None:
            raise SlackError("thread_not_found")
        infos = []
        for record in records:
            record.completed = True
            infos.append(
                {
                    "id": record.id,
                    "name": record.filename,
                    "title": record.title,
                    "mimetype": "text/plain",
                    "filetype": record.snippet_type or "text",
                    "size": len(record.content or b""),
                    "user": st.identity.bot_user_id,
                    "url_private": f"{st.base_url}/files/{record.id}/{record.filename}",
                }
            )
        if channel is not None:
            msg = st.post_message(channel.id, text=_str(p, "initial_comment") or "", thread_ts=thread_ts, files=infos)
            for record in records:
                record.shares.append((channel.id, msg["ts"]))
    return ok(files=infos)
