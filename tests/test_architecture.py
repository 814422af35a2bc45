"""How the package hangs together: its parts import each other in one direction only, and the pure
parts import neither Dagster nor the Dagster layer."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from conftest import ROOT

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
