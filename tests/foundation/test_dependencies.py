"""pyproject.toml declares every third-party distribution the code imports, and nothing it does not
(issue 35): every import of `bot/` and of the migrations it runs (`nsstuck db upgrade` loads them
from the wheel), read from the source, including those inside functions (the lazy imports of the
CLI and of heavy libraries), those under TYPE_CHECKING and `importlib.import_module("...")`."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("bot", "migrations")

# Declared but never imported, each for a reason of its own.
NOT_IMPORTED = {
    # the PostgreSQL driver: SQLAlchemy imports it for a postgresql+psycopg:// URL (bot/store/database.py)
    "psycopg",
}
# Extras declared, each for a reason of its own: an extra installs more (sqlalchemy[asyncio] brought
# greenlet, which nothing here uses), so it is one more thing the code must need.
EXTRAS = {
    # the driver's prebuilt binary (libpq included): the image and a plain pip install need no compiler
    "psycopg": {"binary"},
}


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (`PyYAML` and `pyyaml`, `slack_sdk` and `slack-sdk`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> dict[str, set[str]]:
    """The distributions of `[project].dependencies`, each with its extras (versions and markers left out)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found: dict[str, set[str]] = {}
    for requirement in project["dependencies"]:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
        assert match, requirement
        extras = {_normalized(e.strip()) for e in (match.group(2) or "").split(",") if e.strip()}
        found[_normalized(match.group(1))] = extras
    return found


def declared() -> set[str]:
    return set(requirements())


def imported_modules(root: Path, base: Path = REPO) -> dict[str, set[str]]:
    """Every top-level module name imported by a module under `root`, with the files that import it
    (relative to `base`; relative imports are the package's own and left out)."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = str(path.relative_to(base))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and _is_import_call(node.func) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
                    names = [first.value]
            for name in names:
                found.setdefault(name.partition(".")[0], set()).add(where)
    return found


def _is_import_call(func: ast.expr) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


@cache
def third_party() -> dict[str, set[str]]:
    """The distributions the sources import, each with the files that import it."""
    modules: dict[str, set[str]] = {}
    for source in SOURCES:
        for name, files in imported_modules(REPO / source).items():
            modules.setdefault(name, set()).update(files)
    distributions = packages_distributions()
    found: dict[str, set[str]] = {}
    unknown = []
    for name, files in sorted(modules.items()):
        if name in sys.stdlib_module_names or name in ("bot", "__future__"):
            continue
        owners = distributions.get(name)
        if not owners:
            unknown.append(f"{name} (imported by {', '.join(sorted(files))})")
            continue
        for owner in owners:
            found.setdefault(_normalized(owner), set()).update(files)
    assert not unknown, f"imported, but no installed distribution provides them: {unknown}"
    return found


def test_every_imported_distribution_is_declared() -> None:
    missing = {name: sorted(files) for name, files in third_party().items() if name not in declared()}
    assert not missing, f"imported but not in [project].dependencies: {missing}"


def test_every_declared_dependency_is_imported() -> None:
    unused = sorted(declared() - set(third_party()) - NOT_IMPORTED)
    assert not unused, f"in [project].dependencies but imported nowhere in {', '.join(SOURCES)}: {unused}"


def test_no_extra_without_a_reason() -> None:
    extras = {name: extras for name, extras in requirements().items() if extras}
    assert extras == EXTRAS, f"extras in [project].dependencies: {extras}; explained in EXTRAS: {EXTRAS}"


def test_the_exceptions_are_declared_and_not_imported() -> None:
    """An exception that is imported after all, or no longer declared, is taken off the list."""
    assert declared() >= NOT_IMPORTED
    assert not NOT_IMPORTED & set(third_party())


def test_the_walk_sees_lazy_and_dynamic_imports(tmp_path: Path) -> None:
    """The reader itself: imports in functions, under TYPE_CHECKING and by name are found, relative
    ones are not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from typed_only.sub import Thing\n"
        "def f():\n"
        "    import lazy_one.deep as d\n"
        "    from lazy_two import x\n"
        "    return importlib.import_module('by_name.sub'), __import__('dunder')\n"
    )
    assert set(imported_modules(package, tmp_path)) == {
        "typing",
        "importlib",
        "typed_only",
        "lazy_one",
        "lazy_two",
        "by_name",
        "dunder",
    }
