"""The private names of our dependencies that bot/ relies on are still there (issue 35 §6).

bot/ reads, overrides, patches or subclasses a few things the libraries do not promise to keep:
slack_sdk's builtin Socket Mode client, Bolt's internals modules and listener runner, waitress's
channel and socket map, the kubernetes client's temporary-file helper, exec provider and `call_api`
keywords (and the source of its `__init__`, bot/kube/_lazy.py), APScheduler's thread and executor
pool, prometheus_client's metric names, urllib3's pool and connection classes. Those libraries are
pinned to the minor release tested (`~=X.Y.0` in pyproject.toml, X.Y of requirements/constraints.txt);
moving the pin means these
tests pass on the new release. Each test is marked with where bot/ uses the name (`used_in`), and
`test_every_use_named_is_still_in_bot` keeps those marks true. The interpreter's own private names
(concurrent.futures, argparse) are checked at the end: Python is not pinned, a new one may drop them.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import socket
import subprocess
import sys
import tomllib
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]

F = TypeVar("F", bound=Callable[..., Any])
USES: list[tuple[str, str, str]] = []  # (test, file of bot/, the text there that uses the name)


def used_in(path: str, *texts: str) -> Callable[[F], F]:
    """Mark a test with the file of bot/ that uses the name it checks, and the text that uses it."""

    def mark(test: F) -> F:
        USES.extend((test.__name__, path, text) for text in texts)
        return test

    return mark


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


# the distributions whose private names bot/ uses: pinned to the minor release that was tested
PINNED = ("slack-bolt", "slack-sdk", "kubernetes", "waitress", "apscheduler", "prometheus-client", "urllib3")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_each_library_whose_private_names_we_use_is_pinned_to_the_tested_minor() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {}
    for requirement in dependencies:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?\s*(.*)", requirement.strip())
        assert match, requirement
        declared[_normalized(match.group(1))] = match.group(2)
    tested = {}
    for line in (REPO / "requirements" / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            tested[_normalized(name)] = version.strip()
    for name in PINNED:
        major, minor, *_ = tested[name].split(".")
        assert declared[name] == f"~={major}.{minor}.0", (
            f"{name}{declared[name]} in pyproject.toml: pin it as {name}~={major}.{minor}.0, the minor release "
            f"requirements/constraints.txt tests ({tested[name]}), as its private names are used"
        )


def test_every_use_named_is_still_in_bot() -> None:
    """A mark that no longer names a use is moved or dropped with the code it described."""
    tests = {name for name, value in globals().items() if name.startswith("test_") and callable(value)}
    for test, path, text in USES:
        assert test in tests, test
        assert text in (REPO / path).read_text(encoding="utf-8"), f"{test}: {text!r} is no longer in {path}"


# ---------------------------------------------------------------------------------------------
# slack_sdk: the builtin Socket Mode client that bot/slack/socket_mode.py's SwitchingClient extends


@pytest.fixture
def switching_client() -> Iterator[Any]:
    from slack_sdk import WebClient

    from bot.slack.socket_mode import SwitchingClient

    client = SwitchingClient(stale_after=6.0, app_token="xapp-1-test", web_client=WebClient(token="xoxb-test"))
    try:
        yield client
    finally:
        client.close()


@used_in(
    "bot/slack/socket_mode.py",
    "on_message_listener=self._on_message",
    "on_error_listener=self._on_error",
    "on_close_listener=self._on_close",
)
def test_socket_mode_client_listener_methods() -> None:
    """SwitchingClient.connect hands the client's own listeners to each new Connection."""
    from slack_sdk.socket_mode.builtin import SocketModeClient

    assert _parameters(SocketModeClient._on_message) == ["self", "message"]
    assert _parameters(SocketModeClient._on_error) == ["self", "error"]
    assert _parameters(SocketModeClient._on_close) == ["self", "code", "reason"]


