"""The main job on the bundled sample: build it through Dagster and show what the memory holds."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from seem_dagster.schemas import Passages, Questions
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
        tables = snapshot.read_snapshot(store, reg.conversation_id, ["passages", "questions"])
        passages, qs = tables["passages"], tables["questions"]
        print(f"\n{reg.conversation_id}: {passages.height} passages in {passages[Passages.session_id].n_unique()} sessions, "
              f"{qs.height} questions; snapshots under {Path(store).resolve()}", file=out)
        by_ref = {r[Passages.source_ref]: r for r in passages.iter_rows(named=True)}
        for q in qs.iter_rows(named=True):
            print(f"\nQ {q[Questions.question_id]}: {q[Questions.question]}", file=out)
            for ref in q[Questions.evidence]:
                turn = by_ref[ref]
                print(f"   gold {ref} [{turn[Passages.timestamp]:%Y-%m-%d}] {turn[Passages.speaker]}: {turn[Passages.text]}", file=out)
    print(
        "\nNOT YET: retrieval (issue 4) is not built, so the demo shows the gold turns from the stored "
        "passages, not evidence retrieved by the memory.",
        file=out,
    )
    return 0
