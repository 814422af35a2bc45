"""The executor a deployment runs its steps with, chosen by ``execution.executor`` in the configuration tree.

- ``in_process``: every step of a run in the process that runs it (tests, `seem build`): Dagster,
  spaCy and MiniLM load once per run.
- ``multiprocess``: Dagster's multiprocess executor, a process per step on one machine.
- ``celery``: dagster-celery's executor; steps go to Celery workers on any machine that shares the
  broker, the Dagster instance and the store (start them with `dagster-celery worker start`).
- ``k8s``: dagster-k8s's ``k8s_job_executor``, a Kubernetes Job per step, configured from the YAML
  file ``execution.k8s_config`` names (per-step resources, the GPU node selector of extraction).

The Celery and Kubernetes packages are optional extras (``celery``, ``k8s``): they are imported only
when chosen, and a missing one is a one-line error saying which extra to install.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from dagster import ExecutorDefinition, in_process_executor, multiprocess_executor

from seem_dagster.config import ConfigError, ExecutionConfig


def _optional(module: str, extra: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ConfigError(f"execution.executor needs the {extra!r} extra ({err}): pip install 'seem-dagster[{extra}]'") from None


def celery_config(execution: ExecutionConfig) -> dict:
    """dagster-celery's executor config: the broker and the result backend the workers share."""
    return {"broker": execution.celery_broker, "backend": execution.celery_backend}


def k8s_config(execution: ExecutionConfig) -> dict:
    """k8s_job_executor's config, read from the file ``execution.k8s_config`` (empty: none)."""
    if not execution.k8s_config:
        return {}
    path = Path(execution.k8s_config)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"execution.k8s_config: cannot read {path}: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"execution.k8s_config: {path} must hold a mapping (k8s_job_executor's config)")
    return data


def executor_for(execution: ExecutionConfig) -> ExecutorDefinition:
    if execution.executor == "in_process":
        return in_process_executor
    if execution.executor == "multiprocess":
        config = {"max_concurrent": execution.max_concurrent} if execution.max_concurrent else {}
        return multiprocess_executor.configured(config, name="multiprocess")
    if execution.executor == "celery":
        dagster_celery = _optional("dagster_celery", "celery")
        return dagster_celery.celery_executor.configured(celery_config(execution), name="celery")
    dagster_k8s = _optional("dagster_k8s", "k8s")
    return dagster_k8s.k8s_job_executor.configured(k8s_config(execution), name="k8s")
