"""The `kubernetes` package, imported piece by piece.

Importing `kubernetes` runs its `__init__`, which imports every part of the client: every API class
and every one of its ~700 models (`kubernetes.client`), the dynamic client with a JSON schema
validator, watch, stream, utils and leader election, about 0.2 s of a `nsstuck diagnose` that takes
well under a second otherwise. nsstuck uses a few pieces: the configuration and the kubeconfig loaders,
the ApiClient with its REST layer, and the exceptions.

So, before anything imports it, `kubernetes`, `kubernetes.client` and `kubernetes.client.models` are
put in `sys.modules` as packages whose `__init__` has not run: importing one of their submodules
(`kubernetes.client.api_client`) imports that submodule alone, and `from kubernetes.client import
ApiClient, Configuration` (what the kubeconfig loaders write) takes them from their own submodules.
A submodule asked for by name (`from kubernetes import dynamic`) is imported alone, finding the
package as the `__init__`'s own run would show it (its version literals and nothing else). Any other
name asked of such a package (`kubernetes.client.CoreV1Api`, as a test or another library may), or
its `dir()`, runs its `__init__` then, in full, so nothing behaves differently, only later (tested in
tests/foundation/test_lazy_kubernetes.py). Nothing happens when `kubernetes` was imported already.

`NSSTUCK_LAZY_KUBERNETES=0` (or `false`, `no`, `off`) turns this off: `kubernetes` is then imported
whole, as a plain `import kubernetes` does. It is read from the environment where `bot.kube` is
imported (the CLI, `serve`, each diagnosis worker process), before any settings are loaded: `diagnose
--kubeconfig` starts without the settings' model. The model (bot/settings.py) validates it for
`config check` and `serve`; a value it would refuse imports the package whole here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Mapping
from typing import Any

# names of the packages' `__init__` that live in a submodule of their own, taken from there
_CHEAP = {
    "kubernetes.client": {
        "ApiClient": "kubernetes.client.api_client",
        "Configuration": "kubernetes.client.configuration",
        "ApiException": "kubernetes.client.exceptions",
        "ApiValueError": "kubernetes.client.exceptions",
        "ApiTypeError": "kubernetes.client.exceptions",
        "ApiKeyError": "kubernetes.client.exceptions",
        "OpenApiException": "kubernetes.client.exceptions",
    },
}
# the names `kubernetes/__init__` assigns before it imports its submodules: all a submodule finds in the
# package while the `__init__` imports it, and all some ask for (`from kubernetes import __version__` in
# kubernetes.dynamic.discovery). Read from the `__init__`'s source, as literals, so that a submodule
# imported alone finds the package as it would in the `__init__`'s own run; running the whole `__init__`
# in the middle of that import instead fails (its `utils` needs the half-imported `dynamic.client`)
_LITERALS = ("__project__", "__version__")
_LOCK = threading.RLock()


class _Package(types.ModuleType):
    """A package whose `__init__` runs the first time a name it defines is asked for."""

    def __getattr__(self, name: str) -> Any:  # called only for what the module does not hold yet
        package = self.__name__
        if name in _LITERALS and not self.__dict__.get("_nsstuck_initialised"):
            value = _literal(self, name)
            if value is not None:
                setattr(self, name, value)
                return value
        if not name.startswith("__"):
            cheap = _CHEAP.get(package, {}).get(name)
            if cheap is not None:
                value = getattr(importlib.import_module(cheap), name)
                setattr(self, name, value)
                return value
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
        _initialise(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:  # what the package defines once its `__init__` has run
        _initialise(self)
        return list(super().__dir__())


def _literal(module: types.ModuleType, name: str) -> str | None:
    """The string a top-level `name = "..."` of the package's `__init__` assigns, or None."""
    import ast  # only on this path: a submodule imported alone asked for it

    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == [name]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def _initialise(module: _Package) -> None:
    with _LOCK:
        if module.__dict__.get("_nsstuck_initialised"):
            return
        module.__dict__["_nsstuck_initialised"] = True
        spec = module.__spec__
        assert spec is not None
        assert spec.loader is not None
        spec.loader.exec_module(module)


SWITCH = "NSSTUCK_LAZY_KUBERNETES"
# what pydantic takes for true, as the settings' model reads the variable (unset or empty: the default, on)
_ON = frozenset({"", "1", "true", "t", "yes", "y", "on"})


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether `environ` leaves the piecewise import on (NSSTUCK_LAZY_KUBERNETES unset, empty or true)."""
    return environ.get(SWITCH, "").lower() in _ON


def install() -> None:
    """Put the lazy packages in place, unless `kubernetes` is imported already (then it stays as it is)."""
    with _LOCK:
        if "kubernetes" in sys.modules:
            return
        parent: types.ModuleType | None = None
        for name in ("kubernetes", "kubernetes.client", "kubernetes.client.models"):
            spec = importlib.util.find_spec(name)
            if spec is None:  # not installed: the import that follows says so
                return
            module = _Package(name)
            module.__spec__ = spec
            module.__loader__ = spec.loader
            module.__file__ = spec.origin
            module.__path__ = list(spec.submodule_search_locations or [])
            module.__package__ = name
            sys.modules[name] = module
            if parent is not None:
                setattr(parent, name.rpartition(".")[2], module)
            parent = module
