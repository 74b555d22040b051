"""The config loader on hostile files: whatever the YAML says, it loads or stops with one short line
naming the file, the key and the problem; YAML bombs and deep nesting are refused at once."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import ConfigError
from bot.settings import MAX_CONFIG_BYTES, AppConfig, load_config

MAX_KEY = 160
MAX_PROBLEM = 360

# a long text, 5,000-20,000 characters: a random piece repeated to a drawn length. Hypothesis draws a text
# a character at a time, and drawing every character of one (`st.text(min_size=5_000)`) was most of this
# module's CPU; what the long value tests is its length (a message that quotes it must stay short), and
# its characters are still any text's (tests/hostile/test_payloads.py's `huge` is built the same way).
long_texts = st.builds(
    lambda piece, length: (piece * (length // len(piece) + 1))[:length],
    st.text(min_size=1, max_size=40),
    st.integers(5_000, 20_000),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    long_texts,
    st.sampled_from(["prod-eu", "C0123ABCD", "U0AAAAAAA", "0 9 * * 1-5", "Europe/Berlin", "30m", "in_cluster", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=20), scalars), inner, max_size=4)
    ),
    max_leaves=20,
)
DIGEST = "digests:\n  - {channel: C0123ABCD, schedule: '* * * * *', "
KNOWN_CLUSTER_KEYS = ["name", "kubeconfig", "context", "in_cluster", "channels", "approvers", "required_approvals"]
KNOWN_DIGEST_KEYS = ["channel", "schedule", "timezone", "clusters", "stuck_after", "name", "all_clear", "catch_up"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile-config")
    (path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    return path


def load(workdir: Path, text: str | bytes) -> AppConfig | ConfigError:
    path = workdir / "nsstuck.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        return load_config(path)  # anything but ConfigError fails the test
    except ConfigError as e:
        error = e
    assert error.source == str(path)
    message = str(error)
    assert "\n" not in message
    assert "Traceback" not in message
    assert len(error.problem) <= MAX_PROBLEM, error.problem[:500]
    assert error.key is None or len(error.key) <= MAX_KEY, error.key[:500]
    return error


def dump(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


@settings(max_examples=150, deadline=None)
@given(values)
def test_any_yaml_document(workdir: Path, document: Any) -> None:
    load(workdir, dump(document))


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=2000), st.binary(max_size=2000)))
def test_any_text_or_bytes(workdir: Path, content: str | bytes) -> None:
    load(workdir, content)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["clusters", "digests"]),
    st.data(),
    values,
)
def test_a_wrong_value_at_a_known_key_is_named(workdir: Path, section: str, data: st.DataObject, value: Any) -> None:
    cluster = {"name": "prod-eu", "kubeconfig": str(workdir / "kubeconfig"), "channels": ["C0123ABCD"]}
    digest = {"channel": "C0123ABCD", "schedule": "0 9 * * 1-5", "clusters": ["prod-eu"]}
    keys = KNOWN_CLUSTER_KEYS if section == "clusters" else KNOWN_DIGEST_KEYS
    key = data.draw(st.sampled_from(keys))
    (cluster if section == "clusters" else digest)[key] = value
    result = load(workdir, dump({"clusters": [cluster], "digests": [digest]}))
    if isinstance(result, ConfigError) and result.key and result.key[0].isalpha() and not result.key.startswith("line"):
        # a problem with the document's values is placed at a key of the document
        assert result.key.startswith(("clusters", "digests")), result


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 12),  # fan-out of each level
    st.integers(4, 12),  # levels
    st.booleans(),  # merge keys (`<<: *a`) rather than sequences of aliases
    st.sampled_from(["clusters", "digests", "unknown"]),
)
def test_yaml_bombs_are_refused_at_once(workdir: Path, fanout: int, levels: int, merge: bool, where: str) -> None:
    if merge:
        lines = ["l0: &l0 {" + ", ".join(f"k{i}: v" for i in range(fanout)) + "}"]
        for level in range(1, levels):
            lines.append(f"l{level}: &l{level} {{<<: [" + ", ".join([f"*l{level - 1}"] * fanout) + "]}")
    else:
        lines = ["l0: &l0 [" + ", ".join(["lol"] * fanout) + "]"]
        for level in range(1, levels):
            lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * fanout) + "]")
    lines.append(f"{where}: *l{levels - 1}")
    tracemalloc.start()
    try:
        result = load(workdir, "\n".join(lines) + "\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ConfigError)
    # "At once" is shown by what was built, not by a stopwatch (a loaded CI machine stretches any
    # wall-clock bound): reading the file takes a buffer of MAX_CONFIG_BYTES; a single expansion of
    # the smallest bomb here (100,000 values) would take several times what is left.
    assert peak < MAX_CONFIG_BYTES + 3 * 2**20, peak
    if (fanout**levels) > 200_000 or (merge and fanout ** (levels - 1) > 200_000):
        assert "YAML bomb" in result.problem


@settings(max_examples=30, deadline=None)
@given(st.integers(41, 20_000), st.sampled_from(["[", "{a: ", "- "]))
def test_deep_nesting_is_refused(workdir: Path, depth: int, opener: str) -> None:
    if opener == "- ":
        text = "clusters:\n  " + "- " * depth + "x\n"  # compact nested block sequences
    else:
        closer = {"[": "]", "{a: ": "}"}[opener]
        text = "clusters: " + opener * depth + "x" + closer * depth + "\n"
    result = load(workdir, text)
    assert isinstance(result, ConfigError)
    assert "nested deeper" in result.problem


def test_an_alias_inside_its_own_anchor_is_refused(workdir: Path) -> None:
    result = load(workdir, "clusters: &a [*a]\n")
    assert isinstance(result, ConfigError)
    assert "refers to a node that contains it" in result.problem


def test_anchors_and_aliases_of_a_normal_size_still_work(workdir: Path) -> None:
    text = (
        "clusters:\n"
        f"  - &base {{name: prod-eu, kubeconfig: {workdir / 'kubeconfig'}, approvers: &ops [U0AAAAAAA]}}\n"
        "  - {<<: *base, name: staging}\n"
        "digests:\n"
        "  - {channel: C0123ABCD, schedule: '0 9 * * 1-5', clusters: [prod-eu, staging]}\n"
    )
    config = load(workdir, text)
    assert isinstance(config, AppConfig)
    assert config.cluster_names == ["prod-eu", "staging"]
    assert config.require_cluster("staging").approvers == ("U0AAAAAAA",)


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("clusters:\n  - name: " + "a" * 1_000_000 + "\n", "clusters[0].name", "is not a valid cluster name"),
        ("clusters:\n  - name: x\n    kubeconfig: " + "k" * 5000 + "\n", "clusters[0].kubeconfig", "cannot be"),
        (DIGEST + "timezone: " + "z" * 5000 + "}\n", "digests[0].timezone", "unknown time zone"),
        (DIGEST + "stuck_after: 99999999999999w}\n", "digests[0].stuck_after", "too long a duration"),
        ("clusters: 2026-13-45\n", None, "a value cannot be read"),
        ("clusters:\n  - {name: x, required_approvals: " + "9" * 5000 + "}\n", None, "a value cannot be read"),
        ("clusters:\n  - {name: x, " + "k" * 1000 + ": 1}\n", "clusters[0].kkk", "unknown key"),
    ],
)
def test_huge_and_impossible_values_get_a_short_message_at_their_key(
    workdir: Path, text: str, key: str | None, fragment: str
) -> None:
    result = load(workdir, text)
    assert isinstance(result, ConfigError)
    assert fragment in result.problem
    if key is None:
        assert result.key is None or result.key.startswith("line")
    else:
        assert result.key is not None
        assert result.key.startswith(key)


def test_a_file_larger_than_a_config_is_refused_unread(workdir: Path) -> None:
    result = load(workdir, "# " + "x" * (2 << 20) + "\n")
    assert isinstance(result, ConfigError)
    assert "larger than" in result.problem
