"""The main job on the bundled sample: build it through Dagster and show what the memory holds."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from seem_dagster.config import Resolved
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store import snapshot

SAMPLE_CONVERSATION = "sample_conversation.jsonl"
SAMPLE_QUESTIONS = "sample_questions.jsonl"
DEMO_K = 10
# The property memory, shown on what changed over the sample: one SQL query and one as-of answer.
DEMO_SQL = ("SELECT entity, property, value, valid_from::DATE AS valid_from, valid_to::DATE AS valid_to, said_at::DATE AS said_at "
            "FROM properties WHERE property IN ('lives_in', 'works_at') ORDER BY entity, property, valid_from")
DEMO_AS_OF = ("2024-04-14", "Where does Tomas live?")


def run_demo(resolved: Resolved, *, sample_dir: Path, out: TextIO) -> int:
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.registry import register_file

    config = resolved.config
    store = config.store.root

    conversation = sample_dir / SAMPLE_CONVERSATION
    questions = sample_dir / SAMPLE_QUESTIONS
    if not conversation.exists():
        print(f"seem demo: the bundled sample is missing ({conversation}); run from a clone of the project", file=out)
        return 2
    registered = register_file(store, str(conversation), "jsonl", config.ingest, questions=str(questions))
    outcomes = build_conversations(build_defs(resolved), [r.conversation_id for r in registered], progress=True, config=resolved)
    for outcome in outcomes:
        if not outcome.success:
            print(f"seem demo: {outcome.conversation_id} failed: {outcome.error}", file=out)
            return 1
    from seem_dagster import backends
    from seem_dagster.retrieval.answer import ask
    from seem_dagster.retrieval.load import load_index

    extractor, embedder = backends.extractor(config.extraction.extractor), backends.embedder(config.extraction.embedder)
    found_all = total = gold_turns = gold_found = 0
    for reg in registered:
        tables = snapshot.read_snapshot(store, reg.conversation_id, ["passages", "questions", "event_frames", "facts", "episodes"])
        passages, qs, episodes = tables["passages"], tables["questions"], tables["episodes"]
        print(f"\n{reg.conversation_id}: {passages.height} passages in {passages[Passages.session_id].n_unique()} sessions, "
              f"{tables['event_frames'].height} event frames, {tables['facts'].height} facts, {episodes.height} episodes, "
              f"{qs.height} questions; snapshots under {Path(store).resolve()}", file=out)
        index = load_index(store, reg.conversation_id)
        rows = {r[Passages.passage_id]: r for r in passages.iter_rows(named=True)}
        for q in qs.iter_rows(named=True):
            answered = ask(index, q[Questions.question], q[Questions.question_date], extractor, embedder, config.retrieval,
                           budget_tokens=config.query.budget_tokens)
            top = answered.result.ranked[:DEMO_K]
            rank = {rows[i.passage_id][Passages.source_ref]: n for n, i in enumerate(answered.result.ranked, 1)}
            gold = q[Questions.evidence]
            hit = [g for g in gold if rank.get(g, DEMO_K + 1) <= DEMO_K]
            total += 1
            found_all += len(hit) == len(gold)
            gold_turns += len(gold)
            gold_found += len(hit)
            print(f"\nQ {q[Questions.question_id]}: {q[Questions.question]}", file=out)
            print(f"   gold {', '.join(gold)}: {len(hit)}/{len(gold)} in the top {DEMO_K} evidence turns", file=out)
            missed = [f"{g} at rank {rank[g]}" if g in rank else f"{g} not ranked" for g in gold if g not in hit]
            if missed:
                print(f"   missed: {', '.join(missed)}", file=out)
            for item in top:
                r = rows[item.passage_id]
                mark = "*" if r[Passages.source_ref] in gold else " "
                print(f" {mark} [{r[Passages.source_ref]}] {r[Passages.timestamp]:%Y-%m-%d} {r[Passages.speaker]}: {r[Passages.text][:90]}", file=out)
                print(f"        why: {item.reason}", file=out)
    print(f"\nAll gold turns found for {found_all} of {total} questions; {gold_found} of {gold_turns} gold turns "
          f"in the top {DEMO_K} (* marks a gold turn).", file=out)
    for reg in registered:
        _show_properties(resolved, reg.conversation_id, out)
    return 0


def _show_properties(resolved: Resolved, conversation_id: str, out: TextIO) -> None:
    """What changed, through SQL, and one question answered from the memory as it stood on a date."""
    from seem_dagster import backends
    from seem_dagster.retrieval.answer import ask
    from seem_dagster.retrieval.as_of import parse_as_of
    from seem_dagster.retrieval.load import load_index
    from seem_dagster.sql.memory import SqlMemory
    from seem_dagster.sql.output import render

    config = resolved.config
    store = config.store.root
    print(f"\nSQL over the memory: seem sql --store {store} \"{DEMO_SQL}\"", file=out)
    with SqlMemory.open(store, conversation_id, config.sql) as memory:
        print(render(memory.query(DEMO_SQL), "table", config.sql.max_rows), file=out)
    day, question = DEMO_AS_OF
    index = load_index(store, conversation_id)
    extractor, embedder = backends.extractor(config.extraction.extractor), backends.embedder(config.extraction.embedder)
    rows = {r[Passages.passage_id]: r for r in index.passages.iter_rows(named=True)}
    for as_of in (parse_as_of(day), None):
        answered = ask(index, question, None, extractor, embedder, config.retrieval, budget_tokens=config.query.budget_tokens,
                       as_of=as_of, property_lines=config.properties.context_lines)
        flag = f" --as-of {day}" if as_of else ""
        print(f"\nseem query --conversation {conversation_id}{flag} \"{question}\"  (asked {answered.date:%Y-%m-%d})", file=out)
        top = rows[answered.result.ranked[0].passage_id]
        print(f"   top turn: [{top[Passages.source_ref]}] {top[Passages.timestamp]:%Y-%m-%d} {top[Passages.speaker]}: {top[Passages.text][:90]}",
              file=out)
        histories = [line for line in answered.context.text.splitlines() if line.startswith("- Tomas lives_in")]
        print(f"   in the context: {histories[0][2:] if histories else '(no property history)'}", file=out)
