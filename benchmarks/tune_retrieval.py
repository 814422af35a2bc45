"""What tuning the retrieval settings is worth on conversations they were not tuned on.

    .venv/bin/python benchmarks/tune_retrieval.py --store eval/locomo/store --benchmark locomo
    .venv/bin/python benchmarks/tune_retrieval.py --store eval/lme/store --benchmark longmemeval

The store is one a `seem eval` run built: its memories and its questions. For `prior` and `seem`,
each conversation is held out in turn, the settings are chosen on the others by coordinate ascent
from the defaults over the grids below (prior: the prior's own settings; seem: those, the
structure's and how it reads the question; ``--groups`` chooses among them), and the held-out
questions are scored with the defaults and with the settings chosen without them
(seem_dagster/evaluation/tuning.py). What the question's encoding fixes (its time window, its form,
the names' composition) stays at the configured values: the grids hold settings of the ranking. The
pooled held-out figures say how much of a tuned setting's gain is the method's and how much was
fitted to the dev conversations, and what `seem` over `prior` is when each is tuned on its own.
``--start`` tunes from a part switched off instead: what adopting it on the other questions earns on
the held-out ones (e.g. ``--groups sentence_weight --start sentence_weight=0``). LongMemEval holds
one question per haystack, so there it is leave-one-question-out. The metric: LoCoMo evidence
recall@K, LongMemEval recall_all@K over turns or sessions (``--k``, default 10; ``--granularity``,
default turn). The questions' vectors are encoded once; every setting ranks every question once.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from seem_dagster import Memory
from seem_dagster.config import RetrievalConfig
from seem_dagster.evaluation.methods import ids, rankers
from seem_dagster.evaluation.metrics import is_abstention, normalise_locomo_evidence
from seem_dagster.evaluation.scoring import locomo_category, score_lme_question, score_locomo
from seem_dagster.evaluation.tuning import memoised, nested, pooled
from seem_dagster.retrieval.query import form_of
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.snapshot import read_table, table_path

# The settings of the passage prior, and those of the structure on it (retrieval's config tree has
# their meanings); each grid holds the default.
PRIOR_GRID = {"lexical_weight": [0.25, 0.5, 0.75, 1.0], "unnamed_weight": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
              "answer_share": [0.2, 0.3, 0.35, 0.4, 0.5]}
STRUCTURE_GRID = {"fact_key_weight": [0.1, 0.2, 0.3, 0.4, 0.5], "min_fact_score": [0.25, 0.3, 0.35, 0.4],
                  "unnamed_fact_weight": [0.0, 0.25, 0.5, 1.0], "top_facts": [3, 5, 8], "damping": [0.3, 0.4, 0.5, 0.6],
                  "passage_share": [1.0, 2.0, 4.0], "top_passages_rpe": [1, 2, 3, 4], "rpe_after": [3, 4, 5, 6],
                  "rpe_within": [20, 30, 40, 50], "sentence_weight": [0.0, 0.25, 0.5, 0.75, 1.0],
                  "list_top_passages_rpe": [0, 1, 2]}
# What seem reads in the question (its time, its events, the latest, advice): the prior reads none of it.
READING_GRID = {"time_weight": [0.0, 0.4, 0.8, 1.2, 1.6], "time_relative": [0.0, 0.25, 0.5, 1.0],
                "time_calendar": [0.25, 0.5, 1.0], "time_fact_weight": [0.0, 0.15, 0.3, 0.6], "split_events": [False, True],
                "latest_first": [False, True], "latest_depth": [5, 10, 20], "advice_lexical": [0.25, 0.5, 0.75, 1.0]}
GROUPS = {"prior": PRIOR_GRID, "structure": STRUCTURE_GRID, "reading": READING_GRID}


# The values the parts that read the question, the sentences and a list question's RPE had before
# they were built (``--start before``): tuned from there, ties keep a part out, so the held-out figure
# says what adopting each part on the other questions is worth on the one held out. time_calendar
# keeps its value (idle while the time weights are 0), and the question is still encoded as the
# configuration reads it (an advice request names no window and asks for no latest).
BEFORE = {"time_weight": 0.0, "time_fact_weight": 0.0, "latest_first": False, "advice_lexical": 1.0, "sentence_weight": 0.0,
          "list_top_passages_rpe": 0}


def start_point(text: str, base: RetrievalConfig) -> dict[str, object]:
    """``--start``: "before" (BEFORE), or name=value pairs, comma-separated, each a retrieval setting
    read and checked as the configuration reads it (``SEEM_RETRIEVAL_*`` the same); "" for none."""
    if text == "before":
        return dict(BEFORE)
    raw: dict[str, str] = {}
    for pair in filter(None, text.split(",")):
        name, sep, value = pair.partition("=")
        if not sep or name not in type(base).model_fields:
            raise SystemExit(f"--start {pair!r}: expected name=value with a retrieval setting's name")
        raw[name] = value
    try:
        read = base.replace(**raw)
    except ValueError as error:  # pydantic's ValidationError: the setting's own type and range
        raise SystemExit(f"--start {text!r}: {error}") from None
    return {name: getattr(read, name) for name in raw}


def grids(groups=tuple(GROUPS)) -> dict[str, dict]:
    """method -> its grid: `prior` tunes those of the prior's own settings that are chosen (by the prior
    group or by name), `seem` every chosen group's; a setting's name among the groups stands for that setting alone (its grid's
    values), which with ``--start`` measures one part."""
    single = {name: values for grid in GROUPS.values() for name, values in grid.items()}
    unknown = sorted(set(groups) - set(GROUPS) - set(single))
    if unknown or not groups:
        raise SystemExit(f"--groups takes {', '.join(GROUPS)} or settings of their grids; not {', '.join(unknown) or 'none'}")
    seem: dict = {}
    for group in groups:
        seem.update(GROUPS[group] if group in GROUPS else {group: single[group]})
    return {"prior": {k: v for k, v in PRIOR_GRID.items() if k in seem}, "seem": seem}


def load_questions(memory: Memory, benchmark: str, base: RetrievalConfig, category: str | None = None,
                   granularity: str = "turn") -> list[tuple[str, object, list]]:
    """Per conversation with questions: (its id, its memory, [(an encoded question, its scorer of a
    ranking at K)]), the scorer as `seem eval` scores that benchmark; only the questions of
    ``category`` when one is given (a LoCoMo category or a LongMemEval question type, as results.md
    names them); LongMemEval at ``granularity`` (turn or session). Each question's form (whether it
    asks for several things) is read as ``base`` reads it, as `seem eval` does."""
    loaded = []
    for cid in memory.conversations():
        index = memory.index(cid)
        questions = read_table(table_path(memory.store, "questions", cid))
        passages = index.passages
        ref_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.source_ref].to_list()))
        speaker_of = dict(zip(passages[Passages.passage_id].to_list(), passages[Passages.speaker].to_list()))
        latest = passages[Passages.timestamp].max()
        encoded = []
        for q in questions.iter_rows(named=True):
            if benchmark == "longmemeval" and is_abstention(q[Questions.question_id]):
                continue
            named = locomo_category(q[Questions.category]) if benchmark == "locomo" else (q[Questions.category] or "none")
            if category and category not in named:
                continue
            query = memory.encode(cid, q[Questions.question], q[Questions.question_date] or latest, facts=[],
                                  several=form_of(q[Questions.question], base))
            if benchmark == "locomo":
                gold = normalise_locomo_evidence(q[Questions.evidence], set(ref_of.values()))
                encoded.append((query, lambda ranking, k, g=gold, refs=ref_of: score_locomo(g, [refs[p] for p in ranking], [k], {})[f"recall@{k}"]))
            else:
                encoded.append((query, lambda ranking, k, q=q, refs=ref_of, speaker=speaker_of: score_lme_question(
                    granularity, q, [refs[p] for p in ranking], [speaker[p] for p in ranking], refs.values())[f"recall_all@{k}"]))
        if encoded:
            loaded.append((cid, index, encoded))
    return loaded


def scorer(loaded, base, method: str, k: int):
    def scores(changes):
        rank = rankers(base.replace(**changes), [method])[method]
        return [(cid, score(ids(rank(index, query)), k)) for cid, index, encoded in loaded for query, score in encoded]

    return memoised(scores)


def tune(store: str, benchmark: str, k: int = 10, passes: int = 3, granularity: str = "turn", category: str | None = None,
         groups=tuple(GROUPS), start: dict | None = None, say=print) -> dict:
    """The held-out figures: per method (prior, seem) its folds and its pooled (start, tuned) recall,
    tuning the settings of ``groups`` (GROUPS' names) from the defaults with ``start``'s changes (the
    questions are encoded as the defaults read them); ``say`` prints the lines the command prints."""
    memory = Memory.open(store)  # SEEM_CONFIG and SEEM_* variables choose the defaults
    configured = memory.config.retrieval
    base = configured.replace(**(start or {}))
    started = time.perf_counter()
    loaded = load_questions(memory, benchmark, configured, category, granularity)
    if not loaded:
        raise SystemExit(f"{store}: no question of category {category!r}" if category else f"{store}: no question")
    questions = sum(len(e) for _, _, e in loaded)
    metric = f"recall@{k}" if benchmark == "locomo" else f"{granularity} recall_all@{k}"
    say(f"{benchmark}: {len(loaded)} conversations, {questions} {category + ' ' if category else ''}questions, "
        f"{metric}; settings ({', '.join(groups)}) chosen on the others by coordinate ascent from "
        f"{'the defaults' if not start else 'the defaults with ' + ', '.join(f'{n}={v}' for n, v in start.items())} "
        f"(at most {passes} passes)")
    out = {"conversations": len(loaded), "questions": questions, "methods": {}}
    origin = "start" if start else "defaults"
    for method, grid in grids(groups).items():
        scores = scorer(loaded, base, method, k)
        defaults = {name: getattr(base, name) for name in grid}
        folds = nested(scores, grid, defaults, passes)
        default, tuned = pooled(folds)
        out["methods"][method] = {"default": default, "tuned": tuned, "folds": folds, "evaluated": len(scores.evaluated)}
        if benchmark == "locomo":  # LongMemEval's folds are single questions: their lines say little
            for f in folds:
                chosen = " ".join(f"{n}={v}" for n, v in f.chosen.items()) or f"(the {origin})"
                say(f"  {method:<6} {f.held_out:<12} {origin} {f.default:.3f}  tuned {f.tuned:.3f}  {chosen}")
        moved = {n: Counter(f.chosen[n] for f in folds if n in f.chosen) for n in grid}
        say(f"{method}: held out, {origin} {default:.4f}, tuned on the others {tuned:.4f} ({tuned - default:+.4f}); settings "
            f"evaluated {len(scores.evaluated)}; moved in folds (value x folds of {len(folds)}): "
            + ("; ".join(f"{n} " + ", ".join(f"{v} x{c}" for v, c in values.most_common()) for n, values in moved.items() if values)
               or "none"))
    prior, seem = out["methods"]["prior"], out["methods"]["seem"]
    if start:
        configured_seem = [score for _, score in scorer(loaded, configured, "seem", k)({})]
        out["methods"]["seem"]["configured"] = sum(configured_seem) / len(configured_seem)
        say(f"seem at the configured defaults (chosen on every dev question, the held-out one included): {out['methods']['seem']['configured']:.4f}")
    untuned = "" if grids(groups)["prior"] else " (prior: none of its settings among --groups, kept at the start)"
    say(f"seem - prior on held-out questions: both at the {origin} {seem['default'] - prior['default']:+.4f}; "
        f"each tuned without them {seem['tuned'] - prior['tuned']:+.4f}{untuned}  ({time.perf_counter() - started:.0f} s)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a store `seem eval` built")
    parser.add_argument("--benchmark", choices=["locomo", "longmemeval"], required=True)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--passes", type=int, default=3, help="coordinate-ascent passes at most")
    parser.add_argument("--granularity", choices=["turn", "session"], default="turn", help="LongMemEval's recall_all over turns or sessions")
    parser.add_argument("--category", help="tune and score only these questions, e.g. multi-hop (LoCoMo) or temporal-reasoning")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help=f"the settings tuned, comma-separated: groups ({', '.join(GROUPS)}) or single settings of their grids "
                        "(default: every group)")
    parser.add_argument("--start", default="", help="tune from the defaults with these changes: name=value pairs, "
                        "comma-separated, or \"before\" (the question's time, the latest, advice, sentences and a list "
                        "question's RPE off, as before they were built); ties keep the start")
    args = parser.parse_args()
    memory_config = Memory.open(args.store).config.retrieval
    tune(args.store, args.benchmark, args.k, args.passes, args.granularity, args.category,
         tuple(g for g in args.groups.split(",") if g), start_point(args.start, memory_config))


if __name__ == "__main__":
    main()
