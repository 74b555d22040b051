"""The diagnosis of admission checked through the real write: for each widget scenario, the remedy's
own finalizer patch, sent with the real kubectl and with the kubernetes client to the emulator (whose
admission calls or fails webhooks as the API server does), is rejected with `failed calling webhook`
exactly when the diagnosis marks it `blocked_by`, and admitted otherwise."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from kubernetes import config
from kubernetes.client.rest import ApiException

from bot.domain.findings import Action, Diagnosis, Remedy
from bot.kube.collecting import CollectOptions
from bot.kube.connecting import ClusterTarget
from bot.services.diagnosing import diagnose_namespace
from bot.services.reporting import render_text
from tests.emulator._scenario_support import fresh_scenario, kubectl, kubectl_available
from tests.fakes.kubeapi import Emulator
from tests.fakes.kubeapi.controllers._http import KubeHTTP
from tests.fakes.kubeapi.scenarios import SCENARIOS

pytestmark = pytest.mark.skipif(not kubectl_available(), reason="/usr/bin/kubectl is not installed")

WIDGET_SCENARIOS = sorted(n for n in SCENARIOS if n.startswith(("finalizer-blocked-by-", "finalizer-webhook-")))
WIDGET = "/apis/example.com/v1/namespaces/shop/widgets/storefront"


def _diagnose(emu: Emulator, tmp_path: Path) -> Diagnosis:
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig-diagnose")
    target = ClusterTarget(name="emulated", kubeconfig=kubeconfig)
    result = diagnose_namespace(
        target, "shop", options=CollectOptions(deadline=10, call_timeout=3), clock=emu.clock.now
    )
    return result.diagnosis


def _remedy(diagnosis: Diagnosis, action: Action) -> Remedy:
    return next(r for f in diagnosis.findings for r in f.remedies if r.action is action)


def _run(emu: Emulator, tmp_path: Path, command: str) -> tuple[int, str]:
    args = shlex.split(command)
    assert args[0] == "kubectl"
    result = kubectl(emu, tmp_path, *args[1:], admin=True)
    return result.returncode, result.stdout + result.stderr


def _client_patch(emu: Emulator, tmp_path: Path) -> None:
    """The same JSON patch, sent by the kubernetes client (application/json-patch+json)."""
    path = emu.write_kubeconfig(tmp_path / "kubeconfig-client", token=emu.admin_token)
    api = config.new_client_from_config(config_file=str(path))
    try:
        # the client's generated patch method would send a list as a merge patch; say what it is
        api.call_api(
            WIDGET,
            "PATCH",
            header_params={"Content-Type": "application/json-patch+json", "Accept": "application/json"},
            body=[
                {"op": "test", "path": "/metadata/finalizers/0", "value": "widgets.example.com/cleanup"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
            ],
            response_type="object",
            auth_settings=["BearerToken"],
        )
    finally:
        api.close()


@pytest.mark.parametrize("name", WIDGET_SCENARIOS)
def test_the_finalizer_patch_fails_exactly_when_the_diagnosis_says_blocked(name: str, tmp_path: Path) -> None:
    expected = SCENARIOS[name].expected
    hooks = [hook for action, hook in expected.blocked if action == "remove_finalizer"]
    emu, _ = fresh_scenario(name)
    try:
        diagnosis = _diagnose(emu, tmp_path)
        remedy = _remedy(diagnosis, Action.REMOVE_FINALIZER)
        assert [b.webhook for b in remedy.blocked_by] == hooks
        report = json.dumps(diagnosis.to_json())
        text = render_text(diagnosis)
        assert ('"blocked_by"' in report) is bool(hooks)
        assert ("BLOCKED: the API server would reject this write" in text) is bool(hooks)
        code, output = _run(emu, tmp_path, remedy.commands[0])
        admin = KubeHTTP(emu.url, emu.admin_token)
        if hooks:
            assert code != 0
            assert f'failed calling webhook "{hooks[0]}"' in output, output
            with pytest.raises(ApiException) as raised:
                _client_patch(emu, tmp_path)
            assert raised.value.status == 500
            assert f'failed calling webhook \\"{hooks[0]}\\"' in str(raised.value.body), raised.value.body
            assert admin.get(WIDGET)["metadata"]["finalizers"] == ["widgets.example.com/cleanup"]
            # the remedy ranked before it, deleting the webhook configuration, is admitted and unblocks it
            first = diagnosis.first_remedy
            assert first is not None
            assert first.action is Action.DELETE_WEBHOOK_CONFIGURATION
            assert first.blocked_by == ()
            assert _run(emu, tmp_path, first.commands[0])[0] == 0
            _client_patch(emu, tmp_path)
        else:
            assert code == 0, output
        assert admin.get_or_none(WIDGET) is None  # the last finalizer gone, the Widget is deleted
    finally:
        emu.stop()
    if not hooks:
        # the same write with the kubernetes client, on a fresh scenario
        emu, _ = fresh_scenario(name)
        try:
            _client_patch(emu, tmp_path)
            assert KubeHTTP(emu.url, emu.admin_token).get_or_none(WIDGET) is None
        finally:
            emu.stop()