@used_in("bot/slack/socket_mode.py", "def _monitor_current_session(self)", "super()._monitor_current_session()")
def test_socket_mode_client_monitor_is_the_method_we_override(switching_client: Any) -> None:
    """SwitchingClient overrides `_monitor_current_session` to replace a silent connection: it must be
    what the client's monitor runs every ping interval, or the override would never run."""
    from slack_sdk.socket_mode.builtin import SocketModeClient

    from bot.slack.socket_mode import SwitchingClient

    assert _parameters(SocketModeClient._monitor_current_session) == ["self"]
    target = switching_client.current_app_monitor.target
    assert target.__self__ is switching_client
    assert target.__func__ is SwitchingClient._monitor_current_session


@used_in("bot/slack/socket_mode.py", "self.current_session_state = ConnectionState()", "old_state.terminated = True")
def test_socket_mode_client_state_that_connect_takes_over(switching_client: Any) -> None:
    """SwitchingClient.connect replaces the client's own connect(): the state that one reads and sets."""
    from slack_sdk.socket_mode.builtin.connection import ConnectionState

    for name in (
        "current_session", "current_session_state", "wss_uri", "logger", "ping_interval", "trace_enabled",
        "all_message_trace_enabled", "ping_pong_trace_enabled", "receive_buffer_size", "proxy", "proxy_headers",
        "auto_reconnect_enabled", "default_auto_reconnect_enabled", "current_app_monitor_started",
        "current_app_monitor", "socket_mode_request_listeners",
    ):  # fmt: skip
        assert hasattr(switching_client, name), name
    assert callable(switching_client.issue_new_wss_url)
    assert callable(switching_client.connect_to_new_endpoint)
    assert hasattr(switching_client.web_client, "ssl")
    assert ConnectionState().terminated is False


@used_in("bot/slack/socket_mode.py", "session = Connection(", "session.last_ping_pong_time", "session.sock")
def test_socket_mode_connection_as_switching_client_makes_and_retires_it() -> None:
    """The keywords SwitchingClient.connect makes a Connection with, and what `_retire` and the
    monitor read and clear on one."""
    from slack_sdk.socket_mode.builtin.connection import Connection

    keywords = {
        "url", "logger", "ping_interval", "trace_enabled", "all_message_trace_enabled", "ping_pong_trace_enabled",
        "receive_buffer_size", "proxy", "proxy_headers", "on_message_listener", "on_error_listener",
        "on_close_listener", "ssl_context",
    }  # fmt: skip
    assert keywords <= set(_parameters(Connection.__init__))
    import logging

    session = Connection(url="wss://example.invalid/", logger=logging.getLogger("probe"))
    for name in ("session_id", "last_ping_pong_time", "sock", "on_message_listener", "on_error_listener",
                 "on_close_listener", "logger"):  # fmt: skip
        assert hasattr(session, name), name
    assert session.sock is None
    assert session.is_active() is False


# ---------------------------------------------------------------------------------------------
# slack_bolt


@used_in("bot/slack/socket_mode.py", "from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response")
def test_bolt_socket_mode_internals() -> None:
    """SocketModeHandler.handle runs the app on an envelope and sends its answer as Bolt's handler does."""
    from slack_bolt.adapter.socket_mode import internals

    assert _parameters(internals.run_bolt_app) == ["app", "req"]
    assert _parameters(internals.send_response) == ["client", "req", "bolt_resp", "start_time"]


@used_in("bot/slack/socket_mode.py", "class SocketModeHandler(BaseSocketModeHandler)", "self.client = self.switching")
def test_bolt_socket_mode_base_handler_works_on_the_client_we_set() -> None:
    """Our handler sets `app` and `client` itself and never calls the base's __init__ (it has none):
    connect() and close(), which serve() calls, act on that client."""
    from unittest.mock import Mock

    from slack_bolt.adapter.socket_mode.base_handler import BaseSocketModeHandler

    assert BaseSocketModeHandler.__init__ is object.__init__

    class Probe(BaseSocketModeHandler):
        pass

    probe = Probe()
    probe.client = Mock()
    probe.connect()
    probe.client.connect.assert_called_once_with()


