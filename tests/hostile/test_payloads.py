"""Every payload the running bot parses, signed (so it gets past the door) but otherwise hostile:
slash commands with any fields, remediation clicks with missing or wrong-typed parts, events, modal
payloads, url_verification, and bodies that are not payloads at all.

Whatever comes, the bot answers below 500 and briefly, records nothing, shows nothing in a channel,
logs no failure, and stays up. The garbage is made so that it is garbage: each click breaks at least
one thing Slack would never break (the user, the action, the button's value, the type, the channel,
the response_url), and is sent as alice, who asked for the pending change, so a click let through by
mistake would be recorded (a new request, or a refused vote) and fail the test.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from bot.slack import ids
from bot.slack.parsing import Diagnose, parse
from bot.slack.shapes import CHANNEL_ID, USER_ID
from tests.fakes.slackapi.pytest_plugin import ALICE, OPS_CHANNEL
from tests.hostile.conftest import VISIBLE, Hostile
from tests.hostile.test_parser import texts as command_texts

JSON = dict[str, Any]
DELETE = object()  # a marker: remove the key
FORM = "application/x-www-form-urlencoded"
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
MORE = settings(SETTINGS, max_examples=300)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
huge = st.integers(5_000, 300_000).map(lambda n: "\u00e9" * n)  # two bytes each in UTF-8
near_miss_urls = st.sampled_from(
    [
        "https://evil.example/hooks",
        "http://hooks.slack.com/commands/T1/1/x",  # Slack's host, but not https
        "https://hooks.slack.com.evil.example/x",
        "https://user@hooks.slack.com/x",
        "https://hooks.slack.com:8443/x",
        "http://127.0.0.1:1/webhook/x",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "//hooks.slack.com/x",
        "http://[::1/",
        "",
    ]
)
garbage = st.one_of(json_values, huge, near_miss_urls, st.sampled_from(["", " ", "\x00", "<!channel>", "null"]))
not_a_user_id = st.one_of(
    json_values.filter(lambda v: not (isinstance(v, str) and USER_ID.fullmatch(v))),
    st.sampled_from([f"{ALICE}\n", f" {ALICE}", ALICE.lower(), "U0", "B0AAAAAAA", "<@U0AAAAAAA>", "U" + "A" * 40]),
)


def put(payload: JSON, path: tuple[str | int, ...], value: object) -> None:
    """Set (or, with DELETE, remove) the value at `path`, creating nothing that is not there."""
    node: Any = payload
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if value is DELETE:
        if isinstance(node, dict):
            node.pop(last, None)
        elif isinstance(node, list) and isinstance(last, int) and last < len(node):
            node.pop(last)
    elif isinstance(node, dict) or (isinstance(node, list) and isinstance(last, int) and last < len(node)):
        node[last] = value


NOISE_KEYS = ["team", "enterprise", "container", "trigger_id", "api_app_id", "token", "message", "state", "view", "x"]


def noise(data: st.DataObject, payload: JSON) -> None:
    """Random damage elsewhere: wrong types and huge values in fields nobody should rely on."""
    if not data.draw(st.booleans(), label="noisy"):
        return
    for key in data.draw(st.lists(st.sampled_from(NOISE_KEYS), unique=True, max_size=2), label="noise keys"):
        put(payload, (key,), data.draw(st.one_of(st.just(DELETE), garbage), label=f"noise {key}"))


def breakage(data: st.DataObject, payload: JSON, value_near_misses: list[str], real_action: str, real: str) -> str:
    """Break at least one thing that makes a click a click of nsstuck's; says which, for the record."""
    kinds = data.draw(
        st.lists(
            st.sampled_from(["user", "actions", "action_id", "value", "type", "channel", "response_url"]),
            min_size=1,
            max_size=2,
            unique=True,
        ),
        label="broken",
    )
    for kind in kinds:
        if kind == "user":
            where = data.draw(st.sampled_from([("user",), ("user", "id")]))
            put(payload, where, data.draw(st.one_of(st.just(DELETE), not_a_user_id), label="user"))
        elif kind == "actions":
            value = data.draw(
                st.one_of(
                    st.just(DELETE),
                    st.just([]),
                    json_values.filter(lambda v: not isinstance(v, list) or not v),
                    st.lists(json_values.filter(lambda v: not isinstance(v, dict)), min_size=1, max_size=2),
                    st.just([{"action_id": 7, "value": "1"}]),
                    st.just([{"value": "1"}]),
                ),
                label="actions",
            )
            put(payload, ("actions",), value)
        elif kind == "action_id":
            value = data.draw(
                st.one_of(
                    st.sampled_from(
                        [
                            f"{real_action}\n",
                            f"{real_action} ",
                            real_action.upper(),
                            f"{ids.REQUEST_REMEDY}:9999999",
                            f"{ids.REQUEST_REMEDY}:",
                            "nsstuck_approve_all",
                            "",
                            "a" * 300,
                        ]
                    ),
                    st.text(max_size=40),
                    json_values.filter(lambda v: not isinstance(v, str)),
                ).filter(lambda v: not _routes(v)),
                label="action_id",
            )
            put(payload, ("actions", 0, "action_id"), value)
        elif kind == "value":
            value = data.draw(
                st.one_of(st.sampled_from(value_near_misses), st.text(max_size=30), json_values, huge).filter(
                    lambda v: v != real
                ),
                label="value",
            )
            put(payload, ("actions", 0, "value"), DELETE if value is None and data.draw(st.booleans()) else value)
        elif kind == "type":
            put(
                payload,
                ("type",),
                data.draw(st.one_of(st.just(DELETE), garbage.filter(lambda v: v != "block_actions")), label="type"),
            )
        elif kind == "channel":
            not_a_channel = json_values.filter(lambda v: not (isinstance(v, str) and CHANNEL_ID.fullmatch(v)))
            channel = st.one_of(st.just(DELETE), not_a_channel, st.builds(lambda v: {"id": v}, not_a_channel))
            put(payload, ("channel",), data.draw(channel, label="channel"))
            put(payload, ("container", "channel_id"), data.draw(st.one_of(st.just(DELETE), not_a_channel)))
        elif kind == "response_url":
            put(payload, ("response_url",), data.draw(st.one_of(near_miss_urls, json_values.filter(bool))))
    return ",".join(kinds)


