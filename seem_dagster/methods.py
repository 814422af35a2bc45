"""The retrieval methods `seem eval` compares: one entry each, the one place a method is named.

An entry says what the method is, how it ranks, which ablation step it is and what the evaluation
prepares for it. The configuration checks `evaluation.methods` against these names, the evaluation
builds each method's ranking from its entry (``evaluation.methods``), and the ablation table and the
report read its step and label (``evaluation.ablation``). Adding a method is adding an entry here
(``register`` adds one at run time, as a test does); docs/architecture.md has the checklist.

Pure data: nothing here imports the package, so the configuration can read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# How a method ranks (evaluation/methods.py builds each): SEEM's retrieval under the method's
# settings; a flat baseline; or SEEM with something added.
SEEM, DENSE, BM25, HYBRID, HYBRID_REPLY, PROPERTY_ROUTE, EMBEDDED_FACTS = (
    "seem", "dense", "bm25", "hybrid", "hybrid+reply", "seem+property-route", "seem+embedded-facts")
RANKINGS = (SEEM, DENSE, BM25, HYBRID, HYBRID_REPLY, PROPERTY_ROUTE, EMBEDDED_FACTS)
# What the evaluation prepares for a method beyond the memory and the question's vectors.
EMBEDDED_FACT_VECTORS = "embedded_fact_vectors"  # every fact embedded alone, through the vector cache

# The flat prior's settings: no graph, no RPE, no facts or sentences as keys, no reranking, and no reading
# of the question's time, events, latest or advice (those are the chain's second step).
FLAT = {"use_graph": False, "use_rpe": False, "fact_key_weight": 0.0, "sentence_weight": 0.0, "rerank": False}
UNREAD = {"time_weight": 0.0, "time_fact_weight": 0.0, "split_events": False, "latest_first": False, "advice_lexical": 1.0}


@dataclass(frozen=True)
class Step:
    """Where a method sits in the ablation: ``chain`` (one part more than the chain's step before it),
    ``without`` (``against`` with one part taken away) or ``with`` (``against`` with one part added)."""

    kind: str
    label: str
    against: str | None = None


@dataclass(frozen=True)
class Method:
    name: str
    what: str  # one line, as the docs and `seem config show --describe` say it
    ranks: str = SEEM  # one of RANKINGS
    settings: Mapping[str, object] = field(default_factory=dict)  # retrieval settings over the configured tree
    step: Step | None = None
    needs: frozenset[str] = frozenset()
    default: bool = True  # evaluated unless --methods says otherwise


def _m(name, what, ranks=SEEM, settings=None, step=None, needs=(), default=True) -> Method:
    return Method(name, what, ranks, dict(settings or {}), step, frozenset(needs), default)


_REGISTRY: dict[str, Method] = {m.name: m for m in [
    # The chain: each step one part more than the one before, up to seem.
    _m("prior", "the passage prior alone: dense cosine (also without the speakers' names) + scaled BM25 + a reply's share",
       settings={**FLAT, **UNREAD}, step=Step("chain", "passage prior alone")),
    _m("prior+reading", "the prior reading the question: its time, its events, asking for the latest, for advice",
       settings=FLAT, step=Step("chain", "+ reading the question")),
    _m("prior+facts", "+ facts and sentences as retrieval keys (a passage gains its best fact's match, and what its best "
       "sentence matches beyond the whole passage)",
       settings={"use_graph": False, "use_rpe": False, "rerank": False}, step=Step("chain", "+ facts and sentences as keys")),
    _m("seem-no-rpe", "+ the walk: fact seeds, personalized PageRank over the prior",
       settings={"use_rpe": False, "rerank": False}, step=Step("chain", "+ graph walk")),
    _m("seem-no-fusion", "+ RPE from the anchor's session neighbours, replies and name links (no episodes)",
       settings={"rpe_scope": "session", "rerank": False}, step=Step("chain", "+ RPE (session)")),
    _m("seem", "SEEM as configured: + the fused episodes in RPE", step=Step("chain", "+ fusion (RPE over episodes)")),
    _m("seem+query-facts", "+ the question's own facts matched against the memory's (retrieval.query_facts)",
       settings={"query_facts": True}, step=Step("chain", "+ the question's own facts")),
    _m("seem+properties", "+ the property route: the histories of the best-matching properties", ranks=PROPERTY_ROUTE,
       step=Step("chain", "+ property route"), default=False),
    # seem with one part taken away (same memory).
    _m("seem-no-synonyms", "seem walking the graph without its synonym edges", settings={"use_synonyms": False},
       step=Step("without", "seem without the synonym edges", "seem")),
    _m("seem-named", "seem matching the question as asked only", settings={"unnamed_weight": 0.0, "unnamed_fact_weight": 0.0},
       step=Step("without", "seem matching the question as asked only (not also without the speakers' names)", "seem")),
    _m("seem-named-facts", "seem matching the facts against the question as asked only", settings={"unnamed_fact_weight": 0.0},
       step=Step("without", "seem matching the facts against the question as asked only", "seem")),
    _m("seem-embedded-facts", "seem over every fact's vector embedded alone", ranks=EMBEDDED_FACTS, needs=[EMBEDDED_FACT_VECTORS],
       step=Step("without", "seem with every fact embedded alone (not pooled from its passage's forward pass)", "seem")),
    _m("seem-unstemmed", "seem with BM25 on exact words", settings={"lexical_stems": False},
       step=Step("without", "seem with BM25 matching exact words (not their stems)", "seem")),
    _m("seem-rpe-on-lists", "seem expanding every top passage of a list question with RPE", settings={"list_breadth": False},
       step=Step("without", "seem with RPE on every top passage for questions that ask for several things "
                 "(retrieval.list_breadth)", "seem")),
    _m("seem-no-rpe-on-lists", "seem keeping a list question's ranking without RPE", settings={"list_top_passages_rpe": 0},
       step=Step("without", "seem without RPE for questions that ask for several things (retrieval.list_top_passages_rpe 0)",
                 "seem")),
    _m("seem-no-time", "seem without the question's time", settings={"time_weight": 0.0, "time_fact_weight": 0.0},
       step=Step("without", "seem without the question's time (retrieval.time_weight, time_fact_weight)", "seem")),
    _m("seem-calendar-counted", "seem reading a calendar name without its year like a time counted from the question's date",
       settings={"time_calendar": 0.25},
       step=Step("without", "seem reading \"in February\", \"on March 15th\" like \"last week\" (retrieval.time_calendar "
                 "at time_relative's 0.25)", "seem")),
    _m("seem-no-latest", "seem without the latest statement first", settings={"latest_first": False},
       step=Step("without", "seem without the latest statement first (retrieval.latest_first)", "seem")),
    _m("seem-encoded-names", "seem encoding a question that names a speaker a second time, as asked", settings={"compose_names": 0.0},
       step=Step("without", "seem encoding the question a second time with the speakers' names (not composing its vector, "
                 "retrieval.compose_names)", "seem")),
    _m("seem-no-sentences", "seem matching each passage as a whole only", settings={"sentence_weight": 0.0},
       step=Step("without", "seem matching each passage as a whole only (not also by its best sentence, "
                 "retrieval.sentence_weight)", "seem")),
    _m("seem-no-advice", "seem reading a request for advice like any question", settings={"advice_lexical": 1.0},
       step=Step("without", "seem reading a request for advice like any question (retrieval.advice_lexical)", "seem")),
    # The prior with one part taken away.
    _m("prior-named", "the prior matching the question as asked only",
       settings={**FLAT, **UNREAD, "unnamed_weight": 0.0, "unnamed_fact_weight": 0.0},
       step=Step("without", "the prior matching the question as asked only", "prior")),
    _m("prior-unstemmed", "the prior with BM25 on exact words", settings={**FLAT, **UNREAD, "lexical_stems": False},
       step=Step("without", "the prior with BM25 matching exact words (not their stems)", "prior")),
    # Parts off by default, measured by adding them.
    _m("seem+rerank", "seem reordered by its fitted model (retrieval.rerank)", settings={"rerank": True},
       step=Step("with", "seem with the learned reranking (retrieval.rerank)", "seem")),
    _m("seem+events", "seem ranking a question about several events once per event", settings={"split_events": True},
       step=Step("with", "seem ranking a question about several events once per event (retrieval.split_events)", "seem")),
    _m("prior+rerank", "the prior reordered by its own fitted model", settings={**FLAT, **UNREAD, "rerank": True},
       step=Step("with", "the prior with its own learned reranking", "prior")),
    # Side methods and baselines.
    _m("prior+rpe", "RPE over the prior, without the walk or facts", settings={"use_graph": False, "fact_key_weight": 0.0,
                                                                                "sentence_weight": 0.0, "rerank": False, **UNREAD}),
    _m("graph-only", "the walk without the passage prior in its reset", settings={"passage_share": 0.0, "rerank": False}),
    _m("dense", "MiniLM's cosine alone", ranks=DENSE),
    _m("bm25", "BM25 alone", ranks=BM25),
    _m("hybrid", "BM25 and dense fused by reciprocal rank", ranks=HYBRID),
    _m("hybrid+reply", "hybrid with the prior's reply share", ranks=HYBRID_REPLY),
]}

# Two chain ends compared as a whole, and the same with both reranked (the reranker is not the structure's).
STRUCTURE = ("seem", "prior")
STRUCTURE_RERANKED = ("seem+rerank", "prior+rerank")
# Answered and judged with a language model by default (evaluation.answer_methods).
ANSWERED = ("seem", "hybrid")
# Every method's query latency is also given as a multiple of these methods' (the report's columns).
LATENCY_BASELINES = ("bm25", "dense")


def get(name: str) -> Method:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(_REGISTRY)}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def defaults() -> tuple[str, ...]:
    return tuple(n for n, m in _REGISTRY.items() if m.default)


def all_methods() -> tuple[Method, ...]:
    return tuple(_REGISTRY.values())


def register(method: Method) -> None:
    """Add a method (or replace one of the same name): the configuration accepts it, the evaluation
    ranks with it and the report shows it."""
    if method.ranks not in RANKINGS:
        raise ValueError(f"method {method.name!r}: ranks {method.ranks!r} is none of {', '.join(RANKINGS)}")
    if method.step is not None and method.step.kind not in ("chain", "without", "with"):
        raise ValueError(f"method {method.name!r}: step {method.step.kind!r} is none of chain, without, with")
    _REGISTRY[method.name] = method


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
