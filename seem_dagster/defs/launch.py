"""Runs whose steps execute in other processes (multiprocess, Celery, Kubernetes): the job rebuilt
there from its module (Dagster's public ``build_reconstructable_job``), on an instance they share,
each step process resolving the launcher's settings."""

from __future__ import annotations

import contextlib
import os
import tempfile

from dagster import DagsterInstance, build_reconstructable_job

from seem_dagster.config import SETTINGS, ConfigError, Resolved


def per_run_settings(config: Resolved) -> dict:
    """The ``seem`` resource's run config holding every per-run setting that is not the default: an
    out-of-process step (a Celery worker started with other settings) computes with the launcher's."""
    from seem_dagster.defs.resources import NOT_PER_RUN

    sections: dict = {}
    for key in SETTINGS:
        if config.source(key) != "default" and not key.startswith(NOT_PER_RUN):
            section, name = key.split(".", 1)
            value = config.value(key)
            sections.setdefault(section, {})[name] = list(value) if isinstance(value, tuple) else value
    return {"resources": {"seem": {"config": sections}}} if sections else {}


@contextlib.contextmanager
def launched(config: Resolved):
    """Step processes started meanwhile (multiprocess) resolve ``config`` (``assemble.launched_defs``)."""
    from seem_dagster.defs.assemble import launched_environment

    saved = {k: os.environ.get(k) for k in launched_environment(config)}
    os.environ.update(launched_environment(config))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def out_of_process_instance(instance: DagsterInstance | None, executor: str, stack: contextlib.ExitStack) -> DagsterInstance:
    """Steps in other processes read and write the run through the instance's storage: it must be persistent.
    Without DAGSTER_HOME a multiprocess build gets a temporary instance, removed after the build."""
    if instance is not None and not instance.is_ephemeral:
        return instance
    if os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.get()
    if executor != "multiprocess":
        raise ConfigError(f"execution.executor {executor!r}: set DAGSTER_HOME to the instance the workers share "
                          "(its run and event storage must be theirs too)")
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="seem-dagster-instance-"))
    return stack.enter_context(DagsterInstance.local_temp(folder))


def reconstructable(job_name: str):
    """The job as a step process rebuilds it: ``assemble.launched_job(job_name)``, from this working directory."""
    return build_reconstructable_job("seem_dagster.defs.assemble", "launched_job", reconstructable_args=(job_name,),
                                     reconstructor_working_directory=os.getcwd())


def merge(base: dict, top: dict) -> dict:
    """``top`` over ``base``, nested dictionaries merged."""
    out = dict(base)
    for key, value in top.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
