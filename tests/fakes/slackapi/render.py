"""Plain-text rendering of messages and views: roughly what a person reads in the Slack client.

mrkdwn is kept as written (``*bold*`` stays ``*bold*``); interactive elements become bracketed labels
(``[Approve]``); images become ``[image: alt text]``. One line per block (sections with fields get one
line per field).
"""

from __future__ import annotations

from typing import Any


def _text(obj: Any) -> str:
    if isinstance(obj, dict):
        value = obj.get("text")
        return value if isinstance(value, str) else ""
    return obj if isinstance(obj, str) else ""


def render_element(element: Any) -> str:
    if not isinstance(element, dict):
        return ""
    kind = element.get("type")
    if kind == "button":
        return f"[{_text(element.get('text'))}]"
    if kind in ("plain_text", "mrkdwn"):
        return _text(element)
    if kind == "image":
        return f"[image: {element.get('alt_text', '')}]"
    if kind == "overflow":
        return "[...]"
    if "placeholder" in element:
        return f"[{_text(element.get('placeholder'))}]"
    if "initial_option" in element:
        return f"[{_text(element['initial_option'].get('text'))}]"
    return f"[{kind}]"


def _rich_text(node: Any) -> str:
    if isinstance(node, list):
        return "".join(_rich_text(n) for n in node)
    if not isinstance(node, dict):
        return ""
    kind = node.get("type")
    if kind == "text":
        return str(node.get("text", ""))
    if kind == "link":
        return str(node.get("text") or node.get("url", ""))
    if kind == "user":
        return f"<@{node.get('user_id', '')}>"
    if kind == "channel":
        return f"<#{node.get('channel_id', '')}>"
    if kind == "emoji":
        return f":{node.get('name', '')}:"
    if kind == "rich_text_list":
        return "\n".join("• " + _rich_text(item) for item in node.get("elements", []))
    out = _rich_text(node.get("elements", []))
    return out + "\n" if kind in ("rich_text_section", "rich_text_preformatted", "rich_text_quote") else out


def render_block(block: Any) -> list[str]:
    if not isinstance(block, dict):
        return []
    kind = block.get("type")
    lines: list[str] = []
    if kind == "section":
        if block.get("text") is not None:
            lines.append(_text(block["text"]))
        lines.extend(_text(field) for field in block.get("fields") or [])
        if block.get("accessory") is not None:
            accessory = render_element(block["accessory"])
            if lines:
                lines[-1] = f"{lines[-1]} {accessory}"
            else:
                lines.append(accessory)
    elif kind == "header":
        lines.append(_text(block.get("text")))
    elif kind == "divider":
        lines.append("---")
    elif kind == "markdown":
        lines.append(str(block.get("text", "")))
    elif kind in ("actions", "context", "context_actions"):
        lines.append(" ".join(part for part in (render_element(e) for e in block.get("elements") or []) if part))
    elif kind == "image":
        lines.append(f"[image: {block.get('alt_text', '')}]")
    elif kind == "input":
        lines.append(f"{_text(block.get('label'))}: {render_element(block.get('element'))}")
    elif kind == "rich_text":
        lines.append(_rich_text(block.get("elements", [])).rstrip("\n"))
    elif kind == "file":
        lines.append(f"[file: {block.get('external_id', '')}]")
    else:
        lines.append(f"[{kind}]")
    return lines


def render_blocks(blocks: Any) -> str:
    lines: list[str] = []
    for block in blocks or []:
        lines.extend(render_block(block))
    return "\n".join(lines)


def render_message(message: dict[str, Any]) -> str:
    """The message's blocks as text, or its ``text`` when it has no blocks; shared files are listed after."""
    blocks = message.get("blocks")
    body = render_blocks(blocks) if blocks else str(message.get("text") or "")
    for attachment in message.get("attachments") or []:
        if isinstance(attachment, dict):
            extra = render_blocks(attachment.get("blocks")) or str(
                attachment.get("text") or attachment.get("fallback") or ""
            )
            body = f"{body}\n{extra}" if body else extra
    for shared in message.get("files") or []:
        line = f"[file: {shared.get('title') or shared.get('name')}]"
        body = f"{body}\n{line}" if body else line
    return body


def render_view(view: dict[str, Any]) -> str:
    """A modal or Home tab: title (if any), blocks, then the submit/close labels of a modal."""
    lines: list[str] = []
    if view.get("title") is not None:
        lines.append(_text(view["title"]))
    body = render_blocks(view.get("blocks"))
    if body:
        lines.append(body)
    buttons = [f"[{_text(view[name])}]" for name in ("close", "submit") if view.get(name) is not None]
    if buttons:
        lines.append(" ".join(buttons))
    return "\n".join(lines)
