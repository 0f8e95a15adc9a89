"""The Helm chart (deploy/helm/sagalog): `helm lint`, `helm template`, and every rendered
manifest against the Kubernetes schemas (kubernetes-validate, strict, offline).

Helm is built from the Go module proxy by ``.ci/ensure-tools``; without it these tests
skip and say why. What the manifests must say follows the service contract: the
tracker a StatefulSet with its RocksDB on a volume and a headless Service, probes on
/health/live and /health/ready, a disruption budget for every service.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import external_tools

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "sagalog"
KUBERNETES = "1.33.0"
VALUES = ["--set", "secrets.gateSecret=0123456789abcdef0123", "--set", "secrets.apiKeys=k1"]


pytestmark = pytest.mark.tool("helm")


def helm() -> str:
    return external_tools.require("helm")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` for the Kubernetes version the manifests are checked against (a Helm
    built from source, without release flags, would assume v1.20)."""
    return subprocess.run(
        [helm(), *args, "--kube-version", KUBERNETES], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    done = run("template", "r", str(CHART), *VALUES)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def test_helm_lint_passes() -> None:
    done = run("lint", "--strict", str(CHART), *VALUES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_manifest_is_valid_for_kubernetes(manifests: list[dict[str, Any]]) -> None:
    for manifest in manifests:
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def test_without_a_gate_secret_the_chart_refuses_to_render_naming_it() -> None:
    done = run("template", "r", str(CHART))
    assert done.returncode != 0 and "secrets.gateSecret" in done.stderr


def test_the_tracker_is_a_statefulset_with_its_tables_on_a_volume(
    manifests: list[dict[str, Any]],
) -> None:
    tracker = by_kind(manifests, "StatefulSet")["saga-tracker"]
    [claim] = tracker["spec"]["volumeClaimTemplates"]
    container = tracker["spec"]["template"]["spec"]["containers"][0]
    assert any(m["name"] == claim["metadata"]["name"] for m in container["volumeMounts"])
    headless = by_kind(manifests, "Service")["saga-tracker"]
    assert headless["spec"]["clusterIP"] == "None"
    assert tracker["spec"]["serviceName"] == "saga-tracker"
    env = {e["name"]: e for e in container["env"]}
    assert env["SAGALOG_TRACKER_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.name"
    )


def test_every_service_is_probed_and_has_a_disruption_budget(
    manifests: list[dict[str, Any]],
) -> None:
    workloads = {**by_kind(manifests, "StatefulSet"), **by_kind(manifests, "Deployment")}
    assert set(workloads) == {"saga-tracker", "gateway", "budget-agent", "purchasing-agent"}
    budgets = by_kind(manifests, "PodDisruptionBudget")
    for name, workload in workloads.items():
        pod = workload["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/health/live", name
        assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready", name
        assert pod["terminationGracePeriodSeconds"] >= 30, name
        assert name in budgets, name
        selector = budgets[name]["spec"]["selector"]["matchLabels"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), name


def test_each_agent_logs_in_as_its_own_principal(manifests: list[dict[str, Any]]) -> None:
    for name in ("budget-agent", "purchasing-agent"):
        [container] = by_kind(manifests, "Deployment")[name]["spec"]["template"]["spec"][
            "containers"
        ]
        env = {e["name"]: e for e in container["env"]}
        assert env["SAGALOG_SASL_USERNAME"]["value"] == name
        assert env["SAGALOG_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == name


def test_the_gateway_takes_its_webhook_sources_from_the_secret_when_given(
    tmp_path: Path,
) -> None:
    sources = '{"docs": {"secret": "0123456789abcdef", "kinds": ["document.filed"]}}'
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"secrets": {"webhookSources": sources}}))
    done = run("template", "r", str(CHART), *VALUES, "-f", str(values))
    assert done.returncode == 0, done.stderr
    rendered = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    [secret] = by_kind(rendered, "Secret").values()
    assert json.loads(secret["stringData"]["webhook-sources"]) == json.loads(sources)
    [container] = by_kind(rendered, "Deployment")["gateway"]["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e for e in container["env"]}
    ref = env["GATEWAY_WEBHOOK_SOURCES"]["valueFrom"]["secretKeyRef"]
    assert (ref["key"], ref["optional"]) == ("webhook-sources", True)


def test_without_webhook_sources_the_secret_has_no_such_key(
    manifests: list[dict[str, Any]],
) -> None:
    [secret] = by_kind(manifests, "Secret").values()
    assert "webhook-sources" not in secret["stringData"]
