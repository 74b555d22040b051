"""`bot/domain/values.py` on objects of shapes the API server would not send but a broken one (or a proxy)
might: whatever is where a container, an environment, a command line or annotations should be, nothing
fails, and no value a container's fields could carry is kept. The end-to-end tests
(test_secret_values_not_kept.py, the secrets sweeps) use well-formed objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.domain.values import (
    HELM_RELEASE_NAME,
    LAST_APPLIED,
    REDACTED,
    flag_names,
    snapshot_safe,
    values_in,
    without_env_values,
    without_values,
)

CANARY = "canary-value-5b1e"


@pytest.mark.parametrize("spec", [None, "a string", ["a", "list"], {"containers": None}, {"containers": ["x", 7]}])
def test_a_pod_whose_spec_is_not_what_it_should_be_is_left_as_it_is(spec: Any) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    before = copy.deepcopy(pod)
    assert without_env_values(pod) == before
    assert values_in(before) == []


def test_a_pod_without_environment_values_names_none() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "env": [{"name": "A"}]}]}}
    assert values_in(pod) == []
    pod["metadata"] = {"annotations": {LAST_APPLIED: CANARY}}
    assert values_in(pod) == [f"the {LAST_APPLIED} annotation"]
    assert CANARY not in str(without_values(pod))


def test_environment_entries_that_are_not_mappings_are_kept_and_values_dropped() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "c", "env": ["odd", {"name": "A", "value": CANARY}]}]},
    }
    assert values_in(pod) == ["the environment values of its containers"]
    assert without_env_values(pod)["spec"]["containers"][0]["env"] == ["odd", {"name": "A"}]


@pytest.mark.parametrize("argv", [None, "--token=x", {"a": 1}, 7])
def test_a_command_line_that_is_not_a_list_keeps_nothing(argv: object) -> None:
    assert flag_names(argv) == []


def test_every_kind_of_word_of_a_command_line() -> None:
    argv = [7, None, "-", "--", "--key=" + CANARY, "--verbose", "-v", "-p" + CANARY, CANARY, "--x=", "="]
    assert flag_names(argv) == [
        REDACTED,
        REDACTED,
        "-",
        "--",
        f"--key={REDACTED}",
        "--verbose",
        "-v",
        f"-p{REDACTED}",
        REDACTED,
        f"--x={REDACTED}",
        REDACTED,
    ]
    assert flag_names(["/manager", "--a=b"], program=True) == ["/manager", f"--a={REDACTED}"]
    assert flag_names(["sh -c " + CANARY], program=True) == [REDACTED]


def test_a_snapshot_keeps_only_the_annotations_a_rule_reads_wherever_they_are() -> None:
    obj: dict[str, Any] = {
        "metadata": {"annotations": {HELM_RELEASE_NAME: "kiali", "secret": CANARY}},
        "spec": {
            "template": {"metadata": {"annotations": {"secret": CANARY}}},
            "list": [{"metadata": {"annotations": "not a mapping"}}, [{"metadata": {"annotations": None}}], 3],
            "containers": [
                "not a container",
                {
                    "name": "c",
                    "args": ["--k=" + CANARY],
                    "livenessProbe": "not a probe",
                    "readinessProbe": {"httpGet": {"httpHeaders": ["odd", {"name": "X", "value": CANARY}]}},
                    "startupProbe": {"exec": {"command": [CANARY]}},
                    "lifecycle": {"preStop": {"exec": {"command": [CANARY]}}, "postStart": None},
                },
            ],
        },
    }
    safe = snapshot_safe(obj)
    assert CANARY not in str(safe)
    assert safe["metadata"]["annotations"] == {HELM_RELEASE_NAME: "kiali"}
    assert "annotations" not in safe["spec"]["template"]["metadata"]
    assert "annotations" not in safe["spec"]["list"][0]["metadata"]
    container = safe["spec"]["containers"][1]
    assert container["readinessProbe"]["httpGet"]["httpHeaders"] == [{}, {"name": "X"}]
    assert container["args"] == [f"--k={REDACTED}"]