def _routes(action_id: object) -> bool:
    return isinstance(action_id, str) and (
        action_id in (ids.APPROVE, ids.REJECT) or bool(ids.REQUEST_REMEDY_PATTERN.search(action_id))
    )


def interactive(hostile: Hostile, payload: JSON) -> Any:
    body = urlencode({"payload": json.dumps(payload)})
    return hostile.flow.bot.driver.sign(body, FORM, payload=payload, kind="raw")


def run(hostile: Hostile, make: Callable[[], Any]) -> None:
    before = hostile.baseline()
    delivery = hostile.send(make())
    event(f"HTTP {delivery.status}")
    hostile.assert_harmless(delivery, before)


# -- slash commands ---------------------------------------------------------------------------------

COMMAND_FIELDS = [
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "command",
    "text",
    "api_app_id",
    "is_enterprise_install",
    "response_url",
    "trigger_id",
]
form_values = st.one_of(
    st.text(max_size=40),
    huge,
    near_miss_urls,
    st.sampled_from([OPS_CHANNEL, ALICE, "/nsstuck", "/nsstuck2", "", "payload", "prod-eu ddd"]),
)


@SETTINGS
@given(data=st.data())
def test_slash_commands_with_any_fields(hostile: Hostile, data: st.DataObject) -> None:
    text = data.draw(
        st.one_of(command_texts, st.sampled_from(["prod-eu ddd", "history", "help", "clusters", "prod-eu payload-x"])),
        label="text",
    )
    builder = hostile.flow.bot.driver.builder
    form: dict[str, Any] = dict(builder.slash_command("/nsstuck", text, user=ALICE, channel=OPS_CHANNEL))
    for key in data.draw(st.lists(st.sampled_from(COMMAND_FIELDS), unique=True, max_size=4), label="changed"):
        put(form, (key,), data.draw(st.one_of(st.just(DELETE), form_values), label=key))
    extra = data.draw(st.dictionaries(st.text(min_size=1, max_size=12), form_values, max_size=3), label="extra")
    form.update({k: v for k, v in extra.items() if k not in COMMAND_FIELDS})
    if form.get("command") == "/nsstuck" and isinstance(parse(str(form.get("text") or ""), ["prod-eu"]), Diagnose):
        # a diagnosis asked for properly is not garbage: break who asks, or where from
        key = data.draw(st.sampled_from(["user_id", "channel_id", "command", "response_url"]), label="broken")
        bad = {
            "user_id": not_a_user_id.filter(lambda v: isinstance(v, str)),
            "channel_id": st.text(max_size=20).filter(lambda v: not CHANNEL_ID.fullmatch(v)),
            "command": st.text(max_size=20).filter(lambda v: v != "/nsstuck"),
            "response_url": near_miss_urls,
        }[key]
        put(form, (key,), data.draw(st.one_of(st.just(DELETE), bad), label=f"broken {key}"))
    body = urlencode(form)
    assume(len(body) < 1 << 20)
    run(hostile, lambda: hostile.flow.bot.driver.sign(body, FORM, payload=form, kind="raw"))


