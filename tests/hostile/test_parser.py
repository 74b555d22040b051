"""The /nsstuck text parser on any text at all: it answers with a command or a short message, never
an exception, and never quotes a flood of input back."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.parsing import NAMESPACE_NAME, Diagnose, Help, History, Invalid, ListClusters, parse

CLUSTERS = ["prod-eu", "staging"]
MAX_MESSAGE = 400

slack_ids = st.from_regex(r"[A-Z0-9]{1,12}", fullmatch=True)
# what Slack puts in a command's text when people type mentions, links and special words
escaped = st.one_of(
    st.builds(lambda i, n: f"<#C{i}|{n}>", slack_ids, st.text(max_size=30)),
    st.builds(lambda i: f"<@U{i}>", slack_ids),
    st.builds(lambda i, n: f"<!subteam^S{i}|@{n}>", slack_ids, st.text(max_size=20)),
    st.sampled_from(["<!channel>", "<!here>", "<!everyone>", "<https://example.com|x>", "&lt;&gt;&amp;"]),
)
control = st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp", "Zs"])
words = st.one_of(
    st.sampled_from([*CLUSTERS, "help", "clusters", "history", "HISTORY", "--help", "-h", "prod-ue", "ddd"]),
    st.from_regex(r"[a-z0-9-]{1,70}", fullmatch=True),
    st.text(min_size=1, max_size=80),
    st.text(alphabet=control, min_size=1, max_size=10),
    escaped,
    st.text(alphabet="<>&`*_~", min_size=1, max_size=40),
)
texts = st.one_of(
    st.text(),
    st.lists(words, max_size=6).map(" ".join),
    st.lists(st.tuples(words, st.text(alphabet=control, max_size=3)), max_size=6).map(
        lambda parts: "".join(w + sep for w, sep in parts)
    ),
    st.builds(lambda w, n: w * n, words, st.integers(1, 2000)),
)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_any_text_gives_a_command_or_a_short_message(text: str) -> None:
    result = parse(text, CLUSTERS)  # raising anything at all fails the test
    assert isinstance(result, Diagnose | ListClusters | History | Help | Invalid)
    if isinstance(result, Invalid):
        assert 0 < len(result.message) < MAX_MESSAGE
        # the caller's long words are cut, not echoed whole
        for word in text.split():
            if len(word) > 40:
                assert word not in result.message
        # and nothing in it pings or links: every < and > of the input is escaped
        assert not re.search(r"<[!@#]", result.message)
    elif isinstance(result, Diagnose):
        assert result.cluster in CLUSTERS
        assert NAMESPACE_NAME.match(result.namespace)
    elif isinstance(result, History):
        assert result.cluster is None or result.cluster in CLUSTERS
        assert result.namespace is None or NAMESPACE_NAME.match(result.namespace)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=501, max_size=200_000))
def test_a_long_text_is_refused_without_being_read(text: str) -> None:
    result = parse(text, CLUSTERS)
    assert isinstance(result, Invalid)
    assert "too long" in result.message
    assert len(result.message) < MAX_MESSAGE


@settings(max_examples=300, deadline=None)
@given(st.lists(st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,20}[a-z0-9])?", fullmatch=True), max_size=30), texts)
def test_any_registered_clusters_and_any_text(clusters: list[str], text: str) -> None:
    result = parse(text, clusters)
    if isinstance(result, Invalid):
        assert len(result.message) < MAX_MESSAGE + 30 * 25  # the listing of what is registered may add to it
    elif isinstance(result, Diagnose):
        assert result.cluster in clusters
