"""The context an answering model reads: passages in time order with dates, episodes, seed facts."""

from __future__ import annotations

from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.search import RetrievalResult
from seem_dagster.schemas import Episodes, Passages


def words(text: str) -> int:
    return len(text.split())


def select_within_budget(index: MemoryIndex, result: RetrievalResult, budget_words: int) -> list[str]:
    """Passage ids in rank order until the budget (in words of passage text) is spent."""
    text_of = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.text].to_list()))
    chosen, spent = [], 0
    for item in result.ranked:
        cost = words(text_of[item.passage_id]) + 3
        if chosen and spent + cost > budget_words:
            break
        chosen.append(item.passage_id)
        spent += cost
    return chosen


def render(index: MemoryIndex, result: RetrievalResult, passage_ids: list[str]) -> str:
    rows = {r[Passages.passage_id]: r for r in index.passages.iter_rows(named=True)}
    lines = ["## Conversation turns (in time order)"]
    for pid in sorted(passage_ids, key=index.position.get):
        r = rows[pid]
        lines.append(f"[{r[Passages.source_ref]}, {r[Passages.timestamp]:%Y-%m-%d}] {r[Passages.speaker]}: {r[Passages.text]}")
    if result.episodes:
        lines.append("\n## Events these turns belong to")
        for ep in result.episodes:
            lines.append(f"- {index.episodes[Episodes.summary][ep]}")
    if result.seeds:
        lines.append("\n## Facts that matched the question")
        for s in result.seeds:
            lines.append(f"- ({s.subject}; {s.relation}; {s.object}" + (f"; {s.time})" if s.time else ")"))
    return "\n".join(lines)