# -- the remediation buttons ------------------------------------------------------------------------


def near_misses(hostile: Hostile, button: str) -> tuple[str, list[str]]:
    """The real value of a button, and values that come close to it without being it."""
    if button == "remedy":
        real = str(hostile.request_button["value"])
        run_id, remedy = real.split(":")
        return real, [
            f" {real}",
            f"{real}\n",
            f"+{real}",
            f"0{real}",
            f"{run_id}_0:{remedy}",
            "".join(chr(0x0660 + int(d)) for d in run_id) + f":{remedy}",  # Arabic-Indic digits
            f"{run_id}.0:{remedy}",
            f"{2**70}:{remedy}",
            f"{2**63}:{remedy}",
            f"-{real}",
            f"{real}x",
            f"{run_id}:{remedy.upper()}",
            f"{int(run_id) + 1}:{remedy}",
            f"{run_id}:",
            f":{remedy}",
            f"{real}:{remedy}",
            f"{run_id}:" + "a" * 5000,
        ]
    real = str(hostile.request_id)
    return real, [
        f" {real}",
        f"{real} ",
        f"{real}\n",
        f"+{real}",
        f"0{real}",
        f"{real}_0",
        "".join(chr(0x0660 + int(d)) for d in real),
        "".join(chr(0xFF10 + int(d)) for d in real),  # full-width digits
        f"{real}.0",
        f"{real}e0",
        str(2**63),
        str(2**70),
        "9" * 5000,
        f"-{real}",
        "0",
        "999999",
        "'; DROP TABLE remediation_requests; --",
    ]


buttons = st.sampled_from(["remedy", ids.APPROVE, ids.REJECT])


@SETTINGS
@given(button=buttons, data=st.data())
def test_a_click_with_a_value_that_is_not_the_buttons(hostile: Hostile, button: str, data: st.DataObject) -> None:
    """Everything as in a real click but the button's value: the bot says it is not one of its buttons
    (or that there is no such request), to the one who clicked only, and does nothing else."""
    payload = copy.deepcopy(hostile.clicks[button])
    real, near = near_misses(hostile, button)
    value = data.draw(
        st.one_of(st.sampled_from(near), st.text(max_size=30), json_values, huge).filter(lambda v: v != real),
        label="value",
    )
    put(payload, ("actions", 0, "value"), DELETE if value is None else value)
    run(hostile, lambda: interactive(hostile, payload))


@MORE
@given(button=buttons, data=st.data())
def test_a_click_broken_anywhere(hostile: Hostile, button: str, data: st.DataObject) -> None:
    """A click with one or two of the things that make it a click broken (who, which action, which
    value, what type, from where, where to answer), and random damage around."""
    payload = copy.deepcopy(hostile.clicks[button])
    real, near = near_misses(hostile, button)
    action = hostile.request_button["action_id"] if button == "remedy" else button
    broken = breakage(data, payload, near, action, real)
    noise(data, payload)
    event(f"broken: {broken}")
    run(hostile, lambda: interactive(hostile, payload))


# -- events, modals, url_verification, and what is not a payload at all -----------------------------

EVENT_KINDS = ["app_home_opened", "app_mention", "message", "reaction_added", "", "x" * 300]
INTERACTIVE_KINDS = [
    "view_submission",
    "view_closed",
    "shortcut",
    "message_action",
    "block_suggestion",
    "interactive_message",
    "dialog_submission",
]


@st.composite
def events(draw: st.DrawFn, builder: Any) -> JSON:
    kind = draw(st.sampled_from(EVENT_KINDS))
    event: JSON = {"type": kind, "channel": draw(st.one_of(st.just(OPS_CHANNEL), garbage)), "ts": "1.2"}
    if kind == "app_home_opened":
        # garbage: a user who is not one, or a tab that is not the Home tab
        if draw(st.booleans()):
            event["user"] = draw(st.one_of(st.just(DELETE), not_a_user_id))
            event["tab"] = draw(st.one_of(st.just("home"), garbage))
        else:
            event["user"] = ALICE
            event["tab"] = draw(garbage.filter(lambda v: v != "home"))
        event = {k: v for k, v in event.items() if v is not DELETE}
    else:
        event["user"] = draw(st.one_of(st.just(ALICE), garbage))
        event["text"] = draw(st.one_of(st.text(max_size=50), huge))
    body = builder.event_callback(event)
    for key in draw(st.lists(st.sampled_from(["event", "authorizations", "team_id", "event_id", "type"]), max_size=2)):
        body[key] = draw(st.one_of(garbage, st.just([{"team_id": 5}]), st.just([7])))
    return dict(body)