@used_in(
    "bot/slack/server.py",
    "from slack_bolt.request.internals import build_context, extract_content_type, parse_body",
)
def test_bolt_request_internals() -> None:
    """read_payload and bolt_request parse a body as Bolt does, and rebuild a request's context."""
    from slack_bolt.context import BoltContext
    from slack_bolt.request import internals

    assert _parameters(internals.parse_body) == ["body", "content_type"]
    assert _parameters(internals.extract_content_type) == ["headers"]
    assert _parameters(internals.build_context) == ["context", "body"]
    assert internals.extract_content_type({"content-type": ["application/json"]}) == "application/json"
    assert internals.parse_body("command=%2Fnsstuck&text=x", "application/x-www-form-urlencoded") == {
        "command": "/nsstuck",
        "text": "x",
    }
    assert internals.build_context(BoltContext({}), {"team_id": "T1", "user_id": "U1"}).user_id == "U1"


@used_in("bot/slack/app.py", "listener_executor=_ContextExecutor(")
def test_bolt_runs_listeners_on_the_executor_we_give() -> None:
    """create_app gives Bolt a pool that runs each listener in its request's log context: Bolt's
    listener runner, and its lazy-listener runner, must use that pool."""
    from slack_bolt import App

    from bot.services.pools import StartedPool

    executor = StartedPool(max_workers=1)
    try:
        app = App(
            token="xoxb-test", signing_secret="secret", token_verification_enabled=False, listener_executor=executor
        )
        runner = app.listener_runner
        assert runner.listener_executor is executor
        assert runner.lazy_listener_runner.executor is executor
    finally:
        executor.shutdown()


# ---------------------------------------------------------------------------------------------
# waitress: bot/slack/server.py's serve() and _RefusingChannel


@pytest.fixture
def waitress_server() -> Iterator[Any]:
    from waitress import wasyncore
    from waitress.server import create_server

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b""]

    server = create_server(app, host="127.0.0.1", port=0, threads=1)
    try:
        yield server
    finally:
        server.task_dispatcher.shutdown()
        server.close()
        wasyncore.close_all(server._map)


@used_in("bot/slack/server.py", "server.channel_class = _RefusingChannel", "wasyncore.close_all(server._map)")
def test_waitress_server_socket_map_and_channel_class(waitress_server: Any) -> None:
    """serve() sets the server's channel class, and at the end closes every connection still open by
    the server's own socket map (`_map`): an accepted connection is made of that class, in that map."""
    from waitress import wasyncore
    from waitress.channel import HTTPChannel

    assert _parameters(wasyncore.close_all) == ["map", "ignore_all"]

    class Probe(HTTPChannel):  # type: ignore[misc]
        pass

    waitress_server.channel_class = Probe
    assert isinstance(waitress_server._map, dict)
    with socket.create_connection(("127.0.0.1", waitress_server.effective_port), timeout=5):
        waitress_server.handle_accept()
        channels = [c for c in waitress_server._map.values() if isinstance(c, Probe)]
        assert len(channels) == 1
        assert waitress_server.adj.threads == 1


@used_in(
    "bot/slack/server.py",
    "class _RefusingChannel(HTTPChannel)",
    "self.will_close = False",
    "self.close_when_flushed = False",
    'getattr(r, "error", None)',
)
def test_waitress_channel_hooks_we_override() -> None:
    """_RefusingChannel overrides received, handle_close, readable, writable and handle_read, and reads
    and sets the channel's state and its requests' parse error."""
    from waitress.channel import HTTPChannel
    from waitress.parser import HTTPRequestParser

    assert _parameters(HTTPChannel.received) == ["self", "data"]
    for name in ("handle_close", "readable", "writable", "handle_read"):
        assert _parameters(getattr(HTTPChannel, name)) == ["self"], name
    assert HTTPChannel.will_close is False
    assert HTTPChannel.close_when_flushed is False
    assert "self.requests = []" in inspect.getsource(HTTPChannel.__init__)
    assert "self.connected = True" in inspect.getsource(HTTPChannel.__init__)
    assert HTTPRequestParser.error is None


# ---------------------------------------------------------------------------------------------
# kubernetes


