"""Retrieval as DESIGN.md step 5-6: fact seeds, personalized PageRank, dense fallback, RPE.

Pure: the query arrives as vectors (the question's, its form without the speakers' names, its
extracted quadruples'); the memory as a MemoryIndex. Every returned passage carries its reason.

Each passage starts from a prior: its direct match with the question (dense, also of the question
without the speakers' names, + BM25, a reply sharing its question's match) plus, with
``fact_key_weight``, the score of its best fact: facts are retrieval keys that point back to their
passage, so a turn whose words miss the question ("I'm off to go swimming with the kids") is still
found through its fact (Melanie; go swim with; kids). The walk starts from that prior and the seed
facts' entities and brings in turns that share entities with them. RPE then expands the top
passages into the turns around them (their episode, session neighbours, replies, rare-name links),
keeps only expansions the walk itself ranks within ``rpe_within`` and places them after the first
``rpe_after`` passages: the best matches stay on top and the context of the best one follows them.
With ``rerank`` (off by default), a fitted model then reorders the top ``rerank_depth`` passages
from what the query computed on the way (retrieval/rerank.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from seem_dagster.config import RetrievalConfig
from seem_dagster.graph.entities import entity_id, normalise
from seem_dagster.retrieval import reasons
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.retrieval.query import named_speakers
from seem_dagster.retrieval.question_time import Window
from seem_dagster.retrieval.reasons import Reason
from seem_dagster.retrieval.rerank import FACT_FEATURES, PRIOR_BASE, WALK_BASE, RerankModel, Signals, bundled_model, feature_matrix, reorder
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


@dataclass(slots=True)  # not frozen: one per passage per query (reasons.Reason says why)
class Ranked:
    passage_id: str
    score: float
    reason: Reason


@dataclass
class RetrievalResult:
    ranked: list[Ranked]
    seeds: list[Seed]
    mode: str  # "graph" or "dense"
    episodes: list[int]  # indexes of episodes the expansion used
    signals: Signals | None = None  # what the query computed per passage (the reranker's inputs); None for a baseline


def score_facts(index: MemoryIndex, question: np.ndarray, query_facts: np.ndarray, unnamed: np.ndarray | None = None,
                unnamed_weight: float = 0.0) -> np.ndarray:
    """Each fact's match: its cosine with the question, or with ``unnamed`` (the question without the
    speakers' names) the weighted mean of both; the best of that and its match with the question's own
    facts."""
    if index.fact_vectors.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    scores = index.fact_vectors @ question
    if unnamed is not None and unnamed_weight:
        scores = (scores + unnamed_weight * (index.fact_vectors @ unnamed)) / (1 + unnamed_weight)
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


def passage_prior(
    index: MemoryIndex, question_vector: np.ndarray, question: str | None, config: RetrievalConfig, unnamed: np.ndarray | None = None,
    *, advice: bool = False,
) -> np.ndarray:
    """Each passage's direct match with the question: dense cosine, plus ``unnamed_weight`` times the
    cosine of the question without the speakers' names (``unnamed``, when it named one), plus scaled
    BM25 when configured, plus a share of the match of the question turn a passage replies to, plus
    ``sentence_weight`` times what its best sentence matches beyond the whole passage."""
    if not index.passage_vectors.shape[0]:
        return np.zeros(0)
    own = _dense_match(index.passage_vectors, question_vector, unnamed, config)
    prior = own.copy()
    weight = config.lexical_weight * (config.advice_lexical if advice else 1.0)
    if weight and question:
        lexical = index.lexical(config.lexical_stems).scores(question).astype(np.float64)
        top = lexical.max()
        if top > 0:
            prior += weight * lexical / top
    prior = inherit_replies(prior, index.answers_to, config.answer_share)
    if config.sentence_weight and index.sentence_rows.shape[0]:
        best = np.zeros(len(own))
        np.maximum.at(best, index.sentence_rows, _dense_match(index.sentence_vectors, question_vector, unnamed, config, threads=False))
        prior += config.sentence_weight * np.clip(best - own, 0, None)
    return prior


def _dense_match(vectors: np.ndarray, question: np.ndarray, unnamed: np.ndarray | None, config: RetrievalConfig,
                 threads: bool = True) -> np.ndarray:
    """Each vector's cosine with the question (negative as 0), plus ``unnamed_weight`` times its cosine
    with the question without the speakers' names. ``threads=False``: by einsum, not BLAS, for a matrix
    past the size where OpenBLAS splits a product over threads: waking them beside the question
    encoder's threads stalls a query on a small machine far longer than einsum's single pass takes
    (docs/experiments.md has the figures)."""
    def dot(q):
        return vectors @ q if threads else np.einsum("ij,j->i", vectors, q)

    match = np.clip(dot(question), 0, None).astype(np.float64)
    if config.unnamed_weight and unnamed is not None:
        match += config.unnamed_weight * np.clip(dot(unnamed), 0, None)
    return match


def inherit_replies(scores: np.ndarray, answers_to: np.ndarray, share: float) -> np.ndarray:
    """Each reply (``answers_to`` >= 0: the row of the question it answers) gains ``share`` of its
    question's score: the question often repeats the words asked later, its answer holds the fact."""
    if not share:
        return scores
    out = scores.astype(np.float64, copy=True)
    replies = answers_to >= 0
    out[replies] += share * scores[answers_to[replies]]
    return out


