"""The Kubernetes deployment's Dagster config, checked against Dagster's own config schemas without a
cluster: the k8s_job_executor config the code location loads, and the run launcher and run queue the
Helm values give the chart (in the form the chart writes them into the instance's dagster.yaml).
"""

from __future__ import annotations

import re

import pytest
import yaml
from dagster._config import validate_config

from conftest import ROOT, tree
from seem_dagster.defs.assemble import build_defs
from seem_dagster.defs.executors import k8s_config

dagster_k8s = pytest.importorskip("dagster_k8s", reason="dagster-k8s is in the dev extra: pip install -e '.[dev]'")

DEPLOY = ROOT / "deploy" / "k8s"
EXECUTOR = DEPLOY / "executor.yaml"


def _errors(config_type, value) -> list[str]:
    result = validate_config(config_type, value)
    return [] if result.success else [e.message for e in result.errors]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _launcher_as_the_chart_writes_it(values: dict) -> dict:
    """runLauncher.config.k8sRunLauncher as the chart renders it for K8sRunLauncher: keys in snake case,
    ConfigMap and Secret references by name, runK8sConfig's sections in snake case; plus what the chart
    fills in itself (the instance ConfigMap, DAGSTER_HOME, the PostgreSQL password Secret)."""
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    out = {}
    for key, value in launcher.items():
        if key in ("envConfigMaps", "envSecrets"):
            value = [item["name"] for item in value]
        if key == "runK8sConfig":
            value = {_snake(k): v for k, v in value.items()}
        out[_snake(key)] = value
    return {**out, "instance_config_map": "seem-dagster-instance", "dagster_home": "/opt/dagster/dagster_home",
            "postgres_password_secret": "dagster-postgresql-secret"}


def test_the_executor_config_is_valid_for_k8s_job_executor():
    config = yaml.safe_load(EXECUTOR.read_text())
    assert _errors(dagster_k8s.k8s_job_executor.config_schema.config_type, config) == []
    # A field the executor does not have is refused (the check is not vacuous).
    assert _errors(dagster_k8s.k8s_job_executor.config_schema.config_type, {**config, "gpu_steps": ["x"]})


def test_the_per_step_config_names_real_steps_and_sends_extraction_to_the_gpu_pool():
    config = yaml.safe_load(EXECUTOR.read_text())
    job = build_defs(tree()).resolve_job_def("build_memory")
    assert set(config["per_step_k8s_config"]) <= set(job.graph.node_dict)
    extraction = config["per_step_k8s_config"]["extract_frames"]
    assert extraction["container_config"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert extraction["pod_spec_config"]["node_selector"] == {"seem-dagster/pool": "gpu"}


def test_the_code_location_loads_the_executor_config_the_tree_names():
    resolved = tree(settings={"execution.executor": "k8s", "execution.k8s_config": str(EXECUTOR)})
    job = build_defs(resolved).resolve_job_def("build_memory")
    assert job.executor_def.name == "k8s"
    assert k8s_config(resolved.config.execution)["max_concurrent"] == 2


def test_the_helm_run_launcher_and_run_queue_are_valid_dagster_config():
    from dagster._core.run_coordinator import QueuedRunCoordinator

    values = yaml.safe_load((DEPLOY / "values.yaml").read_text())
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    launcher = _launcher_as_the_chart_writes_it(values)
    assert _errors(dagster_k8s.K8sRunLauncher.config_type(), launcher) == []
    assert _errors(dagster_k8s.K8sRunLauncher.config_type(), {**launcher, "run_k8s_config": {"gpu": 1}})
    queue = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert _errors(QueuedRunCoordinator.config_type(), {_snake(k): v for k, v in queue.items()}) == []


def test_every_pod_gets_the_same_settings_and_credentials():
    values = yaml.safe_load((DEPLOY / "values.yaml").read_text())
    executor = yaml.safe_load(EXECUTOR.read_text())
    (location,) = values["dagster-user-deployments"]["deployments"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for refs in (location["envConfigMaps"], launcher["envConfigMaps"]):
        assert [r["name"] for r in refs] == executor["env_config_maps"] == ["seem-settings"]
    for refs in (location["envSecrets"], launcher["envSecrets"]):
        assert [r["name"] for r in refs] == executor["env_secrets"] == ["seem-s3-credentials"]
    assert location["dagsterApiGrpcArgs"] == ["--module-name", "seem_dagster.definitions"]
    settings = dict(line.split("=", 1) for line in (DEPLOY / "settings.env").read_text().splitlines()
                    if line.strip() and not line.startswith("#"))
    assert settings["SEEM_EXECUTION_EXECUTOR"] == "k8s" and settings["SEEM_STORE"].startswith("s3://")
    assert not [k for k in settings if "SECRET" in k or "PASSWORD" in k]  # secrets go in the Secret only
