"""The context an answering model reads (DESIGN step 7), cut to one budget counted in tokens.

SEEM's context has up to four sections: the retrieved turns in time order with their dates, the
frames (summaries) of the episodes that brought turns in, the seed facts with their dates, and the
histories of the properties the top turns state (current value first, superseded ones with their
end; ``retrieval.as_of``). The budget covers the whole rendered text, headers included. Items are
taken in order of importance (the top turn, the seed facts, the property histories, then the other
turns in rank order, each with its episode's frame the first time that episode brings a turn) until
the next one does not fit. A seed fact with no time of its own whose turn is in the context is left
out: its line would restate that turn with the turn's own date, and the tokens go to more turns. A
top turn longer than the whole budget is cut to fit: the budget is never exceeded and the context
is never empty.

A baseline's ranking has no seed facts and no episodes, so the same function gives it its turns
alone, in the same format and within the same budget.

Tokens are counted by ``count_tokens``: words and punctuation marks, a model-independent estimate
of a BPE tokenizer's count for English (about 1.2-1.3 tokens a word), deterministic and free of any
tokenizer download. One function, used by the CLI, the query job, the demo and the evaluation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.search import RetrievalResult, Seed
from seem_dagster.schemas import Episodes, Passages

TOKEN = re.compile(r"\w+|[^\w\s]")
TURNS_HEADER = "## Conversation turns (in time order)"
EVENTS_HEADER = "## Events these turns belong to"
FACTS_HEADER = "## Facts that matched the question"
CUT_MARK = " …"
# Room for the header and one turn's reference, date and speaker with a few words of its text.
MIN_BUDGET_TOKENS = 32


def count_tokens(text: str) -> int:
    return len(TOKEN.findall(text))


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose tokens, with the cut mark, fit in ``budget``."""
    if count_tokens(text) <= budget:
        return text
    keep = max(0, budget - count_tokens(CUT_MARK))
    spans = list(TOKEN.finditer(text))
    return (text[: spans[keep - 1].end()] if keep else "") + CUT_MARK


@dataclass(frozen=True)
class Context:
    text: str
    passage_ids: list[str]  # the turns included, in rank order
    tokens: int
    cut: str | None = None  # the passage id whose text was cut to fit, if any


def turn_line(row: dict, text: str | None = None) -> str:
    return f"[{row[Passages.source_ref]}, {row[Passages.timestamp]:%Y-%m-%d}] {row[Passages.speaker]}: {text or row[Passages.text]}"


def fact_line(seed: Seed, said: dict) -> str:
    when = f"on {seed.time}" if seed.time else f"said {said[Passages.timestamp]:%Y-%m-%d}"
    return f"- ({seed.subject}; {seed.relation}; {seed.object}) {when} [{said[Passages.source_ref]}]"


class _Budget:
    """Sections filled under one token budget; a section's header is paid when its first line is."""

    def __init__(self, budget: int, *extra: str):
        self.left = budget
        self.sections: dict[str, list[tuple[object, str]]] = {h: [] for h in (TURNS_HEADER, EVENTS_HEADER, FACTS_HEADER, *extra)}

    def cost(self, section: str, line: str) -> int:
        # A line costs its tokens; a section's first line also pays for its header.
        return count_tokens(line) + (0 if self.sections[section] else count_tokens(section))

    def take(self, section: str, key, line: str) -> bool:
        cost = self.cost(section, line)
        if cost > self.left:
            return False
        self.left -= cost
        self.sections[section].append((key, line))
        return True

    def render(self, order: dict) -> str:
        parts = []
        for header, lines in self.sections.items():
            if lines:
                body = sorted(lines, key=lambda kl: order.get(kl[0], 0)) if header == TURNS_HEADER else lines
                parts.append("\n".join([header, *(line for _, line in body)]))
        return "\n\n".join(parts)


def _first_turn(budget: _Budget, row: dict, pid: str) -> str | None:
    """Take the top turn, its text cut to what the budget leaves if it is too long; the id when cut."""
    if budget.take(TURNS_HEADER, pid, turn_line(row)):
        return None
    room = budget.left - budget.cost(TURNS_HEADER, turn_line(row, "x")) + 1  # tokens left for the text itself
    if room < 1:
        raise ValueError(f"a context budget of {budget.left} tokens cannot hold one turn with its date and speaker "
                         f"(at least {MIN_BUDGET_TOKENS})")
    budget.take(TURNS_HEADER, pid, turn_line(row, cut_to_tokens(row[Passages.text], room)))
    return pid


def build_context(
    index: MemoryIndex, result: RetrievalResult, budget_tokens: int, *, histories: tuple[str, list[str]] | None = None
) -> Context:
    """SEEM's context for ``result`` within ``budget_tokens`` (module docstring); ``histories`` is a
    section (header, lines) of property histories."""
    if budget_tokens < MIN_BUDGET_TOKENS:
        raise ValueError(f"a context budget must be at least {MIN_BUDGET_TOKENS} tokens, got {budget_tokens}")
    seeds = list(result.seeds)
    while True:
        # Leaving facts out only frees budget, so the turns taken can only grow and a fact left out
        # stays restated by a turn of the final context; at most one pass per seed fact.
        context = _assemble(index, result, seeds, budget_tokens, histories)
        inside = set(context.passage_ids)
        kept = [s for s in seeds if s.time or s.passage_id not in inside]
        if len(kept) == len(seeds):
            return context
        seeds = kept


def _assemble(
    index: MemoryIndex, result: RetrievalResult, seeds: list[Seed], budget_tokens: int, histories: tuple[str, list[str]] | None
) -> Context:
    rows, budget = index.rows, _Budget(budget_tokens, *([histories[0]] if histories else []))
    ranked = [r.passage_id for r in result.ranked]
    chosen: list[str] = []
    cut = None
    if ranked:
        cut = _first_turn(budget, rows[ranked[0]], ranked[0])
        chosen.append(ranked[0])
    full = False
    for seed in seeds:
        if not budget.take(FACTS_HEADER, seed.fact_id, fact_line(seed, rows[seed.passage_id])):
            full = True
            break
    for k, line in enumerate(histories[1] if histories and not full else []):
        if not budget.take(histories[0], k, line):
            full = True
            break
    used = set(result.episodes)
    framed: set[int] = set()
    for pid in ranked[1:] if not full else []:
        ep = index.episode_of.get(pid)
        frame = ep if ep in used and ep not in framed else None
        line = turn_line(rows[pid])
        need = budget.cost(TURNS_HEADER, line) + (budget.cost(EVENTS_HEADER, _frame_line(index, frame)) if frame is not None else 0)
        if need > budget.left:
            break
        budget.take(TURNS_HEADER, pid, line)
        chosen.append(pid)
        if frame is not None:
            budget.take(EVENTS_HEADER, frame, _frame_line(index, frame))
            framed.add(frame)
    if chosen and cut is None and (ep := index.episode_of.get(chosen[0])) in used and ep not in framed:
        budget.take(EVENTS_HEADER, ep, _frame_line(index, ep))  # the top turn's own episode, if room is left
    text = budget.render(index.position)
    return Context(text, chosen, count_tokens(text), cut)


def _frame_line(index: MemoryIndex, episode: int) -> str:
    return f"- {index.episodes[Episodes.summary][episode]}"

