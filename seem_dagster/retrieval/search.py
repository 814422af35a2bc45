"""Retrieval as DESIGN.md step 5-6: fact seeds, personalized PageRank, dense fallback, RPE.

Pure: the query arrives as vectors (the question and its extracted quadruples); the memory as a
MemoryIndex. Every returned passage carries the reason it is there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seem_dagster.graph.entities import entity_id, normalise
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.schemas import Episodes, Facts, Passages


RPE_SCOPES = ("episode", "session", "both")


@dataclass(frozen=True)
class RetrievalConfig:
    # Measured with `seem eval` (LoCoMo dev: 7 conversations, 1,347 questions; LongMemEval dev).
    # DESIGN's start (share 0.05, RPE of 10 turns from the top 5) gave conv-26 recall@10 0.20
    # against 0.44 for dense. LoCoMo R@10 / R@25: dense-only prior 0.490 / 0.632 (hybrid BM25+dense
    # 0.572 / 0.700); BM25 added to the prior (weight 0.5) 0.640 / 0.741; RPE to the nearest turns
    # of the anchor's episode or session 0.692 / 0.782, but on LongMemEval's user-turn corpus that
    # pulled the user's next messages in (turn recall_all@5 0.667 against 0.795 without RPE);
    # counting only turns adjacent in the original conversation: LoCoMo 0.682 / 0.777, LME 0.795.
    # DESIGN's starting values, kept after a sweep on LoCoMo dev (R@5 / R@10 / R@25; defaults
    # 0.603 / 0.731 / 0.818): top facts 3 0.603 / 0.727 / 0.817, 6 0.603 / 0.732 / 0.819, 8
    # 0.605 / 0.732 / 0.818, 10 0.607 / 0.730 / 0.817 (a 0.002 move is about 3 questions' worth);
    # damping 0.3 0.602 / 0.722 / 0.812, 0.7 0.554 / 0.685 / 0.787; min fact score 0.2 or 0.4
    # changes none of the three figures.
    top_facts: int = 5
    min_fact_score: float = 0.3
    damping: float = 0.5  # igraph: probability of continuing the walk
    passage_share: float = 2.0
    # With answer_share the reply is often already ranked: RPE from the top 2 then cost R@5 (0.562
    # against 0.636 without RPE); from the top 1: R@5 / R@10 / R@25 0.601 / 0.717 / 0.809. With
    # rpe_follow_reply (extractor v4): top 1 0.600 / 0.731 / 0.818, top 2 0.591 / 0.716 / 0.821.
    top_passages_rpe: int = 1
    rpe_max_per_episode: int = 2
    use_graph: bool = True
    use_rpe: bool = True
    lexical_weight: float = 0.5  # BM25 (scaled to the best passage's score) added to the dense prior
    # What RPE draws from: the anchor's fused episode, its own session's turns, or both; nearest first.
    rpe_scope: str = "both"
    # Session turns count as the anchor's neighbours within this many turns of the original
    # conversation: a corpus of one speaker's turns (LongMemEval's user turns) has no neighbours at 1.
    rpe_turn_window: int = 1
    # A reply to a question (the next turn, by the other speaker) inherits this share of the
    # question's direct match: "Did you see someone about it?" finds "Yes, a physiotherapist called
    # Dr. Osei". LoCoMo dev R@10 / R@25 0.682 / 0.777 without; 0.701 / 0.802 at 0.25, 0.702 / 0.810
    # at 0.35, 0.692 / 0.805 at 0.5, 0.626 / 0.747 at 1.0. No effect on a one-speaker corpus.
    answer_share: float = 0.35
    # RPE also brings the reply to an expanded turn that asks a question (an anchor "I twisted my
    # ankle", its neighbour "Did you see someone about it?", then "Yes, Dr. Osei"). LoCoMo dev
    # R@5 / R@10 / R@25 0.601 / 0.717 / 0.809 without, 0.604 / 0.731 / 0.818 with.
    rpe_follow_reply: bool = True
    # RPE also brings the turns that share a rare proper name with the anchor (one that at most
    # rpe_name_turns turns name; not a speaker's), nearest first, at most rpe_name_links of them:
    # "my neighbour Ines offered to look after him" brings "Did Biscuit behave with Ines?" two months
    # later, a storyline the embedded fusion judge misses (the summaries are not alike). 0 turns: off.
    # LoCoMo dev names few third parties (it fires for 24 of 1,347 questions): R@5 / R@10 / R@25
    # 0.600 / 0.731 / 0.818 without, 0.601 / 0.733 / 0.819 with 3 turns and 2 links (2 turns and 1
    # link: 0.6005 / 0.7321 / 0.8184).
    rpe_name_turns: int = 3
    rpe_name_links: int = 2

    def __post_init__(self):
        if self.rpe_scope not in RPE_SCOPES:
            raise ValueError(f"rpe_scope {self.rpe_scope!r}: choose from {', '.join(RPE_SCOPES)}")


@dataclass(frozen=True)
class Seed:
    fact_id: str
    subject: str
    relation: str
    object: str
    time: str | None
    passage_id: str
    score: float


@dataclass(frozen=True)
class Ranked:
    passage_id: str
    score: float
    reason: str


@dataclass
class RetrievalResult:
    ranked: list[Ranked]
    seeds: list[Seed]
    mode: str  # "graph" or "dense"
    episodes: list[int]  # indexes of episodes the expansion used


def score_facts(index: MemoryIndex, question: np.ndarray, query_facts: np.ndarray) -> np.ndarray:
    if index.fact_vectors.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    scores = index.fact_vectors @ question
    if query_facts.shape[0]:
        scores = np.maximum(scores, (index.fact_vectors @ query_facts.T).max(axis=1))
    return scores


def seeds_from(index: MemoryIndex, scores: np.ndarray, config: RetrievalConfig) -> list[Seed]:
    order = np.argsort(-scores, kind="stable")[: config.top_facts]
    seeds = []
    for i in order:
        if scores[i] < config.min_fact_score:
            break
        row = index.facts.row(int(i), named=True)
        seeds.append(Seed(row[Facts.fact_id], row[Facts.subject], row[Facts.relation], row[Facts.object],
                          row[Facts.time], row[Facts.passage_id], float(scores[i])))
    return seeds


def reset_vector(index: MemoryIndex, seeds: list[Seed], dense: np.ndarray, config: RetrievalConfig) -> np.ndarray:
    """Seed entities get fact score / passages they appear in; every passage a share of its dense score."""
    reset = np.zeros(index.graph.graph.vcount(), dtype=np.float64)
    cid = index.passages[Passages.conversation_id][0] if index.passages.height else ""
    for seed in seeds:
        for name in (seed.subject, seed.object):
            eid = entity_id(cid, normalise(name))
            if eid in index.graph.index:
                reset[index.graph.index[eid]] += seed.score / max(1, index.entity_passages.get(eid, 1))
    reset[: len(dense)] += config.passage_share * dense
    return reset


def passage_prior(index: MemoryIndex, question_vector: np.ndarray, question: str | None, config: RetrievalConfig) -> np.ndarray:
    """Each passage's direct match with the question: dense cosine, plus scaled BM25 when configured,
    plus a share of the match of the question turn a passage replies to."""
    if not index.passage_vectors.shape[0]:
        return np.zeros(0)
    prior = np.clip(index.passage_vectors @ question_vector, 0, None).astype(np.float64)
    if config.lexical_weight and question:
        lexical = index.lexical.scores(question).astype(np.float64)
        top = lexical.max()
        if top > 0:
            prior += config.lexical_weight * lexical / top
    if config.answer_share:
        asked = index.answers_to
        replies = asked >= 0
        prior[replies] += config.answer_share * prior[asked[replies]]
    return prior


def retrieve(
    index: MemoryIndex, question: np.ndarray, query_facts: np.ndarray, config: RetrievalConfig, *, question_text: str | None = None
) -> RetrievalResult:
    prior = passage_prior(index, question, question_text, config)
    seeds = seeds_from(index, score_facts(index, question, query_facts), config) if config.use_graph else []
    ids = index.graph.passage_ids
    if seeds:
        reset = reset_vector(index, seeds, prior, config)
        pr = np.array(
            index.graph.graph.personalized_pagerank(
                directed=False, damping=config.damping, reset=reset.tolist(), weights="weight", implementation="prpack"
            )
        )[: len(ids)]
        order = np.lexsort((-prior, -pr))
        seed_source = {s.passage_id: s for s in seeds}
        ranked = []
        for i in order:
            pid = ids[i]
            if pid in seed_source:
                s = seed_source[pid]
                reason = f"seed fact ({s.subject}; {s.relation}; {s.object}) score {s.score:.2f}; pagerank {pr[i]:.4f}"
            else:
                reason = f"pagerank {pr[i]:.4f}"
            ranked.append(Ranked(pid, float(pr[i]), reason))
        mode = "graph"
    else:
        order = np.argsort(-prior, kind="stable")
        ranked = [Ranked(ids[i], float(prior[i]), f"direct match {prior[i]:.3f} (no usable fact)" if config.use_graph else f"direct match {prior[i]:.3f}") for i in order]
        mode = "dense"
    if not config.use_rpe:
        return RetrievalResult(ranked, seeds, mode, [])
    expanded, used = expand(index, ranked, config)
    return RetrievalResult(expanded, seeds, mode, used)


def expand(index: MemoryIndex, ranked: list[Ranked], config: RetrievalConfig) -> tuple[list[Ranked], list[int]]:
    """Reverse Provenance Expansion: each top passage brings, right after it, the nearest turns of its
    episode or session, the turns that share a rare proper name with it, and the replies to those
    that ask something (RetrievalConfig says how many of each)."""
    out: list[Ranked] = []
    seen: set[str] = set()
    used: list[int] = []
    refs = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.source_ref].to_list()))
    for rank, item in enumerate(ranked):
        if item.passage_id in seen:
            continue
        out.append(item)
        seen.add(item.passage_id)
        if rank >= config.top_passages_rpe:
            continue
        ep = index.episode_of.get(item.passage_id) if config.rpe_scope in ("episode", "both") else None
        members = index.episodes[Episodes.passage_ids][ep].to_list() if ep is not None else []
        if config.rpe_scope in ("session", "both"):
            turn = index.turn_index[item.passage_id]
            members = members + [p for p in index.session_members.get(item.passage_id, [])
                                 if abs(index.turn_index[p] - turn) <= config.rpe_turn_window]
        members = [p for p in dict.fromkeys(members) if p not in seen]
        anchor = index.position[item.passage_id]
        nearest = sorted(members, key=lambda p: (abs(index.position[p] - anchor), index.position[p]))[: config.rpe_max_per_episode]
        named = _name_linked(index, item.passage_id, seen | set(nearest), config)
        chosen = nearest + list(named)
        replies = _replies_to(index, chosen, seen | set(chosen) | {item.passage_id}) if config.rpe_follow_reply else {}
        chosen += list(replies)
        episode_members = set(index.episodes[Episodes.passage_ids][ep].to_list()) if ep is not None else set()
        if episode_members & set(chosen):
            used.append(ep)  # only an episode that brought a turn is one the context describes
        anchor_ref = refs[item.passage_id]
        for p in sorted(chosen, key=index.position.get):
            if p in episode_members:
                why = f"episode {index.episodes[Episodes.episode_id][ep]} expanded from anchor {anchor_ref}"
            elif p in named:
                why = f"names {named[p]}, as anchor {anchor_ref} does"
            elif p in replies and replies[p] in named:
                why = f"answers {refs[replies[p]]}, which names {named[replies[p]]} as anchor {anchor_ref} does"
            else:
                why = f"same-session neighbour of anchor {anchor_ref}"
            out.append(Ranked(p, item.score, why))
            seen.add(p)
    return out, used


def _name_linked(index: MemoryIndex, anchor: str, taken: set[str], config: RetrievalConfig) -> dict[str, str]:
    """The turns sharing a rare proper name with the anchor, nearest first: {passage id: name}."""
    if not config.rpe_name_turns or not config.rpe_name_links:
        return {}
    linked = index.name_links(config.rpe_name_turns).get(anchor, {})
    at = index.position[anchor]
    nearest = sorted((p for p in linked if p not in taken), key=lambda p: (abs(index.position[p] - at), index.position[p]))
    return {p: linked[p] for p in nearest[: config.rpe_name_links]}


def _replies_to(index: MemoryIndex, chosen: list[str], taken: set[str]) -> dict[str, str]:
    """The reply to each chosen turn that asks something ("Did you see someone about it?" brings its
    answer): {reply's passage id: the question's}."""
    asked, ids = index.answers_to, index.graph.passage_ids
    out = {}
    for p in chosen:
        row = index.position[p] + 1
        if row < len(asked) and asked[row] == row - 1 and ids[row] not in taken:
            out[ids[row]] = p
            taken.add(ids[row])
    return out
