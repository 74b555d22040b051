"""Server-side Block Kit checks, worded the way Slack words ``invalid_blocks`` errors.

slack_sdk only validates its model classes; raw dicts reach Slack unchecked, so this is where a bot
that builds blocks by hand finds out that it broke a limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})
BUTTON_STYLES = frozenset({"primary", "danger"})


@dataclass
class Limits:
    """Slack's documented limits (brief §7); every one can be changed per emulator."""

    message_blocks: int = 50
    view_blocks: int = 100
    section_text: int = 3000
    section_fields: int = 10
    field_text: int = 2000
    block_id: int = 255
    action_id: int = 255
    button_text: int = 75
    button_value: int = 2000
    button_url: int = 3000
    actions_elements: int = 25
    context_elements: int = 10
    header_text: int = 150
    markdown_text: int = 12000
    confirm_title: int = 100
    confirm_text: int = 300
    confirm_button: int = 30
    view_title: int = 24
    view_button: int = 24
    private_metadata: int = 3000
    callback_id: int = 255
    message_text: int = 40_000
    # Undocumented aggregate (bolt-js #2509): total characters of all ``text`` strings in a message's blocks.
    message_blocks_chars: int = 13_000


def _at(message: str, pointer: str) -> str:
    return f"{message} [json-pointer:{pointer}]"


class _Checker:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.errors: list[str] = []

    def err(self, message: str, pointer: str) -> None:
        self.errors.append(_at(message, pointer))

    def string(self, value: Any, pointer: str, max_len: int, *, required: bool = True) -> None:
        if value is None:
            if required:
                self.err("must provide a string", pointer)
            return
        if not isinstance(value, str):
            self.err("must provide a string", pointer)
        elif len(value) > max_len:
            self.err(f"must be less than {max_len + 1} characters", pointer)
        elif required and not value:
            self.err("must be more than 0 characters", pointer)

    def text_object(
        self, value: Any, pointer: str, max_len: int, *, plain_only: bool = False, required: bool = True
    ) -> None:
        if value is None:
            if required:
                self.err("must provide an object", pointer)
            return
        if not isinstance(value, dict):
            self.err("must provide an object", pointer)
            return
        kind = value.get("type")
        allowed = {"plain_text"} if plain_only else TEXT_TYPES
        if kind not in allowed:
            self.err("must be a valid enum value", pointer + "/type")
        self.string(value.get("text"), pointer + "/text", max_len)

    def confirm(self, value: Any, pointer: str) -> None:
        if not isinstance(value, dict):
            self.err("must provide an object", pointer)
            return
        lim = self.limits
        self.text_object(value.get("title"), pointer + "/title", lim.confirm_title, plain_only=True)
        self.text_object(value.get("text"), pointer + "/text", lim.confirm_text)
        self.text_object(value.get("confirm"), pointer + "/confirm", lim.confirm_button, plain_only=True)
        self.text_object(value.get("deny"), pointer + "/deny", lim.confirm_button, plain_only=True)
        if value.get("style") is not None and value.get("style") not in BUTTON_STYLES:
            self.err("must be a valid enum value", pointer + "/style")

    def element(self, element: Any, pointer: str, action_ids: set[str]) -> None:
        lim = self.limits
        if not isinstance(element, dict):
            self.err("must provide an object", pointer)
            return
        if not isinstance(element.get("type"), str):
            self.err("missing required field: type", pointer)
            return
        action_id = element.get("action_id")
        if action_id is not None:
            self.string(action_id, pointer + "/action_id", lim.action_id)
            if isinstance(action_id, str):
                if action_id in action_ids:
                    self.err(f"action_id must be unique within a block: {action_id}", pointer + "/action_id")
                action_ids.add(action_id)
        if element["type"] == "button":
            self.text_object(element.get("text"), pointer + "/text", lim.button_text, plain_only=True)
            if "value" in element:
                self.string(element["value"], pointer + "/value", lim.button_value, required=False)
            if "url" in element:
                self.string(element["url"], pointer + "/url", lim.button_url)
            if element.get("style") is not None and element.get("style") not in BUTTON_STYLES:
                self.err("must be a valid enum value", pointer + "/style")
        if "confirm" in element:
            self.confirm(element["confirm"], pointer + "/confirm")

    def block(self, block: Any, pointer: str, block_ids: set[str]) -> None:
        lim = self.limits
        if not isinstance(block, dict):
            self.err("must provide an object", pointer)
            return
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            self.err(f"unsupported block type: {kind}", pointer + "/type")
            return
        block_id = block.get("block_id")
        if block_id is not None:
            self.string(block_id, pointer + "/block_id", lim.block_id)
            if isinstance(block_id, str):
                if block_id in block_ids:
                    self.err(f"duplicate block_id: {block_id}", pointer + "/block_id")
                block_ids.add(block_id)
        action_ids: set[str] = set()
        if kind == "section":
            text, fields = block.get("text"), block.get("fields")
            if text is None and fields is None:
                self.err("must provide text or fields", pointer)
            if text is not None:
                self.text_object(text, pointer + "/text", lim.section_text)
            if fields is not None:
                if not isinstance(fields, list):
                    self.err("must provide an array", pointer + "/fields")
                else:
                    if len(fields) > lim.section_fields:
                        self.err(f"no more than {lim.section_fields} items allowed", pointer + "/fields")
                    for i, field in enumerate(fields):
                        self.text_object(field, f"{pointer}/fields/{i}", lim.field_text)
            if block.get("accessory") is not None:
                self.element(block["accessory"], pointer + "/accessory", action_ids)
        elif kind == "header":
            self.text_object(block.get("text"), pointer + "/text", lim.header_text, plain_only=True)
        elif kind == "markdown":
            self.string(block.get("text"), pointer + "/text", lim.markdown_text)
        elif kind in ("actions", "context"):
            elements = block.get("elements")
            max_items = lim.actions_elements if kind == "actions" else lim.context_elements
            if not isinstance(elements, list):
                self.err("must provide an array", pointer + "/elements")
                return
            if not elements:
                self.err("must provide at least 1 items", pointer + "/elements")
            if len(elements) > max_items:
                self.err(f"no more than {max_items} items allowed", pointer + "/elements")
            for i, element in enumerate(elements):
                at = f"{pointer}/elements/{i}"
                if kind == "context":
                    if isinstance(element, dict) and element.get("type") in TEXT_TYPES:
                        self.text_object(element, at, lim.section_text)
                    elif not (isinstance(element, dict) and element.get("type") == "image"):
                        self.err("must be a text object or an image element", at)
                else:
                    self.element(element, at, action_ids)
        elif kind == "input":
            self.text_object(block.get("label"), pointer + "/label", 2000, plain_only=True)
            if block.get("element") is None:
                self.err("missing required field: element", pointer)
            else:
                self.element(block["element"], pointer + "/element", action_ids)


