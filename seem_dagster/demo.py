"""The main job on the bundled sample: build it through Dagster and show what the memory holds."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from seem_dagster.schemas import Episodes, Passages, Questions
from seem_dagster.store import snapshot

SAMPLE_CONVERSATION = "sample_conversation.jsonl"
SAMPLE_QUESTIONS = "sample_questions.jsonl"


def run_demo(*, store: str, sample_dir: Path, out: TextIO) -> int:
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.definitions import build_defs
    from seem_dagster.registry import register_file

    conversation = sample_dir / SAMPLE_CONVERSATION
    questions = sample_dir / SAMPLE_QUESTIONS
    if not conversation.exists():
        print(f"seem demo: the bundled sample is missing ({conversation}); run from a clone of the project", file=out)
        return 2
    registered = register_file(store, str(conversation), "jsonl", questions=str(questions))
    outcomes = build_conversations(build_defs(store_root=store), [r.conversation_id for r in registered], progress=True)
    for outcome in outcomes:
        if not outcome.success:
            print(f"seem demo: {outcome.conversation_id} failed: {outcome.error}", file=out)
            return 1
    for reg in registered:
        tables = snapshot.read_snapshot(store, reg.conversation_id, ["passages", "questions", "event_frames", "facts", "episodes"])
        passages, qs, episodes = tables["passages"], tables["questions"], tables["episodes"]
        print(f"\n{reg.conversation_id}: {passages.height} passages in {passages[Passages.session_id].n_unique()} sessions, "
              f"{tables['event_frames'].height} event frames, {tables['facts'].height} facts, {episodes.height} episodes, "
              f"{qs.height} questions; snapshots under {Path(store).resolve()}", file=out)
        by_ref = {r[Passages.source_ref]: r for r in passages.iter_rows(named=True)}
        ref_of = {r[Passages.passage_id]: r[Passages.source_ref] for r in by_ref.values()}
        episode_of = {p: (i, len(ps)) for i, ps in enumerate(episodes[Episodes.passage_ids].to_list()) for p in ps}
        for q in qs.iter_rows(named=True):
            print(f"\nQ {q[Questions.question_id]}: {q[Questions.question]}", file=out)
            for ref in q[Questions.evidence]:
                turn = by_ref[ref]
                index, size = episode_of[turn[Passages.passage_id]]
                mates = [ref_of[p] for p in episodes[Episodes.passage_ids][index].to_list() if ref_of[p] != ref]
                print(f"   gold {ref} [{turn[Passages.timestamp]:%Y-%m-%d}] {turn[Passages.speaker]}: {turn[Passages.text]}", file=out)
                print(f"        in episode {index} with {', '.join(mates) or 'no other turn'}", file=out)
    print(
        "\nNOT YET: retrieval (issue 4) is not built, so the demo shows the gold turns from the stored "
        "passages and the episodes fusion put them in, not evidence retrieved by the memory.",
        file=out,
    )
    return 0