def fact_keys(index: MemoryIndex, fact_scores: np.ndarray, config: RetrievalConfig) -> np.ndarray:
    """Per passage, its best fact's score above ``min_fact_score`` (0 without one); a reply inherits
    its question's share as in the prior."""
    keys = np.zeros(index.passages.height, dtype=np.float64)
    if fact_scores.shape[0]:
        np.maximum.at(keys, index.fact_rows, np.clip(fact_scores - config.min_fact_score, 0, None))
    return inherit_replies(keys, index.answers_to, config.answer_share)


def retrieve(
    index: MemoryIndex, question: np.ndarray, query_facts: np.ndarray, config: RetrievalConfig, *, question_text: str | None = None,
    unnamed: np.ndarray | None = None, several: bool = False, window: Window | None = None, latest: bool = False, advice: bool = False,
    rerankers: Mapping[str, RerankModel] | None = None,
) -> RetrievalResult:
    """``unnamed``: the vector of the question without the speakers' names (EncodedQuery.unnamed_vector).
    ``several``: the question asks for several things (EncodedQuery.several); with ``list_breadth`` RPE
    expands only its ``list_top_passages_rpe`` best matches, at most ``top_passages_rpe``
    (retrieval/question_form.py says why). ``window``: the days the question is about; ``latest``: it
    asks what holds now; ``advice``: it asks for advice (EncodedQuery's fields; each used when its
    setting is on). ``rerankers``: the reranker's model for a base ranking ("seem", "prior"), where not
    the bundled one (the evaluation's held-out folds)."""
    if not config.query_facts:
        query_facts = query_facts[:0]
    direct = passage_prior(index, question, question_text, config, unnamed, advice=advice)
    fact_scores = (score_facts(index, question, query_facts, unnamed, config.unnamed_fact_weight)
                   if config.use_graph or config.fact_key_weight else None)
    strength = window.sure * time_share(window, config) if window is not None else 0.0
    if fact_scores is not None and strength and config.time_fact_weight and fact_scores.shape[0]:
        fact_scores = fact_scores + config.time_fact_weight * strength * fact_nearness(index, window)
    keys = (fact_keys(index, fact_scores, config)
            if fact_scores is not None and direct.shape[0] and (config.fact_key_weight or config.rerank) else None)
    prior = direct + config.fact_key_weight * keys if config.fact_key_weight and keys is not None else direct
    if strength and config.time_weight and prior.shape[0]:
        prior = prior + config.time_weight * strength * time_nearness(index, window)

    seeds = seeds_from(index, fact_scores, config) if config.use_graph else []
    ids = index.graph.passage_ids
    if seeds:
        reset = reset_vector(index, seeds, prior, config)
        pr = np.array(
            index.graph.walked(config.use_synonyms).personalized_pagerank(
                directed=False, damping=config.damping, reset=reset.tolist(), weights="weight", implementation="prpack"
            )
        )[: len(ids)]
        order = rank_by_mass(pr, prior).tolist()
        seed_source = {s.passage_id: s for s in seeds}
        ranked = []
        for i, mass in zip(order, pr[order].tolist()):  # every passage: one Python float each, not two numpy lookups
            pid = ids[i]
            if pid in seed_source:
                s = seed_source[pid]
                reason = Reason(reasons.SEED_FACT, pagerank=mass, fact=(s.subject, s.relation, s.object), fact_score=s.score)
            else:
                reason = Reason(reasons.PAGERANK, pagerank=mass)
            ranked.append(Ranked(pid, mass, reason))
        mode = "graph"
    else:
        order = np.argsort(-prior, kind="stable").tolist()
        ranked = [Ranked(ids[i], match, Reason(reasons.DIRECT, match=match, no_usable_fact=config.use_graph))
                  for i, match in zip(order, prior[order].tolist())]
        mode = "dense"
    if latest and config.latest_first:
        ranked = latest_first(index, ranked, config)
    used: list[int] = []
    listed = several and config.list_breadth
    anchors = min(config.list_top_passages_rpe, config.top_passages_rpe) if listed else None
    if config.use_rpe and not (listed and not anchors):
        ranked, used = expand(index, ranked, config, anchors)
    signals = Signals(direct, keys, fact_scores if keys is not None else None)
    if config.rerank:
        ranked = rerank(index, ranked, signals, question_text or "", several, config, rerankers)
    return RetrievalResult(ranked, seeds, mode, used, signals)


