"""How the package hangs together: its parts import each other in one direction only, and the pure
parts import neither Dagster nor the Dagster layer."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from conftest import ROOT, other_value

PACKAGE = ROOT / "seem_dagster"
# Parts that must stay free of Dagster: the configuration, ingestion, the method, retrieval, the
# model clients and the pipeline steps (assets call them; they never call back).
PURE = ("config", "ingest", "episodic", "graph", "retrieval", "llm", "pipeline", "embeddings", "properties", "sql", "agent",
        "schemas", "ids", "store", "backends", "registry", "forgetting")


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0] if rel.parts[0] != "__init__" else "seem_dagster"


def imports() -> dict[str, dict[str, set[str]]]:
    """part -> imported module (first component: a part of ours, or an outside package) -> files that import it."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in PACKAGE.rglob("*.py"):
        part = _part(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] if node.module != "seem_dagster" else [f"seem_dagster.{a.name}" for a in node.names]
            for name in names:
                head, _, rest = name.partition(".")
                target = rest.split(".")[0] if head == "seem_dagster" and rest else head
                if target != part:
                    graph[part][target].add(str(path.relative_to(ROOT)))
    return graph


def test_no_two_parts_of_the_package_import_each_other_even_through_others():
    graph = imports()
    parts = {_part(p) for p in PACKAGE.rglob("*.py")}
    edges = {a: {b for b in targets if b in parts} for a, targets in graph.items()}
    cycles = []

    def visit(node, path):
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif len(path) < len(parts):
                visit(nxt, path + [nxt])

    for start in sorted(edges):
        visit(start, [start])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_pure_parts_do_not_import_dagster_or_the_dagster_layer():
    graph = imports()
    offenders = {part: sorted(graph[part]["dagster"] | graph[part]["defs"] | graph[part]["definitions"])
                 for part in PURE if graph[part]["dagster"] | graph[part]["defs"] | graph[part]["definitions"]}
    assert not offenders, offenders


def test_a_method_is_named_in_the_registry_alone():
    """Every retrieval method is one entry of seem_dagster/methods.py: the evaluation holds no method's
    name as a string, and no module of the package mentions a compound name (seem-no-rpe, prior+facts)
    at all. (The short names are also words with other jobs: the `seem` resource and command, the
    "dense" retrieval mode, the reranker's "prior" feature.)"""
    from seem_dagster import methods as registry

    names = set(registry.names())
    compound = {n for n in names if "+" in n or "-" in n}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "methods.py" and path.parent == PACKAGE:
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                    and path.relative_to(PACKAGE).parts[0] == "evaluation"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
        found += [f"{path.relative_to(ROOT)} mentions {n}" for n in sorted(compound) if n in text]
    assert not found, found


def test_every_stage_has_a_version_its_modules_and_a_recorded_digest():
    """docs/architecture.md, "Add a stage": a version, the modules that decide what it writes (each
    importable), and a recorded digest of their code."""
    import importlib.util
    import json

    from seem_dagster.pipeline.stages import CODE_VERSIONS, STAGE_MODULES

    assert set(CODE_VERSIONS) == set(STAGE_MODULES)
    missing = [m for modules in STAGE_MODULES.values() for m in modules if importlib.util.find_spec(m) is None]
    assert not missing, f"STAGE_MODULES names modules that do not exist: {missing}"
    assert set(json.loads((ROOT / "tests" / "stage_code.json").read_text())) == set(CODE_VERSIONS)


def test_every_memory_table_has_a_schema_check_a_view_and_a_line_in_the_store_docs():
    """docs/architecture.md, "Add a table"."""
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.checks import CHECKS
    from seem_dagster.pipeline.stages import MEMORY_TABLES, QUERY_TABLES
    from seem_dagster.sql.memory import TABLES as VIEWS

    schema_checked = {c.asset for c in CHECKS if "schema" in c.description}
    assert [t for t in MEMORY_TABLES + QUERY_TABLES if t not in schema_checked] == []
    assert set(VIEWS) == set(MEMORY_TABLES)
    docs = (ROOT / "docs" / "store.md").read_text()
    assert [t for t in MEMORY_TABLES + QUERY_TABLES if f"`{t}`" not in docs] == []
    assets = {key.to_user_string() for key in build_defs().resolve_asset_graph().get_all_asset_keys()}
    assert set(MEMORY_TABLES + QUERY_TABLES) <= assets


def test_a_setting_that_shapes_a_memory_is_in_its_stages_record():
    """docs/architecture.md, "Add a setting": changing any setting of a section that shapes a memory
    or a query's result changes some stage's record (so a stale memory rebuilds), unless
    ``stages.NOT_RECORDED`` says why not."""
    import json

    from seem_dagster.config import SeemConfig
    from seem_dagster.pipeline.stages import CODE_VERSIONS, EXTRACTION_ASSETS, NOT_RECORDED, stage_config

    assets = [*EXTRACTION_ASSETS, *(s for s in CODE_VERSIONS if s not in ("ingest", "extraction"))]

    def record(config):
        return json.dumps({a: stage_config(a, config) for a in assets}, sort_keys=True, default=str)

    base, unrecorded, tried = SeemConfig(), [], 0
    before = record(base)
    for section in ("extraction", "fusion", "synonyms", "retrieval", "query", "properties"):
        part = getattr(base, section)
        for name, field in type(part).model_fields.items():
            key = f"{section}.{name}"
            if key in ("extraction.extractor", "extraction.embedder"):
                continue  # recorded by name; another value loads another model
            value = other_value(field.annotation, getattr(part, name))
            if value == getattr(part, name):
                continue
            tried += 1
            changed = base.model_copy(update={section: part.model_copy(update={name: value})})
            if record(changed) == before and key not in NOT_RECORDED:
                unrecorded.append(key)
    assert tried > 50 and not unrecorded, unrecorded
