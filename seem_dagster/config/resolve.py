"""Resolve the configuration tree from its layers, remembering where every value came from.

Layers, lowest first: the defaults in ``tree.py``, a YAML/TOML file (``--config FILE`` or
``SEEM_CONFIG``), the environment (``SEEM_<SECTION>_<SETTING>``, e.g. ``SEEM_RETRIEVAL_TOP_FACTS``),
command-line flags and ``--set section.setting=value``, and, inside Dagster, the run config of the
``seem`` resource. Every layer is a flat map of dotted keys; an unknown key or a value of the wrong
type is a ``ConfigError`` that names the key and the layer it came from. Pure apart from reading the
file it is given.
"""

from __future__ import annotations

import difflib
import json
import os
import reprlib
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from seem_dagster.config.tree import DEFAULT_API_KEY_ENV, SeemConfig

DEFAULT = "default"
ENV_PREFIX = "SEEM_"
CONFIG_FILE_ENV = "SEEM_CONFIG"
# Shorter names kept for the two settings most often set from a shell.
ENV_ALIASES = {"SEEM_STORE": "store.root", "SEEM_INBOX": "store.inbox"}
MAX_FILE_BYTES = 1 << 20


class ConfigError(ValueError):
    """A setting that does not exist or a value it cannot take; the message names both and the layer."""


@dataclass(frozen=True)
class Setting:
    key: str  # "section.name"
    annotation: object
    default: object
    description: str


def _settings() -> dict[str, Setting]:
    out = {}
    for section, info in SeemConfig.model_fields.items():
        model = info.annotation
        for name, f in model.model_fields.items():
            out[f"{section}.{name}"] = Setting(f"{section}.{name}", f.annotation, f.get_default(call_default_factory=True), f.description or "")
    return out


SETTINGS: dict[str, Setting] = _settings()
SECTIONS: tuple[str, ...] = tuple(SeemConfig.model_fields)


@dataclass(frozen=True)
class Layer:
    """One source of values: dotted key -> value. ``text`` values are strings (environment, --set)
    read by the type of their setting; ``origin`` names a key's own source where it differs from
    ``source`` (the environment variable it was read from)."""

    source: str
    values: Mapping[str, object]
    text: bool = False
    origin: Mapping[str, str] = field(default_factory=dict)

    def label(self, key: str) -> str:
        return self.origin.get(key, self.source)


def _unknown(key: str, source: str) -> ConfigError:
    close = difflib.get_close_matches(key, SETTINGS, n=1)
    hint = f"; did you mean {close[0]!r}" if close else ""
    return ConfigError(f"unknown setting {key!r} (from {source}){hint}; `seem config show` lists every setting")


def flatten(nested: Mapping, source: str) -> dict[str, object]:
    """{"retrieval": {"top_facts": 8}} -> {"retrieval.top_facts": 8}; a section must be a mapping."""
    if not isinstance(nested, Mapping):
        raise ConfigError(f"{source}: expected a mapping of sections, got {type(nested).__name__}")
    flat = {}
    for section, values in nested.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {section!r}; sections: {', '.join(SECTIONS)}")
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: section {section!r} must be a table of settings, got {type(values).__name__}")
        for name, value in values.items():
            flat[f"{section}.{name}"] = value
    return flat


def file_layer(path: str | Path) -> Layer:
    """A YAML (.yaml, .yml, .json) or TOML (.toml) file shaped like the tree."""
    p = Path(path)
    source = f"file {p}"
    if p.suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError(f"config file {p}: unknown kind {p.suffix or '(no suffix)'!r}; use .toml, .yaml, .yml or .json")
    try:
        if not p.is_file():
            raise ConfigError(f"config file {p}: " + ("not found" if not p.exists() else "not a regular file"))
        with p.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"config file {p}: cannot be read: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"config file {p}: over the limit of {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        if p.suffix == ".toml":
            data = tomllib.loads(text)
        elif p.suffix == ".json":
            data = json.loads(text)
        else:
            data = _yaml(text) or {}
    except RecursionError:
        raise ConfigError(f"config file {p}: nested too deeply") from None
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"config file {p}: cannot be read: {first}") from None
    return Layer(source, flatten(data, source))


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a few bytes of aliases can expand to gigabytes."""

    def fetch_alias(self):
        raise yaml.YAMLError("anchors and aliases are not allowed")

    fetch_anchor = fetch_alias


def _yaml(text: str):
    return yaml.load(text, Loader=_NoAliasLoader)


def env_key(variable: str) -> str | None:
    """SEEM_RETRIEVAL_TOP_FACTS -> retrieval.top_facts; None for a variable that is not a setting's."""
    if variable in ENV_ALIASES:
        return ENV_ALIASES[variable]
    if not variable.startswith(ENV_PREFIX):
        return None
    rest = variable[len(ENV_PREFIX):].lower()
    for section in SECTIONS:
        if rest.startswith(section + "_") and len(rest) > len(section) + 1:
            return f"{section}.{rest[len(section) + 1:]}"
    return None


def env_layer(environ: Mapping[str, str], not_settings: Iterable[str] = ()) -> Layer:
    """Every SEEM_<SECTION>_* variable; ``not_settings`` are variables that only look like one (the
    API key's variable is read by the model client, never as a setting)."""
    skip = {CONFIG_FILE_ENV, *not_settings}
    values, origin = {}, {}
    for variable in sorted(environ):
        key = env_key(variable)
        if key is None or variable in skip:
            continue
        values[key] = environ[variable]
        origin[key] = f"environment {variable}"
    return Layer("environment", values, text=True, origin=origin)