def latest_first(index: MemoryIndex, ranked: list[Ranked], config: RetrievalConfig) -> list[Ranked]:
    """Among the top ``latest_depth`` passages, the statements of what the best one states (a property
    of the same name: where someone lives, what they started using) latest first, in the places they
    held; a statement whose value was replaced later (a single-valued property superseded) brings the
    statement that replaced it just before it. The rest keep their order."""
    head = ranked[: config.latest_depth]
    if not head:
        return ranked
    stated = index.properties_of
    asked = stated.get(head[0].passage_id, frozenset())
    slots = [at for at, r in enumerate(head) if asked & stated.get(r.passage_id, frozenset())]
    chosen = sorted((head[at] for at in slots), key=lambda r: (bool(index.superseded[index.position[r.passage_id]]),
                                                               -index.recency[index.position[r.passage_id]]))
    out = list(head)
    for at, item in zip(slots, chosen):
        out[at] = item
    by_id = {r.passage_id: r for r in ranked}
    placed: dict[str, Ranked] = {}
    for item in out:
        later = index.superseded_by.get(item.passage_id)
        if later is not None and later in by_id and later not in placed:
            placed[later] = by_id[later]
        placed.setdefault(item.passage_id, item)
    return list(placed.values()) + [r for r in ranked if r.passage_id not in placed]


def time_share(window: Window, config: RetrievalConfig) -> float:
    """How much of ``time_weight`` a window of this kind carries: one the question dates outright whole, a
    calendar name whose year is the question's ``time_calendar``, a time counted from the question's date
    ``time_relative`` (a question may be worded from the day of the session that answers it)."""
    if not window.calendar:
        return config.time_relative
    return 1.0 if window.year_said else config.time_calendar


def time_nearness(index: MemoryIndex, window: Window) -> np.ndarray:
    """Per passage row, how near the nearest time it is about lies to the question's window (1 inside)."""
    rows, first, last = index.time_spans
    near = _nearness(window, first, last)
    out = np.zeros(index.passages.height, dtype=np.float64)
    np.maximum.at(out, rows, near)
    return out


def fact_nearness(index: MemoryIndex, window: Window) -> np.ndarray:
    """Per fact, how near its resolved time lies to the question's window (0 for an undated fact)."""
    first, last = index.fact_spans
    return np.where(first >= 0, _nearness(window, first, last), 0.0)


