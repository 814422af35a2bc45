"""Why a passage is in a ranking: a small typed record, rendered to text only where a person reads it.

Code that needs to know how a passage got there (the context keeps only the episodes that brought a
turn; an API caller filters expansions) reads ``kind`` and the fields, never the text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

# The kinds, in the order a ranking explains itself.
SEED_FACT = "seed_fact"  # one of the walk's seed facts came from this passage
PAGERANK = "pagerank"  # the walk reached it
DIRECT = "direct"  # ranked by its direct match (no usable fact, or the walk is off)
EPISODE = "episode"  # RPE: a turn of its anchor's episode
NEIGHBOUR = "neighbour"  # RPE: a same-session neighbour of its anchor
NAME_LINK = "name_link"  # RPE: names a rare proper name its anchor names
ANSWERS_NAME_LINK = "answers_name_link"  # RPE: the reply to a name-linked question
ANSWERS_TOP = "answers_top"  # RPE: the reply to a question among the top passages
BASELINE = "baseline"  # a flat baseline's ranking (dense, bm25, hybrid, ...): ``method`` says which
PROPERTY_ROUTE = "property_route"  # brought by the property route alone

EXPANSIONS = (EPISODE, NEIGHBOUR, NAME_LINK, ANSWERS_NAME_LINK, ANSWERS_TOP)


# Not frozen, though nothing changes one once made: a frozen dataclass sets every field through
# object.__setattr__, and a query makes a Reason and a Ranked for every passage of the conversation
# (about 3 us each frozen against 0.7 us, a millisecond of a 15 ms query). Nothing hashes them either.
@dataclass(slots=True)
class Reason:
    kind: str
    pagerank: float | None = None  # the walk's mass (seed_fact, pagerank)
    match: float | None = None  # the passage's direct match (direct)
    fact: tuple[str, str, str] | None = None  # (subject, relation, object) of the seed fact
    fact_score: float | None = None
    no_usable_fact: bool = False  # direct: the walk was on but no fact matched well enough
    anchor: str | None = None  # RPE: the source ref of the passage that brought this one
    episode: str | None = None  # RPE: the episode id
    name: str | None = None  # RPE: the rare proper name shared with the anchor
    question: str | None = None  # RPE: the source ref of the question this turn answers
    method: str | None = None  # baseline: the method's name
    reranked_from: int | None = None  # the learned reranking moved it from this rank (1-based)
    event: str | None = None  # brought by the ranking of this one event of a question about several (split_events)

    @property
    def expanded(self) -> bool:
        """Whether RPE brought it (after an anchor) rather than the ranking itself."""
        return self.kind in EXPANSIONS

    def reranked(self, rank: int) -> Reason:
        return replace(self, reranked_from=rank)

    def to_json(self) -> dict:
        """The fields that are set, for JSON output (``kind`` always)."""
        out = {k: v for k, v in asdict(self).items() if v is not None and v is not False}
        if self.fact is not None:
            out["fact"] = list(self.fact)
        return out

    def __str__(self) -> str:
        text = self._text()
        if self.reranked_from is not None:
            text += f"; reranked from {self.reranked_from}"
        return text + (f"; for the event {self.event!r}" if self.event else "")

    def _text(self) -> str:
        k = self.kind
        if k == SEED_FACT:
            s, r, o = self.fact
            return f"seed fact ({s}; {r}; {o}) score {self.fact_score:.2f}; pagerank {self.pagerank:.4f}"
        if k == PAGERANK:
            return f"pagerank {self.pagerank:.4f}"
        if k == DIRECT:
            return f"direct match {self.match:.3f}" + (" (no usable fact)" if self.no_usable_fact else "")
        if k == EPISODE:
            return f"episode {self.episode} expanded from anchor {self.anchor}"
        if k == NAME_LINK:
            return f"names {self.name}, as anchor {self.anchor} does"
        if k == ANSWERS_NAME_LINK:
            return f"answers {self.question}, which names {self.name} as anchor {self.anchor} does"
        if k == NEIGHBOUR:
            return f"same-session neighbour of anchor {self.anchor}"
        if k == ANSWERS_TOP:
            return f"answers {self.question}, a question among the top passages"
        if k == BASELINE:
            return self.method or "baseline"
        if k == PROPERTY_ROUTE:
            return "property route"
        return k


def baseline(method: str) -> Reason:
    return Reason(BASELINE, method=method)