def modal_payloads(builder: Any) -> st.SearchStrategy[JSON]:
    return st.builds(
        lambda kind, view, extra: {
            "type": kind,
            "user": {"id": ALICE},
            "team": {"id": builder.ident.team_id},
            "api_app_id": builder.ident.app_id,
            "view": view,
            **extra,
        },
        st.sampled_from(INTERACTIVE_KINDS),
        st.one_of(garbage, st.fixed_dictionaries({"type": st.sampled_from(["modal", "home"]), "callback_id": garbage})),
        st.dictionaries(st.sampled_from(["callback_id", "response_urls", "actions", "user", "trigger_id"]), garbage),
    )


@MORE
@given(data=st.data())
def test_events_modals_and_other_bodies(hostile: Hostile, data: st.DataObject) -> None:
    driver = hostile.flow.bot.driver
    kind = data.draw(st.sampled_from(["event", "modal", "url_verification", "json", "form", "raw"]), label="kind")
    if kind == "event":
        body = data.draw(events(driver.builder), label="event")
        request = driver.sign(json.dumps(body), "application/json", payload=body, kind="raw")
    elif kind == "modal":
        payload = data.draw(modal_payloads(driver.builder), label="modal")
        request = interactive(hostile, payload)
    elif kind == "url_verification":
        body = {"type": "url_verification", "token": "t", "challenge": data.draw(garbage, label="challenge")}
        request = driver.sign(json.dumps(body), "application/json", payload=body, kind="raw")
    elif kind == "json":
        value = data.draw(st.one_of(json_values, st.dictionaries(st.text(max_size=12), json_values)), label="json")
        request = driver.sign(json.dumps(value), data.draw(st.sampled_from(["application/json", FORM, "text/plain"])))
    elif kind == "form":
        fields = data.draw(
            st.dictionaries(
                st.sampled_from(["payload", "command", "text", "ssl_check", "type", "x"]), st.text(max_size=60)
            ),
            label="form",
        )
        request = driver.sign(urlencode(fields), FORM)
    else:
        raw = data.draw(
            st.one_of(st.text(max_size=300), st.sampled_from(["{", "{}}", "payload=", "payload=%7B", "[]", "null"])),
            label="raw",
        )
        request = driver.sign(raw, data.draw(st.sampled_from(["application/json", FORM, ""])))
    if kind == "url_verification" and isinstance(body["challenge"], str) and 0 < len(body["challenge"]) <= 200:
        return  # a real url_verification: answered with its challenge, which is what Slack expects
    run(hostile, lambda: request)


@pytest.mark.parametrize("key", ["event", "view", "message", "container", "state", "item"])
@pytest.mark.parametrize("kind", ["event_callback", "block_actions", "not-a-kind"])
def test_an_object_that_is_null(hostile: Hostile, key: str, kind: str) -> None:
    """Bolt reads these keys as objects whenever they are there (`body.get("event", {}).get(...)`): a
    null one made it raise, an HTTP 500 (found by the property above, once, in CI)."""
    driver = hostile.flow.bot.driver
    body = dict(driver.builder.event_callback({"type": "app_mention", "user": ALICE, "text": "hi", "ts": "1.2"}))
    body.update(type=kind, **{key: None})
    before = hostile.baseline()
    delivery = hostile.send(driver.sign(json.dumps(body), "application/json", payload=body, kind="raw"))
    hostile.assert_harmless(delivery, before)
    assert delivery.status == 400, (delivery.status, delivery.body)
    assert f"`{key}` is not an object" in delivery.body


# -- and afterwards ---------------------------------------------------------------------------------


def test_after_all_of_it_the_bot_is_up_and_nothing_happened(hostile: Hostile) -> None:
    """Runs after the properties above (pytest keeps the order of a module): whatever they sent, the
    work it may have started in the background has not posted, recorded or broken anything either."""
    assert len(hostile.sent) > 100
    time.sleep(1.5)
    hostile.assert_up()
    assert hostile.rows() == hostile.initial.rows
    assert {m: len(hostile.slack.calls(m)) for m in VISIBLE} == hostile.initial.calls
    assert hostile.messages() == hostile.initial.messages
    hostile.assert_log_clean()
    assert hostile.slack.server_errors == []
