"""The configuration tree: one set of defaults, every layer (file, environment, --set, flags, Dagster
run config) reaching every setting, and a clear error for an unknown key or a wrong value."""

from __future__ import annotations

import json

import pytest
from dagster import build_resources

from conftest import other_value
from seem_dagster.cli import main
from seem_dagster.config import SETTINGS, ConfigError, Layer, SeemConfig, assignments_layer, resolve, resolve_standard
from seem_dagster.config.resolve import env_key
from seem_dagster.defs.resources import NOT_PER_RUN, run_config_schema, seem_resource


def _other_value(setting):
    return other_value(setting.annotation, setting.default)


def _text(value) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_defaults_live_in_the_tree_and_every_setting_has_a_description():
    assert resolve().config == SeemConfig()
    assert {k.split('.')[0] for k in SETTINGS} == {"store", "ingest", "extraction", "fusion", "synonyms", "retrieval", "query", "llm",
                                                    "properties", "sql", "agent", "evaluation", "execution"}
    assert all(s.description for s in SETTINGS.values()), [k for k, s in SETTINGS.items() if not s.description]


def test_every_setting_is_reachable_from_the_environment_and_from_set():
    for key, setting in SETTINGS.items():
        if key.startswith("llm.") and key not in ("llm.backend", "llm.model", "llm.base_url"):
            continue  # checked below with a backend that uses them
        value = _other_value(setting)
        variable = "SEEM_" + key.replace(".", "_").upper()
        assert env_key(variable) == key
        extra = {"SEEM_LLM_MODEL": "m", "SEEM_LLM_BASE_URL": "http://127.0.0.1:1/v1"} if key == "llm.backend" else {}
        from_env = resolve_standard(environ={variable: _text(value), **extra})
        from_set = resolve_standard(top=[assignments_layer([f"{key}={_text(value)}"])], environ=extra)
        for resolved in (from_env, from_set):
            got = resolved.value(key)
            assert (tuple(got) if isinstance(got, tuple) else got) == value, key
        assert from_env.source(key) == f"environment {variable}" and from_set.source(key) == "--set"
    llm = {"SEEM_LLM_BACKEND": "openai", "SEEM_LLM_MODEL": "m", "SEEM_LLM_BASE_URL": "http://127.0.0.1:1/v1"}
    for key, setting in SETTINGS.items():
        if key.startswith("llm.") and f"SEEM_{key.replace('.', '_').upper()}" not in llm:
            value = _other_value(setting)
            got = resolve_standard(environ={**llm, "SEEM_" + key.replace(".", "_").upper(): _text(value)}).value(key)
            assert got == value, key


def test_layers_win_in_order_and_each_value_says_where_it_came_from(tmp_path):
    toml = tmp_path / "seem.toml"
    toml.write_text('[retrieval]\ntop_facts = 3\ndamping = 0.6\n[fusion]\nthreshold = 0.7\n')
    resolved = resolve_standard(
        toml, top=[Layer("flags", {"store.root": "/srv/memory"}, text=True, origin={"store.root": "flag --store"}),
                   assignments_layer(["retrieval.top_facts=8"])],
        environ={"SEEM_RETRIEVAL_DAMPING": "0.4", "SEEM_LLM_API_KEY": "sk-not-a-setting", "SEEM_STORE": "/ignored/by/the/flag"},
    )
    config = resolved.config
    assert (config.retrieval.top_facts, config.retrieval.damping, config.fusion.threshold) == (8, 0.4, 0.7)
    assert config.store.root == "/srv/memory"
    assert resolved.source("retrieval.top_facts") == "--set"
    assert resolved.source("retrieval.damping") == "environment SEEM_RETRIEVAL_DAMPING"
    assert resolved.source("fusion.threshold") == f"file {toml}"
    assert resolved.source("store.root") == "flag --store"
    assert resolved.source("query.k") == "default"
    shown = resolved.show()
    assert "top_facts = 8" in shown and "# --set" in shown.split("top_facts = 8")[1].splitlines()[0]
    assert "sk-not-a-setting" not in shown  # the API key's variable is never read as a setting
    # YAML works the same way, and SEEM_CONFIG names the file when --config is not given.
    yaml_file = tmp_path / "seem.yaml"
    yaml_file.write_text("retrieval:\n  use_rpe: false\n")
    assert resolve_standard(environ={"SEEM_CONFIG": str(yaml_file)}).config.retrieval.use_rpe is False