def validate_blocks(blocks: Any, *, max_blocks: int, limits: Limits, pointer: str = "/blocks") -> list[str]:
    """Every limit violation in ``blocks``, as ``"<message> [json-pointer:/blocks/…]"`` strings."""
    checker = _Checker(limits)
    if not isinstance(blocks, list):
        checker.err("must provide an array", pointer)
        return checker.errors
    if len(blocks) > max_blocks:
        checker.err(f"no more than {max_blocks} items allowed", pointer)
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        checker.block(block, f"{pointer}/{i}", block_ids)
    return checker.errors


def validate_view(view: Any, limits: Limits) -> list[str]:
    """Checks a ``view`` argument of ``views.open``/``push``/``update``/``publish``."""
    checker = _Checker(limits)
    if not isinstance(view, dict):
        checker.err("must provide an object", "/view")
        return checker.errors
    kind = view.get("type")
    if kind not in ("modal", "home"):
        checker.err("must be a valid enum value", "/view/type")
    if kind == "modal":
        checker.text_object(view.get("title"), "/view/title", limits.view_title, plain_only=True)
        for name in ("submit", "close"):
            if view.get(name) is not None:
                checker.text_object(view[name], f"/view/{name}", limits.view_button, plain_only=True)
    if view.get("private_metadata") is not None:
        checker.string(view["private_metadata"], "/view/private_metadata", limits.private_metadata, required=False)
    if view.get("callback_id") is not None:
        checker.string(view["callback_id"], "/view/callback_id", limits.callback_id, required=False)
    checker.errors.extend(
        validate_blocks(view.get("blocks"), max_blocks=limits.view_blocks, limits=limits, pointer="/view/blocks")
    )
    return checker.errors


def blocks_text_length(blocks: Any) -> int:
    """Total length of every ``text`` string anywhere in ``blocks`` (the aggregate behind ``msg_blocks_too_long``)."""
    total = 0
    stack: list[Any] = [blocks]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "text" and isinstance(value, str):
                    total += len(value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def with_block_ids(blocks: list[Any], make_id: Any) -> list[Any]:
    """A deep copy of ``blocks`` where every block has a ``block_id`` (Slack fills in random ones)."""
    copied: list[Any] = json.loads(json.dumps(blocks))
    for block in copied:
        if isinstance(block, dict) and "block_id" not in block:
            block["block_id"] = make_id()
    return copied
