"""Retrieval as DESIGN.md step 5-6: fact seeds, personalized PageRank, dense fallback, RPE.

Pure: the query arrives as vectors (the question and its extracted quadruples); the memory as a
MemoryIndex. Every returned passage carries the reason it is there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seem_dagster.config import RetrievalConfig
from seem_dagster.graph.entities import entity_id, normalise
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.schemas import Episodes, Facts, Passages

# PageRank masses closer than this are one value: prpack's run-to-run noise is about 1e-14.
PAGERANK_TIE = 1e-12


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
    return inherit_replies(prior, index.answers_to, config.answer_share)


def inherit_replies(scores: np.ndarray, answers_to: np.ndarray, share: float) -> np.ndarray:
    """Each reply (``answers_to`` >= 0: the row of the question it answers) gains ``share`` of its
    question's score: the question often repeats the words asked later, its answer holds the fact."""
    if not share:
        return scores
    out = scores.astype(np.float64, copy=True)
    replies = answers_to >= 0
    out[replies] += share * scores[answers_to[replies]]
    return out


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
        order = rank_by_mass(pr, prior)
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
        note = " (no usable fact)" if config.use_graph else ""
        ranked = [Ranked(ids[i], float(prior[i]), f"direct match {prior[i]:.3f}{note}") for i in order]
        mode = "dense"
    if not config.use_rpe:
        return RetrievalResult(ranked, seeds, mode, [])
    expanded, used = expand(index, ranked, config)
    return RetrievalResult(expanded, seeds, mode, used)


def rank_by_mass(mass: np.ndarray, prior: np.ndarray, tie: float = PAGERANK_TIE) -> np.ndarray:
    """Rows by PageRank mass, best first; masses within ``tie`` of the next one are a tie, ordered by
    the prior. prpack's masses differ by ~1e-14 between identical calls, so passages the walk reaches
    equally (unreachable turns, symmetric ones) would otherwise be ordered by that noise."""
    by_mass = np.argsort(-mass, kind="stable")
    group = np.empty(len(mass), dtype=np.int64)
    group[by_mass] = np.concatenate([[0], np.cumsum(-np.diff(mass[by_mass]) > tie)])
    return np.lexsort((-prior, group))


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