def assignments_layer(assignments: Iterable[str], source: str = "--set") -> Layer:
    """["retrieval.top_facts=8", ...] as typed on a command line."""
    values = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{source} {item!r}: expected section.setting=value, e.g. retrieval.top_facts=8")
        values[key.strip()] = value.strip()
    return Layer(source, values, text=True)


def _allows_none(annotation) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _is_sequence(annotation) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if _allows_none(annotation) else [annotation]
    return any(typing.get_origin(a) in (tuple, list) for a in args)


def read_text(setting: Setting, value: str) -> object:
    """A string from the environment or a command line, read as its setting's type expects. Scalars
    stay strings: pydantic converts "8", "0.8" and "false" and refuses what is not one."""
    stripped = value.strip()
    if _allows_none(setting.annotation) and stripped.lower() in ("", "null", "none"):
        return None
    if _is_sequence(setting.annotation):
        if stripped.startswith("["):
            try:
                return _yaml(stripped)
            except (yaml.YAMLError, RecursionError):
                raise ConfigError(f"setting {setting.key}: {_short(value)} is not a list of values") from None
        return [part.strip() for part in stripped.split(",") if part.strip()]
    return value


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxlevel = 80, 80, 8, 2


def _short(value) -> str:
    """A value as an error message quotes it: bounded, whatever was sent."""
    return _REPR.repr(value)


def _unflatten(flat: Mapping[str, object]) -> dict:
    nested: dict[str, dict] = {}
    for key, value in flat.items():
        section, name = key.split(".", 1)
        nested.setdefault(section, {})[name] = value
    return nested


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Resolved:
    """The resolved tree, where each value came from, and the layers it was resolved from."""

    config: SeemConfig
    sources: Mapping[str, str]
    layers: tuple[Layer, ...] = ()

    def over(self, *layers: Layer) -> Resolved:
        """The same layers with ``layers`` on top (the evaluation's protocol, Dagster run config)."""
        return resolve(self.layers + tuple(layers))

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)

    def value(self, key: str) -> object:
        section, name = key.split(".", 1)
        return getattr(getattr(self.config, section), name)

    def show(self, fmt: str = "toml", describe: bool = False) -> str:
        if fmt == "json":
            return json.dumps({s: {k.split(".", 1)[1]: {"value": _plain(self.value(k)), "source": self.source(k)}
                                   for k in SETTINGS if k.startswith(s + ".")} for s in SECTIONS}, indent=2)
        if fmt != "toml":
            raise ConfigError(f"unknown format {fmt!r}; choose toml or json")
        lines = ["# seem-dagster configuration as resolved: each value, then where it came from"]
        for section in SECTIONS:
            lines += ["", f"[{section}]"]
            for key, setting in SETTINGS.items():
                if not key.startswith(section + "."):
                    continue
                if describe and setting.description:
                    lines.append(f"# {setting.description}")
                name, value = key.split(".", 1)[1], self.value(key)
                text = f"# {name} = (none)" if value is None else f"{name} = {json.dumps(_plain(value))}"
                lines.append(f"{text:<44} # {self.source(key)}")
        return "\n".join(lines) + "\n"


def resolve(layers: Iterable[Layer] = ()) -> Resolved:
    layers = tuple(layers)
    flat: dict[str, object] = {}
    sources: dict[str, str] = {}
    for layer in layers:
        for key, value in layer.values.items():
            if key not in SETTINGS:
                raise _unknown(key, layer.label(key))
            flat[key] = read_text(SETTINGS[key], value) if layer.text and isinstance(value, str) else value
            sources[key] = layer.label(key)
    try:
        config = SeemConfig.model_validate(_unflatten(flat))
    except ValidationError as err:
        raise ConfigError(_explain(err, flat, sources)) from None
    return Resolved(config, sources, layers)


def _explain(err: ValidationError, flat: Mapping, sources: Mapping[str, str]) -> str:
    first = err.errors()[0]
    loc = [str(part) for part in first["loc"]]
    message = first["msg"].removeprefix("Value error, ")
    if len(loc) >= 2:
        key = ".".join(loc[:2])
        where = f" (value {_short(flat[key])} from {sources[key]})" if key in flat else ""
        element = f" item {loc[2]}" if len(loc) > 2 else ""
        return f"setting {key}{element}: {message}{where}"
    section = loc[0] if loc else "configuration"
    set_here = sorted(f"{k} from {s}" for k, s in sources.items() if k.startswith(section + "."))
    return f"settings [{section}]: {message}" + (f" (set: {'; '.join(set_here)})" if set_here else "")


def resolve_standard(
    config_file: str | Path | None = None, top: Iterable[Layer] = (), environ: Mapping[str, str] | None = None
) -> Resolved:
    """Defaults < file (``config_file``, else ``SEEM_CONFIG``) < environment < ``top`` (command-line
    flags, then ``--set``)."""
    environ = os.environ if environ is None else environ
    top = tuple(top)
    path = config_file or environ.get(CONFIG_FILE_ENV)
    below = (file_layer(path),) if path else ()
    # The API key's variable looks like a setting's (SEEM_LLM_API_KEY) but is read only by the client.
    key_vars = {DEFAULT_API_KEY_ENV, environ.get("SEEM_LLM_API_KEY_ENV", "")}
    key_vars |= {str(layer.values["llm.api_key_env"]) for layer in below + top if "llm.api_key_env" in layer.values}
    return resolve(below + (env_layer(environ, key_vars),) + top)


def defaults() -> Resolved:
    """The tree with nothing but its defaults (tests, notebooks, pure callers)."""
    return resolve(())
