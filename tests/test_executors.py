"""The executor is chosen in the configuration tree; the instance config shipped in deploy/ is Dagster's."""

import json
import shutil

import pytest
from dagster import DagsterInstance

from conftest import ROOT, tree
from seem_dagster.config import ConfigError, resolve_standard
from seem_dagster.defs import assemble
from seem_dagster.defs.executors import celery_config, executor_for
from seem_dagster.defs.launch import per_run_settings
from seem_dagster.defs.resources import run_config_schema


@pytest.mark.parametrize("choice, name", [("in_process", "in_process"), ("multiprocess", "multiprocess"), ("celery", "celery"),
                                          ("k8s", "k8s")])
def test_the_tree_chooses_the_executor_of_every_job(choice, name):
    defs = assemble.build_defs(tree(settings={"execution.executor": choice}))
    assert {defs.resolve_job_def(j).executor_def.name for j in ("build_memory", "query_memory")} == {name}


def test_the_environment_chooses_it_too(monkeypatch):
    monkeypatch.setenv("SEEM_EXECUTION_EXECUTOR", "multiprocess")
    monkeypatch.setenv("SEEM_EXECUTION_MAX_CONCURRENT", "3")
    resolved = resolve_standard()
    executor = executor_for(resolved.config.execution)
    assert executor.name == "multiprocess" and resolved.source("execution.executor") == "environment SEEM_EXECUTION_EXECUTOR"


def test_an_unknown_executor_is_refused_naming_the_setting():
    with pytest.raises(ConfigError, match="execution.executor"):
        tree(settings={"execution.executor": "dask"})


def test_the_executor_is_not_a_per_run_setting():
    assert "execution" not in run_config_schema()


def test_celery_config_is_the_trees_broker_and_backend():
    config = tree(settings={"execution.celery_broker": "redis://10.0.0.5:6379/3"}).config.execution
    assert celery_config(config) == {"broker": "redis://10.0.0.5:6379/3", "backend": "redis://127.0.0.1:6379/1"}


def test_a_missing_k8s_config_file_is_one_line_naming_the_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"^execution.k8s_config: cannot read .*nope.yaml") as err:
        assemble.build_defs(tree(settings={"execution.executor": "k8s", "execution.k8s_config": str(tmp_path / "nope.yaml")}))
    assert "\n" not in str(err.value)


def test_step_processes_resolve_what_the_launcher_resolved(tmp_path, monkeypatch):
    launcher = tree(tmp_path, {"execution.executor": "multiprocess", "fusion.threshold": 0.8, "evaluation.ks": (5,)})
    monkeypatch.setenv("SEEM_FUSION_THRESHOLD", "0.5")  # a step process's own environment does not count
    monkeypatch.setenv(*next(iter(assemble.launched_environment(launcher).items())))
    child = assemble.launched_config()
    assert child.config == launcher.config


def test_a_run_carries_its_per_run_settings_but_not_the_deployments(tmp_path):
    config = tree(tmp_path, {"execution.executor": "celery", "fusion.threshold": 0.8, "evaluation.ks": (5,)})
    seem = per_run_settings(config)["resources"]["seem"]["config"]
    assert seem == {"store": {"root": str(tmp_path)}, "fusion": {"threshold": 0.8}}
    assert json.loads(json.dumps(seem)) == seem  # run config travels as JSON: nothing in it may change on the way


def test_the_shipped_dagster_yaml_queues_runs_and_caps_the_llm_pool(tmp_path):
    shutil.copy(ROOT / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        config = instance.get_concurrency_config()
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert config.run_queue_config.max_concurrent_runs == 2
    assert config.pool_config.default_pool_limit == 1


def test_the_llm_steps_are_in_the_pool_the_yaml_caps():
    defs = assemble.build_defs(tree())
    job = defs.resolve_job_def("build_memory")
    pools = {node.name: node.definition.pool for node in job.graph.node_dict.values()}
    assert pools["extract_frames"] == "llm" and pools["episodes"] == "llm"


def test_celery_without_a_shared_instance_is_one_line(tmp_path, monkeypatch, capsys):
    from conftest import SAMPLE
    from seem_dagster.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    code = main(["build", "--input", str(SAMPLE), "--store", str(tmp_path / "store"), "--set", "execution.executor=celery", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "set DAGSTER_HOME" in err
