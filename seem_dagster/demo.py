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
    from seem_dagster.memory import Memory
    from seem_dagster.memory.api import MAX_K
    from seem_dagster.memory.writes import BuildsFailed

    config = resolved.config
    store = config.store.root

    conversation = sample_dir / SAMPLE_CONVERSATION
    questions = sample_dir / SAMPLE_QUESTIONS
    if not conversation.exists():
        print(f"seem demo: the bundled sample is missing ({conversation}); run from a clone of the project", file=out)
        return 2
    with Memory(resolved) as memory:
        try:
            added = memory.add_file(conversation, "jsonl", questions=questions, progress=True)
        except BuildsFailed as err:
            print(f"seem demo: {err}", file=out)
            return 1
        found_all = total = gold_turns = gold_found = 0
        for result in added:
            cid = result.conversation_id
            tables = snapshot.read_snapshot(store, cid, ["passages", "questions", "event_frames", "facts", "episodes"])
            passages, qs, episodes = tables["passages"], tables["questions"], tables["episodes"]
            print(f"\n{cid}: {passages.height} passages in {passages[Passages.session_id].n_unique()} sessions, "
                  f"{tables['event_frames'].height} event frames, {tables['facts'].height} facts, {episodes.height} episodes, "
                  f"{qs.height} questions; snapshots under {Path(store).resolve()}", file=out)
            for q in qs.iter_rows(named=True):
                hits = memory.search(cid, q[Questions.question], k=MAX_K, date=q[Questions.question_date])
                rank = {h.source_ref: h.rank for h in hits}
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
                for h in hits[:DEMO_K]:
                    mark = "*" if h.source_ref in gold else " "
                    print(f" {mark} [{h.source_ref}] {h.timestamp:%Y-%m-%d} {h.speaker}: {h.text[:90]}", file=out)
                    print(f"        why: {h.reason}", file=out)
        print(f"\nAll gold turns found for {found_all} of {total} questions; {gold_found} of {gold_turns} gold turns "
              f"in the top {DEMO_K} (* marks a gold turn).", file=out)
        for result in added:
            _show_properties(memory, result.conversation_id, out)
    return 0


def _show_properties(memory, conversation_id: str, out: TextIO) -> None:
    """What changed, through SQL, and one question answered from the memory as it stood on a date."""
    from seem_dagster.sql.output import render

    config = memory.config
    print(f"\nSQL over the memory: seem sql --store {memory.store} \"{DEMO_SQL}\"", file=out)
    print(render(memory.sql(DEMO_SQL, conversation_id), "table", config.sql.max_rows), file=out)
    day, question = DEMO_AS_OF
    for as_of in (day, None):
        recall = memory.query(conversation_id, question, as_of=as_of, answer=False)
        flag = f" --as-of {day}" if as_of else ""
        print(f"\nseem query --conversation {conversation_id}{flag} \"{question}\"  (asked {recall.date:%Y-%m-%d})", file=out)
        top = recall.hits[0]
        print(f"   top turn: [{top.source_ref}] {top.timestamp:%Y-%m-%d} {top.speaker}: {top.text[:90]}", file=out)
        histories = [line for line in recall.context.text.splitlines() if line.startswith("- Tomas lives_in")]
        print(f"   in the context: {histories[0][2:] if histories else '(no property history)'}", file=out)