def _nearness(window: Window, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    start, end = window.start.toordinal(), window.end.toordinal()
    gap = np.where(last < start, start - last, np.where(first > end, first - end, 0))
    return np.clip(1.0 - gap / (window.tolerance + 1.0), 0.0, None)


def rerank(index: MemoryIndex, ranked: list[Ranked], signals: Signals, question: str, several: bool, config: RetrievalConfig,
           models: Mapping[str, RerankModel] | None = None) -> list[Ranked]:
    """The top ``rerank_depth`` passages reordered by the model of this ranking (retrieval/rerank.py):
    ``seem``'s when the walk ran, the prior's otherwise; from ``models`` when it has one, else the
    bundled one."""
    base = WALK_BASE if config.use_graph else PRIOR_BASE
    model = (models or {}).get(base) or bundled_model(base)
    if signals.fact_key is None and any(f in FACT_FEATURES for f in model.features):
        raise ValueError("the reranker reads the facts' match, which this retrieval did not compute (use_graph and fact_key_weight are off)")
    head = ranked[: config.rerank_depth]
    order = reorder(model, rerank_features(index, head, signals, question, several))
    moved = [Ranked(head[i].passage_id, head[i].score, head[i].reason.reranked(i + 1)) if i != at else head[i]
             for at, i in enumerate(order)]
    return moved + ranked[config.rerank_depth:]


def rerank_features(index: MemoryIndex, head: list[Ranked], signals: Signals, question: str, several: bool) -> np.ndarray:
    """The reranker's FEATURES of each passage of ``head``, in its order (retrieval/rerank.py)."""
    rows = np.fromiter((index.position[r.passage_id] for r in head), dtype=np.int64, count=len(head))
    return feature_matrix(rows, signals, index.answers_to, index.speaker_of_row, named_speakers(question, index.speakers),
                          index.word_counts, several, index.fact_rows)


def rank_by_mass(mass: np.ndarray, prior: np.ndarray, tie: float = PAGERANK_TIE) -> np.ndarray:
    """Rows by PageRank mass, best first; masses within ``tie`` of the next one are a tie, ordered by
    the prior. prpack's masses differ by ~1e-14 between identical calls, so passages the walk reaches
    equally (unreachable turns, symmetric ones) would otherwise be ordered by that noise."""
    by_mass = np.argsort(-mass, kind="stable")
    group = np.empty(len(mass), dtype=np.int64)
    group[by_mass] = np.concatenate([[0], np.cumsum(-np.diff(mass[by_mass]) > tie)])
    return np.lexsort((-prior, group))


def expand(index: MemoryIndex, ranked: list[Ranked], config: RetrievalConfig, anchors: int | None = None,
           ) -> tuple[list[Ranked], list[int]]:
    """Reverse Provenance Expansion: each of the top ``anchors`` passages (``top_passages_rpe`` unless
    given) brings the nearest turns of its episode or session, the turns that share a rare proper name
    with it, and the replies to those that ask something. An expansion is kept when the walk ranks it
    within ``rpe_within`` and below the first ``rpe_after`` passages, after which the kept ones are
    placed, anchor by anchor (never before their anchor)."""
    anchors = config.top_passages_rpe if anchors is None else anchors
    head = ranked[: max(config.rpe_after, anchors)]
    rank_of = {r.passage_id: i for i, r in enumerate(ranked)}
    taken = {r.passage_id for r in head}
    expansions: list[Ranked] = []
    used: list[int] = []
    for anchor in ranked[:anchors]:
        brought, episode = _expansions(index, anchor, taken, config)
        taken |= {b.passage_id for b in brought}
        kept = [b for b in brought if rank_of.get(b.passage_id, len(ranked)) < config.rpe_within]
        expansions += kept
        if episode is not None and any(b.reason.kind == reasons.EPISODE for b in kept):
            used.append(episode)  # only an episode that brought a turn is one the context describes
    if config.rpe_head_replies and config.rpe_follow_reply:
        # A question among the best matches ("And the pottery?") is answered by the turn after it.
        refs = index.source_refs
        replies = _replies_to(index, [r.passage_id for r in head], set(taken))
        expansions += [Ranked(p, 0.0, Reason(reasons.ANSWERS_TOP, question=refs[q])) for p, q in replies.items()
                       if rank_of.get(p, len(ranked)) < config.rpe_within]
    placed = {r.passage_id for r in head} | {b.passage_id for b in expansions}
    return head + expansions + [r for r in ranked if r.passage_id not in placed], used


def _expansions(index: MemoryIndex, anchor: Ranked, taken: set[str], config: RetrievalConfig) -> tuple[list[Ranked], int | None]:
    """What one anchor brings (none of ``taken``), in conversation order, each with its reason; and
    the anchor's episode."""
    pid = anchor.passage_id
    ep = index.episode_of.get(pid) if config.rpe_scope in ("episode", "both") else None
    members = index.episodes[Episodes.passage_ids][ep].to_list() if ep is not None else []
    if config.rpe_scope in ("session", "both"):
        turn = index.turn_index[pid]
        members = members + [p for p in index.session_members.get(pid, []) if abs(index.turn_index[p] - turn) <= config.rpe_turn_window]
    members = [p for p in dict.fromkeys(members) if p not in taken and p != pid]
    at = index.position[pid]
    nearest = sorted(members, key=lambda p: (abs(index.position[p] - at), index.position[p]))[: config.rpe_max_per_episode]
    named = _name_linked(index, pid, taken | set(nearest), config)
    chosen = nearest + list(named)
    replies = _replies_to(index, chosen, taken | set(chosen) | {pid}) if config.rpe_follow_reply else {}
    chosen += list(replies)
    episode_members = set(index.episodes[Episodes.passage_ids][ep].to_list()) if ep is not None else set()
    refs = index.source_refs
    out = []
    for p in sorted(chosen, key=index.position.get):
        if p in episode_members:
            why = Reason(reasons.EPISODE, episode=index.episodes[Episodes.episode_id][ep], anchor=refs[pid])
        elif p in named:
            why = Reason(reasons.NAME_LINK, name=named[p], anchor=refs[pid])
        elif p in replies and replies[p] in named:
            why = Reason(reasons.ANSWERS_NAME_LINK, question=refs[replies[p]], name=named[replies[p]], anchor=refs[pid])
        else:
            why = Reason(reasons.NEIGHBOUR, anchor=refs[pid])
        out.append(Ranked(p, anchor.score, why))
    return out, ep


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
