"""One module per remedy kind (issue 17): every cluster-changing Action has exactly one kind in the
registry, and outside bot/domain and bot/diagnosis each such Action is named only by its kind's
module and the registry, so that nothing else branches on it."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import replace
from pathlib import Path

import pytest

import bot.remediation.kinds
from bot.domain.findings import Action
from bot.remediation.kinds.registry import KINDS, kind_of, register
from bot.remediation.permissions import PERMISSIONS, remediation_rules

REPO = Path(__file__).resolve().parents[2]
BOT = REPO / "bot"
# the modules that define and offer the actions, where naming them is the point
EXEMPT = (BOT / "domain", BOT / "diagnosis")
KINDS_DIR = Path("bot/remediation/kinds")
# the kinds package's modules that are not kinds
NOT_KINDS = {"base", "registry", "_ops"}

CHANGING = [action for action in Action if action.changes_cluster]
NOT_CHANGING = [action for action in Action if not action.changes_cluster]


# -- the registry ------------------------------------------------------------------------------------


def test_every_cluster_changing_action_has_exactly_one_kind() -> None:
    assert CHANGING, "no action changes the cluster: the rest of this file would prove nothing"
    assert set(KINDS) == set(CHANGING)
    for action in CHANGING:
        assert kind_of(action) is KINDS[action]
        assert KINDS[action].action is action


@pytest.mark.parametrize("action", NOT_CHANGING, ids=str)
def test_an_action_that_changes_nothing_has_no_kind(action: Action) -> None:
    assert action not in KINDS
    with pytest.raises(ValueError, match="changes nothing in the cluster"):
        kind_of(action)


def test_the_registry_refuses_two_kinds_for_one_action() -> None:
    kind = KINDS[CHANGING[0]]
    with pytest.raises(ValueError, match="two remedy kinds"):
        register([kind, replace(kind, doing="the same again")])


@pytest.mark.parametrize("action", NOT_CHANGING[:1], ids=str)
def test_the_registry_refuses_a_kind_for_an_action_that_changes_nothing(action: Action) -> None:
    with pytest.raises(ValueError, match="changes nothing in the cluster"):
        register([replace(KINDS[CHANGING[0]], action=action)])


def test_every_kind_module_is_registered_under_its_own_action() -> None:
    names = {m.name for m in pkgutil.iter_modules(bot.remediation.kinds.__path__)} - NOT_KINDS
    assert names == {action.value for action in CHANGING}
    for name in names:
        module = importlib.import_module(f"bot.remediation.kinds.{name}")
        assert module.KIND is KINDS[Action(name)], name


def test_the_permissions_are_the_kinds_rules_in_the_registry_order() -> None:
    assert list(PERMISSIONS.items()) == [(action, kind.rules) for action, kind in KINDS.items()]
    assert remediation_rules() == tuple(dict.fromkeys(rule for kind in KINDS.values() for rule in kind.rules))


def test_only_force_finalizing_asks_for_more_than_the_cluster_does() -> None:
    strict = {
        action: (kind.min_approvals, kind.needs_complete_diagnosis, kind.needs_fresh_evidence)
        for action, kind in KINDS.items()
        if (kind.min_approvals, kind.needs_complete_diagnosis, kind.needs_fresh_evidence) != (1, False, False)
    }
    assert strict == {Action.FORCE_FINALIZE_NAMESPACE: (2, True, True)}


# -- who names a cluster-changing action ----------------------------------------------------------


def named_actions(source: str) -> set[Action]:
    """The cluster-changing actions a module's source names: as an attribute (`Action.X`, also through
    an alias or a module), or as a string that is a member's name or value (`Action("x")`, `Action["X"]`)."""
    by_word = {word: action for action in CHANGING for word in (action.name, action.value)}
    found: set[Action] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in by_word:
            found.add(by_word[node.attr])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in by_word:
            found.add(by_word[node.value])
    return found


def naming_modules(sources: dict[Path, str]) -> dict[Action, set[Path]]:
    """For each cluster-changing action, the modules (paths relative to the repository) naming it."""
    out: dict[Action, set[Path]] = {action: set() for action in CHANGING}
    for path, source in sources.items():
        for action in named_actions(source):
            out[action].add(path)
    return out


def misplaced(named: dict[Action, set[Path]]) -> dict[Action, set[Path]]:
    """The actions named anywhere but their kind's module and the registry, with those other modules."""
    out: dict[Action, set[Path]] = {}
    for action, paths in named.items():
        elsewhere = paths - {KINDS_DIR / f"{action.value}.py", KINDS_DIR / "registry.py"}
        if elsewhere:
            out[action] = elsewhere
    return out


def bot_sources() -> dict[Path, str]:
    return {
        path.relative_to(REPO): path.read_text(encoding="utf-8")
        for path in sorted(BOT.rglob("*.py"))
        if not any(path.is_relative_to(exempt) for exempt in EXEMPT)
    }


def test_each_cluster_changing_action_is_named_only_by_its_kind_and_the_registry() -> None:
    sources = bot_sources()
    assert KINDS_DIR / "registry.py" in sources  # the walk reaches the kinds
    named = naming_modules(sources)
    assert {action: paths for action, paths in named.items() if len(paths) > 2} == {}
    assert misplaced(named) == {}
    for action in CHANGING:  # and its kind does name it: the scan sees what it is meant to see
        assert KINDS_DIR / f"{action.value}.py" in named[action], action


def test_the_scan_finds_an_action_named_anywhere_else() -> None:
    policy = Path("bot/remediation/policy.py")
    sources = {
        KINDS_DIR / "force_delete_pod.py": "KIND = RemedyKind(action=Action.FORCE_DELETE_POD)",
        KINDS_DIR / "registry.py": "",
        policy: "def f(action):\n    return action is findings.Action.FORCE_FINALIZE_NAMESPACE\n",
        Path("bot/slack/blocks.py"): 'LABELS = {Action("remove_finalizer"): "x", Action["DELETE_APISERVICE"]: "y"}',
        Path("bot/services/x.py"): "if action == 'wait' or action is Action.INVESTIGATE: pass",
    }
    assert misplaced(naming_modules(sources)) == {
        Action.FORCE_FINALIZE_NAMESPACE: {policy},
        Action.REMOVE_FINALIZER: {Path("bot/slack/blocks.py")},
        Action.DELETE_APISERVICE: {Path("bot/slack/blocks.py")},
    }


def test_the_scan_counts_more_than_two_modules_even_inside_the_kinds() -> None:
    action = CHANGING[0]
    own, registry = KINDS_DIR / f"{action.value}.py", KINDS_DIR / "registry.py"
    reference = f"Action.{action.name}"
    named = naming_modules({own: reference, registry: reference})
    assert misplaced(named) == {}
    other = KINDS_DIR / "_ops.py"
    assert misplaced(naming_modules({own: reference, registry: reference, other: reference})) == {action: {other}}