@used_in("bot/kube/connecting.py", '"_create_temp_file_with_content"')
def test_kubernetes_temp_file_helper_is_what_the_loader_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """_guard_temp_files wraps the module's `_create_temp_file_with_content` in a lock: the loader
    must look it up by that name when it writes an inline certificate to a file."""
    import base64

    from kubernetes.config import kube_config

    assert callable(kube_config._create_temp_file_with_content)
    written: list[bytes] = []

    def recording(content: bytes, temp_file_path: str | None = None, force_recreate: bool = False) -> str:
        written.append(content)
        path = tmp_path / "ca.crt"
        path.write_bytes(content)
        return str(path)

    monkeypatch.setattr(kube_config, "_create_temp_file_with_content", recording)
    inline = {"certificate-authority-data": base64.b64encode(b"PEM").decode()}
    assert kube_config.FileOrData(inline, "certificate-authority").as_file() == str(tmp_path / "ca.crt")
    assert written == [b"PEM"]


@used_in("bot/kube/connecting.py", 'setattr(k8s_exec_provider, "subprocess", _BoundedSubprocess("subprocess"))')
def test_kubernetes_exec_provider_runs_the_plugin_through_its_subprocess_global(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """_bound_exec_plugins replaces the exec provider's `subprocess` by one whose Popen is bounded:
    the provider must start the plugin with that module's Popen and wait in `communicate()`."""
    from kubernetes.config import exec_provider
    from kubernetes.config.kube_config import ConfigNode

    assert isinstance(exec_provider.subprocess, types.ModuleType)
    calls: list[str] = []

    class Popen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append("Popen")
            super().__init__(*args, **kwargs)

        def communicate(self, input: Any = None, timeout: float | None = None) -> Any:
            calls.append("communicate")
            return super().communicate(input, timeout)

    class Recording(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            return Popen if name == "Popen" else getattr(subprocess, name)

    monkeypatch.setattr(exec_provider, "subprocess", Recording("subprocess"))
    version = "client.authentication.k8s.io/v1"
    answer = json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": {"token": "t0ken"}})
    plugin = {"command": sys.executable, "args": ["-c", f"print({answer!r})"], "apiVersion": version}
    status = exec_provider.ExecProvider(ConfigNode("exec", plugin), None).run()
    assert status["token"] == "t0ken"
    assert calls == ["Popen", "communicate"]


@used_in("bot/kube/transport.py", "_preload_content=False", "_return_http_data_only=True", "_request_timeout=(")
def test_kubernetes_call_api_keywords() -> None:
    """Transport._send_by_client asks call_api for the raw answer, with a (connect, read) timeout."""
    from kubernetes.client.api_client import ApiClient

    assert {"_preload_content", "_return_http_data_only", "_request_timeout"} <= set(_parameters(ApiClient.call_api))


@used_in("bot/kube/connecting.py", "api_client.rest_client.pool_manager", "rest_client.pool_manager.clear()")
def test_kubernetes_rest_client_pool_manager() -> None:
    """_impersonating wraps the REST layer's urllib3 pool manager's `request`; Connection.close clears it."""
    import urllib3
    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration

    api = ApiClient(Configuration())
    try:
        pool_manager = api.rest_client.pool_manager
        assert isinstance(pool_manager, urllib3.PoolManager)
        assert _parameters(pool_manager.request)[:2] == ["method", "url"]
        assert "headers" in _parameters(pool_manager.request)
    finally:
        api.close()
        api.rest_client.pool_manager.clear()


@used_in(
    "bot/kube/watchdog.py",
    "pool_manager.pool_classes_by_scheme = {",
    "ConnectionCls = WatchedHTTPSConnection",
    "return super().request(*args, **kwargs)",
)
def test_urllib3_pools_take_their_connection_class_from_the_pool_manager() -> None:
    """bot/kube/watchdog.py: the pool manager makes its pools from `pool_classes_by_scheme`, a pool makes
    its connections from `ConnectionCls`, and a request is sent through the connection's `request`."""
    import urllib3
    from urllib3.connection import HTTPConnection

    from bot.kube.watchdog import WatchedHTTPSConnection, watched

    manager = urllib3.PoolManager()
    assert set(manager.pool_classes_by_scheme) == {"http", "https"}
    watched(manager)
    pool = manager.connection_from_url("https://127.0.0.1:1/")
    assert pool.ConnectionCls is WatchedHTTPSConnection
    assert isinstance(pool._new_conn(), WatchedHTTPSConnection)
    assert {"method", "url", "body", "headers"} <= set(_parameters(HTTPConnection.request))
    manager.clear()


@used_in("bot/kube/_lazy.py", '_LITERALS = ("__project__", "__version__")', "_literal(self, name)")
def test_kubernetes_init_assigns_its_version_as_literals() -> None:
    """bot/kube/_lazy.py reads `__version__` and `__project__` from the source of `kubernetes/__init__`
    (a submodule imported alone asks the package for them) instead of running it."""
    import importlib.metadata
    import importlib.util

    from bot.kube import _lazy

    spec = importlib.util.find_spec("kubernetes")
    assert spec is not None
    assert spec.origin is not None
    assert spec.origin.endswith("__init__.py")
    package = types.ModuleType("kubernetes")
    package.__file__ = spec.origin
    assert _lazy._literal(package, "__version__") == importlib.metadata.version("kubernetes")
    assert _lazy._literal(package, "__project__") == "kubernetes"


@used_in("bot/kube/_lazy.py", '"ApiClient": "kubernetes.client.api_client"')
def test_kubernetes_client_names_live_in_the_submodules_lazy_takes_them_from() -> None:
    """_CHEAP: what `from kubernetes.client import ApiClient, Configuration` gets without the
    package's __init__ must be the very object that __init__ exports."""
    import importlib
    import importlib.util

    from bot.kube import _lazy

    for package, names in _lazy._CHEAP.items():
        for name, module in names.items():
            assert module.startswith(package + ".")
            assert hasattr(importlib.import_module(module), name), f"{module}.{name}"
    for name in ("kubernetes", "kubernetes.client", "kubernetes.client.models"):
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        assert spec.submodule_search_locations, f"{name} is no longer a package"


# ---------------------------------------------------------------------------------------------
# APScheduler: bot/scheduler/running.py's problems() (/healthz)


@used_in("bot/scheduler/running.py", 'getattr(scheduler, "_thread", None)', 'scheduler._lookup_executor("default")')
def test_apscheduler_thread_and_executor_pool() -> None:
    """problems() finds the scheduler's thread and the default executor's thread pool."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler()
    scheduler.start()
    try:
        assert scheduler._thread.is_alive()
        pool = scheduler._lookup_executor("default")._pool
        assert isinstance(pool, ThreadPoolExecutor)
    finally:
        scheduler.shutdown(wait=True)


# ---------------------------------------------------------------------------------------------
# prometheus_client: bot/services/metrics.py relays counts by metric name


@used_in("bot/services/metrics.py", 'metric._name + ("_total" if isinstance(metric, Counter) else "")')
def test_prometheus_metric_names() -> None:
    """Metrics._by_name keys each metric by the name it is declared with: `_name`, a counter's without
    its `_total`."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    registry = CollectorRegistry()
    assert Counter("probe_things_total", "doc", registry=registry)._name == "probe_things"
    assert Gauge("probe_level", "doc", ["kind"], registry=registry)._name == "probe_level"
    assert Histogram("probe_seconds", "doc", registry=registry)._name == "probe_seconds"


# ---------------------------------------------------------------------------------------------
# The interpreter's (not pinned: a new Python may change them)


@used_in("bot/services/health.py", '"_shutdown"', '"_broken"', '"_threads"')
def test_thread_pool_state() -> None:
    """pool_problems reads whether a pool was shut down or is broken, and its threads."""
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(int).result()
    assert pool._shutdown is False
    assert pool._broken is False
    assert all(thread.is_alive() for thread in pool._threads)
    pool.shutdown(wait=True)
    assert pool._shutdown is True


@used_in("bot/cli.py", "parser._actions", "argparse._SubParsersAction")
def test_argparse_actions() -> None:
    """The completion table walks a parser's actions and its sub-parsers."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--flag")
    parser.add_subparsers().add_parser("sub")
    kinds = [type(action) for action in parser._actions]
    assert argparse._SubParsersAction in kinds
    assert any(action.option_strings == ["--flag"] for action in parser._actions)