@pytest.mark.parametrize("layer, message", [
    (["retrieval.top_fact=3"], "unknown setting 'retrieval.top_fact' (from --set); did you mean 'retrieval.top_facts'"),
    (["retrieval.top_facts=many"],
     "setting retrieval.top_facts: Input should be a valid integer, unable to parse string as an integer (value 'many' from --set)"),
    (["retrieval.damping=1.5"], "setting retrieval.damping: Input should be less than 1 (value '1.5' from --set)"),
    (["retrieval.rpe_scope=everything"], "setting retrieval.rpe_scope: Input should be 'episode', 'session' or 'both' (value 'everything' from --set)"),
    (["evaluation.methods=seem,colbert"], "setting evaluation.methods: unknown method 'colbert'; choose from prior, "),
    (["llm.backend=openai"], "settings [llm]: backend 'openai' needs a model name"),
    (["top_facts"], "--set 'top_facts': expected section.setting=value"),
])
def test_a_bad_setting_is_an_error_naming_the_key_the_value_and_the_layer(layer, message):
    with pytest.raises(ConfigError) as err:
        resolve_standard(top=[assignments_layer(layer)], environ={})
    assert str(err.value).startswith(message), str(err.value)


def test_bad_files_and_variables_are_errors_naming_them(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval]\ntop_facts = \n")
    with pytest.raises(ConfigError, match=f"config file {bad}: cannot be read"):
        resolve_standard(bad, environ={})
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("retreival:\n  top_facts: 3\n")
    with pytest.raises(ConfigError, match="unknown section 'retreival'"):
        resolve_standard(wrong, environ={})
    with pytest.raises(ConfigError, match="config file .*missing.toml: not found"):
        resolve_standard(tmp_path / "missing.toml", environ={})
    with pytest.raises(ConfigError, match=r"unknown setting 'fusion.treshold' \(from environment SEEM_FUSION_TRESHOLD\)"):
        resolve_standard(environ={"SEEM_FUSION_TRESHOLD": "0.8"})
    assert resolve_standard(environ={"SEEM_SOMETHING_ELSE": "x"}).config == SeemConfig()  # not a section: not ours


def test_dagster_run_config_reaches_every_setting_and_is_checked():
    schema = run_config_schema()
    per_run = {f"{s}.{k}" for s, field in schema.items() for k in field.config_type.fields}
    assert per_run == {k for k in SETTINGS if not k.startswith(NOT_PER_RUN)}
    assert "llm.base_url" in per_run and "llm.api_key_env" not in per_run and not any(k.startswith("ingest.") for k in per_run)
    base = resolve([Layer("test", {"store.root": "/memory"})])
    run = {"retrieval": {"top_facts": 9, "rpe_scope": "session"}, "query": {"k": 3}}
    with build_resources({"seem": seem_resource(base)}, resource_config={"seem": {"config": run}}) as resources:
        config = resources.seem
    assert (config.retrieval.top_facts, config.retrieval.rpe_scope, config.query.k) == (9, "session", 3)
    assert config.store.root == "/memory"  # unset in run config: the base value
    # A run cannot name the variable the API key is read from (it could send any secret to any base_url).
    with pytest.raises(Exception, match="api_key_env"):
        with build_resources({"seem": seem_resource(base)}, resource_config={"seem": {"config": {"llm": {"api_key_env": "AWS_SECRET"}}}}):
            pass
    with pytest.raises(Exception) as err:
        with build_resources({"seem": seem_resource(base)}, resource_config={"seem": {"config": {"retrieval": {"rpe_scope": "all"}}}}):
            pass
    cause = err.value.__cause__ or err.value
    assert str(cause).startswith("resource seem: setting retrieval.rpe_scope: Input should be 'episode', 'session' or 'both' "
                                 "(value 'all' from dagster run config)"), str(cause)


def test_seem_config_show_prints_the_tree_with_sources(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEEM_FUSION_THRESHOLD", "0.8")
    assert main(["config", "show", "--set", "retrieval.top_facts=8"]) == 0
    out = capsys.readouterr().out
    assert "[retrieval]" in out and "[fusion]" in out and "[llm]" in out
    fusion = out.split("[fusion]")[1].split("[synonyms]")[0]
    assert "threshold = 0.8" in fusion and fusion.split("threshold = 0.8")[1].split("\n")[0].strip() == "# environment SEEM_FUSION_THRESHOLD"
    retrieval = out.split("[retrieval]")[1].split("[query]")[0]
    assert retrieval.split("top_facts = 8")[1].split("\n")[0].strip() == "# --set"
    assert retrieval.split("damping = 0.5")[1].split("\n")[0].strip() == "# default"
    assert main(["config", "show", "--format", "json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["fusion"]["threshold"] == {"value": 0.8, "source": "environment SEEM_FUSION_THRESHOLD"}
    assert main(["config", "show", "--set", "retrieval.top_facts=x"]) == 2
    assert "retrieval.top_facts" in capsys.readouterr().err
