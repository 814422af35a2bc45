"""Graph and retrieval on small hand-made memories, plus the query CLI on a built conversation."""

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import LOCOMO_DEV, need
from seem_dagster.config import RetrievalConfig, SynonymConfig
from seem_dagster.graph.build import graph_edges
from seem_dagster.graph.entities import entities_from_facts, entity_id, is_proper_name, normalise, synonym_edges
from seem_dagster.retrieval.index import FACT, PASSAGE, MemoryIndex
from seem_dagster.retrieval.search import rank_by_mass, reset_vector, retrieve, score_facts, seeds_from
from seem_dagster.schemas import (
    Entities,
    Episodes,
    Facts,
    GraphEdges,
    Passages,
    embeddings_frame,
    table,
)

DIM = 4
T = datetime(2024, 1, 1)


def unit(*xs):
    v = np.array(xs + (0.0,) * (DIM - len(xs)), dtype=np.float32)
    return v / np.linalg.norm(v)


def facts(rows):
    return table(Facts, [
        {"fact_id": f"t_{i:016x}", "conversation_id": "c", "subject": s, "relation": r, "object": o,
         "time": None, "time_text": None, "passage_id": p, "extractor": "hand"}
        for i, (s, r, o, p) in enumerate(rows)
    ])


def passages(n):
    return table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": "s", "session_index": 0, "turn_index": i,
         "speaker": "Ann", "text": f"turn {i}", "timestamp": T, "source_ref": f"D1:{i}"}
        for i in range(n)
    ])


def episodes(groups):
    return table(Episodes, [
        {"episode_id": f"e_{i:016x}", "conversation_id": "c", "summary": f"episode {i}", "events": [],
         "passage_ids": g, "frame_ids": g, "first_time": T, "last_time": T}
        for i, g in enumerate(groups)
    ])


def index(fact_rows, fact_vecs, n_passages, passage_vecs, groups=None):
    f = facts(fact_rows)
    ents = entities_from_facts(f)
    p = passages(n_passages)
    vectors = pl.concat([
        embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack(passage_vecs), "hand", DIM),
        embeddings_frame(FACT, f["fact_id"].to_list(), np.stack(fact_vecs), "hand", DIM),
    ])
    return MemoryIndex.from_tables(p, f, ents, episodes(groups or [[f"p{i}"] for i in range(n_passages)]), graph_edges(f, []), vectors)


def test_exact_normalised_names_merge_whatever_the_embeddings():
    f = facts([("Mel", "paint", "a sunrise", "p0"), ("mel", "run", "charity race", "p1"), ("MEL's", "love", "The Sunrise", "p2")])
    ents = entities_from_facts(f)
    mel = ents.filter(pl.col(Entities.entity_id) == entity_id("c", "mel")).row(0, named=True)
    assert sorted(mel[Entities.aliases]) == ["MEL's", "Mel", "mel"]
    assert mel[Entities.passage_ids] == ["p0", "p1", "p2"]
    assert normalise("a sunrise") == normalise("The Sunrise") == "sunrise"
    assert ents.height == 3  # mel, sunrise, charity race


def test_synonym_edges_threshold_cap_and_incremental_comparisons():
    ids = ["a", "b", "c", "d"]
    vecs = np.stack([unit(1, 0), unit(1, 0.1), unit(0, 1), unit(1, 0.05)])
    cfg = SynonymConfig(threshold=0.8, max_per_node=100)
    full = synonym_edges(ids, vecs, cfg)
    assert {(a, b) for a, b, _ in full.edges} == {("a", "b"), ("a", "d"), ("b", "d")}
    assert full.comparisons == 16
    first = synonym_edges(ids[:3], vecs[:3], cfg)
    increment = synonym_edges(ids, vecs, cfg, previous=first.edges, known=set(ids[:3]))
    assert increment.edges == full.edges
    assert increment.comparisons == 4  # only the new entity against all four, never all pairs again
    capped = synonym_edges(ids, vecs, SynonymConfig(threshold=0.8, max_per_node=1))
    assert len(capped.edges) == 1 and capped.edges[0][:2] == ("b", "d")  # the closest pair wins the cap


def test_seed_weights_are_fact_score_over_entity_specificity():
    # "ann" is in 3 passages, "guitar" in 1: the same seed gives guitar three times ann's reset.
    idx = index(
        [("Ann", "play", "guitar", "p0"), ("Ann", "visit", "Rome", "p1"), ("Ann", "like", "tea", "p2")],
        [unit(1, 0), unit(0, 1), unit(0, 0, 1)], 3, [unit(0, 0, 0, 1)] * 3,
    )
    scores = score_facts(idx, unit(1, 0), np.zeros((0, DIM), np.float32))
    seeds = seeds_from(idx, scores, RetrievalConfig(top_facts=1))
    assert [(s.subject, s.object) for s in seeds] == [("Ann", "guitar")]
    reset = reset_vector(idx, seeds, np.zeros(3), RetrievalConfig(passage_share=0.0))
    ann, guitar = idx.graph.index[entity_id("c", "ann")], idx.graph.index[entity_id("c", "guitar")]
    assert reset[guitar] == pytest.approx(1.0) and reset[ann] == pytest.approx(1 / 3)


def test_pagerank_ranks_the_passage_of_the_seed_fact_first():
    idx = index(
        [("Ann", "play", "guitar", "p0"), ("Ann", "visit", "Rome", "p1"), ("Bo", "cook", "pasta", "p2")],
        [unit(1, 0), unit(0, 1), unit(0, 0, 1)], 4, [unit(0, 0, 0, 1)] * 4,
    )
    result = retrieve(idx, unit(1, 0), np.zeros((0, DIM), np.float32), RetrievalConfig(top_facts=1, use_rpe=False))
    assert result.mode == "graph"
    order = [r.passage_id for r in result.ranked]
    assert order[0] == "p0" and order.index("p1") < order.index("p2")  # p1 shares Ann with the seed
    assert str(result.ranked[0].reason).startswith("seed fact (Ann; play; guitar)")
    scores = [r.score for r in result.ranked]
    assert scores == sorted(scores, reverse=True)


def test_seem_no_synonyms_walks_the_same_memory_without_its_synonym_edges():
    # p1's only entity is "guitars"; the synonym edge guitar~guitars is the walk's way from the seed to it.
    f = facts([("Ann", "play", "guitar", "p0"), ("Bo", "sell", "guitars", "p1"), ("Cy", "cook", "pasta", "p2")])
    p = passages(3)
    vectors = pl.concat([embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack([unit(0, 0, 0, 1)] * 3), "hand", DIM),
                         embeddings_frame(FACT, f["fact_id"].to_list(), np.stack([unit(1, 0), unit(0, 1), unit(0, 0, 1)]), "hand", DIM)])
    synonym = (entity_id("c", "guitar"), entity_id("c", "guitars"), 0.9)
    idx = MemoryIndex.from_tables(p, f, entities_from_facts(f), episodes([["p0"], ["p1"], ["p2"]]), graph_edges(f, [synonym]), vectors)
    cfg = RetrievalConfig(top_facts=1, use_rpe=False, lexical_weight=0.0, fact_key_weight=0.0)
    query = (idx, unit(1, 0), np.zeros((0, DIM), np.float32))
    walked = {r.passage_id: r.score for r in retrieve(*query, cfg).ranked}
    without = {r.passage_id: r.score for r in retrieve(*query, cfg.replace(use_synonyms=False)).ranked}
    assert walked["p1"] > walked["p2"]  # reached through the synonym edge
    assert without["p1"] == pytest.approx(without["p2"])  # no way from the seed to either
    assert idx.graph.walked(False).vcount() == idx.graph.graph.vcount()  # the same vertices, one edge fewer
    assert idx.graph.walked(False).ecount() == idx.graph.graph.ecount() - 1


def test_passages_the_walk_reaches_equally_are_ordered_by_their_prior_every_time():
    # p1 and p2 each tune the seed's guitar with a person of their own: their PageRank is equal in exact
    # arithmetic, and prpack returns it with ~1e-14 of run-to-run noise, which must not decide the
    # order. The prior does (p2 matches the question better), and the same way on every call.
    idx = index(
        [("Ann", "play", "guitar", "p0"), ("Bo", "tune", "guitar", "p1"), ("Cy", "tune", "guitar", "p2")],
        [unit(1, 0), unit(0, 1), unit(0, 1)], 4, [unit(0, 0, 1), unit(0, 0, 1, 1), unit(0, 0, 1), unit(0, 0, 0, 1)],
    )
    cfg = RetrievalConfig(top_facts=1, use_rpe=False, passage_share=0.0, lexical_weight=0.0, answer_share=0.0)
    runs = [retrieve(idx, unit(1, 0, 1), np.zeros((0, DIM), np.float32), cfg) for _ in range(20)]
    assert runs[0].mode == "graph" and [s.object for s in runs[0].seeds] == ["guitar"]
    assert {tuple(r.passage_id for r in run.ranked) for run in runs} == {("p0", "p2", "p1", "p3")}
    assert runs[0].ranked[1].score == pytest.approx(runs[0].ranked[2].score, abs=1e-12)
    # The tie rule itself: masses within 1e-12 tie whichever side of any rounding boundary they fall.
    mass = np.array([0.5, 0.3 + 4e-15, 0.3 - 4e-15, 0.2])
    assert rank_by_mass(mass, np.array([0.0, 0.1, 0.9, 1.0])).tolist() == [0, 2, 1, 3]
    assert rank_by_mass(mass[[0, 2, 1, 3]], np.array([0.0, 0.9, 0.1, 1.0])).tolist() == [0, 1, 2, 3]


def test_dense_fallback_when_no_fact_is_usable():
    idx = index([("Ann", "play", "guitar", "p0")], [unit(1, 0)], 3, [unit(0, 1), unit(0, 0, 1), unit(0, 0.2, 1)])
    result = retrieve(idx, unit(0, 0, 1), np.zeros((0, DIM), np.float32), RetrievalConfig(min_fact_score=0.5, use_rpe=False))
    assert result.mode == "dense" and not result.seeds
    assert [r.passage_id for r in result.ranked] == ["p1", "p2", "p0"]
    assert "no usable fact" in str(result.ranked[0].reason)


def test_rpe_brings_every_passage_of_the_episode_right_after_its_anchor():
    idx = index(
        [("Ann", "play", "guitar", "p2"), ("Bo", "cook", "pasta", "p4")],
        [unit(1, 0), unit(0, 1)], 6, [unit(0, 0, 0, 1)] * 6,
        groups=[["p0", "p2", "p5"], ["p1"], ["p3"], ["p4"]],
    )
    cfg = RetrievalConfig(top_facts=1, top_passages_rpe=1, rpe_max_per_episode=10, rpe_scope="episode", rpe_after=0)
    result = retrieve(idx, unit(1, 0), np.zeros((0, DIM), np.float32), cfg)
    order = [r.passage_id for r in result.ranked]
    assert order[:3] == ["p2", "p0", "p5"]  # the anchor, then its episode in time order
    assert sorted(order) == [f"p{i}" for i in range(6)] and len(order) == 6
    assert str(result.ranked[1].reason) == "episode e_0000000000000000 expanded from anchor D1:2"
    assert result.episodes == [0]


def test_rpe_default_scope_takes_the_nearest_turns_of_the_episode_or_the_session():
    idx = index(
        [("Ann", "play", "guitar", "p2"), ("Bo", "cook", "pasta", "p4")],
        [unit(1, 0), unit(0, 1)], 6, [unit(0, 0, 0, 1)] * 6,
        groups=[["p0", "p2", "p5"], ["p1"], ["p3"], ["p4"]],
    )
    cfg = RetrievalConfig(top_facts=1, top_passages_rpe=1, rpe_max_per_episode=2, rpe_after=0)
    assert cfg.rpe_scope == "both"
    result = retrieve(idx, unit(1, 0), np.zeros((0, DIM), np.float32), cfg)
    # p1 and p3 are the anchor's neighbours in its session (one turn away); p0 and p5 are further.
    assert [r.passage_id for r in result.ranked[:3]] == ["p2", "p1", "p3"]
    assert str(result.ranked[1].reason) == "same-session neighbour of anchor D1:2"
    assert result.episodes == []  # no turn of the anchor's episode came in: the context names none
    with pytest.raises(ValueError, match="rpe_scope"):
        RetrievalConfig(rpe_scope="episodes")
    session_only = retrieve(idx, unit(1, 0), np.zeros((0, DIM), np.float32), RetrievalConfig(
        top_facts=1, top_passages_rpe=1, rpe_max_per_episode=4, rpe_scope="session", rpe_turn_window=2, rpe_after=0))
    assert [r.passage_id for r in session_only.ranked[:5]] == ["p2", "p0", "p1", "p3", "p4"]
    assert session_only.episodes == []
    # The window counts turns of the conversation: with one turn each side only p1 and p3 qualify.
    narrow = retrieve(idx, unit(1, 0), np.zeros((0, DIM), np.float32), RetrievalConfig(
        top_facts=1, top_passages_rpe=1, rpe_max_per_episode=4, rpe_scope="session", rpe_after=0))
    assert [str(r.reason).startswith("same-session") for r in narrow.ranked[:3]] == [False, True, True]
    assert [r.passage_id for r in narrow.ranked[1:3]] == ["p1", "p3"]


def test_a_reply_inherits_a_share_of_the_question_it_answers():
    turns = [("Bo", "How was the trip?", 0), ("Ann", "Lisbon was lovely.", 1), ("Ann", "Also, work.", 2),
             ("Bo", "Where did you stay?", 3), ("Ann", "With my aunt.", 5)]  # turn 4 left out of the corpus
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": "s", "session_index": 0, "turn_index": t,
         "speaker": who, "text": text, "timestamp": T, "source_ref": f"D1:{i}"}
        for i, (who, text, t) in enumerate(turns)
    ])
    f = facts([])
    vecs = [unit(1), unit(0, 1), unit(0.2, 1), unit(1), unit(0, 1)]
    vectors = embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack(vecs), "hand", DIM)
    idx = MemoryIndex.from_tables(p, f, entities_from_facts(f), episodes([[f"p{i}"] for i in range(5)]), graph_edges(f, []), vectors)
    assert idx.answers_to.tolist() == [-1, 0, -1, -1, -1]  # same speaker, or not the next turn: no reply
    cfg = RetrievalConfig(use_rpe=False, lexical_weight=0.0)
    ranked = [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg).ranked]
    assert ranked[:3] == ["p0", "p3", "p1"]  # p1 answers p0; p2 matches more on its own, p4 follows a gap
    plain = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(use_rpe=False, lexical_weight=0.0, answer_share=0.0))
    assert [r.passage_id for r in plain.ranked][:3] == ["p0", "p3", "p2"]


def test_rpe_brings_the_reply_to_an_expanded_question():
    turns = [("Ann", "I hurt my ankle on a trail run."), ("Bo", "Did you see someone about it?"),
             ("Ann", "Yes, a physiotherapist called Dr. Osei."), ("Ann", "Work is busy too.")]
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": "s", "session_index": 0, "turn_index": i,
         "speaker": who, "text": text, "timestamp": T, "source_ref": f"D1:{i}"}
        for i, (who, text) in enumerate(turns)
    ])
    f = facts([])
    vectors = embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack([unit(1), unit(0, 1), unit(0, 0, 1), unit(0.3, 0, 0, 1)]), "hand", DIM)
    idx = MemoryIndex.from_tables(p, f, entities_from_facts(f), episodes([[f"p{i}"] for i in range(4)]), graph_edges(f, []), vectors)
    base = dict(top_passages_rpe=1, rpe_max_per_episode=1, lexical_weight=0.0, answer_share=0.0, rpe_after=0)
    ranked = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**base)).ranked
    assert [r.passage_id for r in ranked] == ["p0", "p1", "p2", "p3"]  # the question's answer follows it
    assert str(ranked[2].reason) == "same-session neighbour of anchor D1:0"
    plain = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**base, rpe_follow_reply=False)).ranked
    assert [r.passage_id for r in plain] == ["p0", "p1", "p3", "p2"]
    # With list_top_passages_rpe 0, a question that asks for several things keeps the ranking without RPE,
    # unless list_breadth is off.
    walked = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**base, use_rpe=False)).ranked
    listed = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**base, list_top_passages_rpe=0), several=True)
    assert [r.passage_id for r in listed.ranked] == [r.passage_id for r in walked] != [r.passage_id for r in ranked]
    assert listed.episodes == []
    on_lists = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**base, list_breadth=False), several=True).ranked
    assert [r.passage_id for r in on_lists] == ["p0", "p1", "p2", "p3"]


def test_a_list_question_has_only_its_best_match_expanded():
    # Three sessions: the best match (p0) and the second (p3) each open a session whose next turn
    # (p1, p4) matches little on its own; p6, in a third session, matches better than either.
    sessions = [0, 0, 0, 1, 1, 1, 2]
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": f"s{k}", "session_index": k, "turn_index": i,
         "speaker": "Ann", "text": f"turn {i}", "timestamp": T, "source_ref": f"D{k + 1}:{i}"}
        for i, k in enumerate(sessions)
    ])
    f = facts([])
    vecs = [unit(1), unit(0.2, 1), unit(0, 0, 1), unit(0.9, 0.3), unit(0.1, 1), unit(0, 0, 0, 1), unit(0.5, 0, 0, 1)]
    vectors = embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack(vecs), "hand", DIM)
    idx = MemoryIndex.from_tables(p, f, entities_from_facts(f), episodes([[f"p{i}"] for i in range(7)]), graph_edges(f, []), vectors)
    base = dict(top_passages_rpe=2, rpe_max_per_episode=1, rpe_turn_window=1, lexical_weight=0.0, answer_share=0.0,
                rpe_after=2, rpe_scope="session")

    def order(several, **settings):
        return [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), RetrievalConfig(**{**base, **settings}),
                                               several=several).ranked][:5]
    assert order(False, use_rpe=False) == ["p0", "p3", "p6", "p1", "p4"]  # the walk's ranking
    assert order(False) == ["p0", "p3", "p1", "p4", "p6"]  # both top passages bring their next turn
    assert order(True) == ["p0", "p3", "p1", "p6", "p4"]  # a list question: only the best match's
    assert order(True, list_top_passages_rpe=0) == order(False, use_rpe=False)
    assert order(True, list_breadth=False) == order(False)
    assert order(True, list_top_passages_rpe=2) == order(True, list_top_passages_rpe=5) == order(False)  # capped at top_passages_rpe
    assert order(True, top_passages_rpe=1, list_top_passages_rpe=2) == order(True)


def test_a_proper_name_is_capitalised_inside_a_sentence():
    assert is_proper_name("Ines", ["No, my neighbour Ines offered to look after him."])
    assert is_proper_name("Ines", ["That sounds magical. Did Biscuit behave with Ines?"])
    assert not is_proper_name("Adoption", ["Adoption is a big step. I read about it."])  # only sentence-initial
    assert not is_proper_name("Your courage", ["Thanks! Your courage inspires me."])
    assert not is_proper_name("park", ["We walked in the park."])
    assert not is_proper_name("Max", ["Maxine came over."])  # whole words only


def test_rpe_brings_the_turns_that_share_a_rare_proper_name_with_the_anchor():
    turns = [  # (session, speaker, text)
        (0, "Tom", "My neighbour Ines offered to look after him."), (0, "Pia", "Good plan."),
        (0, "Tom", "Adoption is a big step."), (0, "Pia", "Tell Kai and Lea hello."),
        (1, "Pia", "Did Biscuit behave with Ines?"), (1, "Tom", "He chewed one of her slippers."),
        (1, "Pia", "Adoption suits you."), (1, "Tom", "Kai and Lea say hi."), (2, "Tom", "Kai visited; Lea too."),
        (2, "Pia", "And Kai again?"),
    ]
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": f"s{s}", "session_index": s, "turn_index": i,
         "speaker": who, "text": text, "timestamp": T, "source_ref": f"D{s + 1}:{i}"}
        for i, (s, who, text) in enumerate(turns)
    ])
    f = facts([("Tom", "neighbour", "Ines", "p0"), ("Adoption", "be", "big step", "p2"), ("Pia", "greet", "Kai", "p3"),
               ("Biscuit", "behave with", "Ines", "p4"), ("Adoption", "suit", "you", "p6"), ("Kai", "say", "hi", "p7"),
               ("Lea", "say", "hi", "p7"), ("Kai", "visit", "Lea", "p8"), ("Pia", "ask", "Kai", "p9")])
    ents = entities_from_facts(f)
    vecs = [unit(1), unit(0, 1), unit(0, 0, 1)] + [unit(0, 0, 0, 1)] * 7
    vectors = pl.concat([
        embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack(vecs), "hand", DIM),
        embeddings_frame(FACT, f["fact_id"].to_list(), np.stack([unit(0, 1)] * f.height), "hand", DIM),
    ])
    idx = MemoryIndex.from_tables(p, f, ents, episodes([[f"p{i}"] for i in range(10)]), graph_edges(f, []), vectors)
    # Ines and Lea are named by two turns each (p3 names Lea too, but no fact of p3 does); Kai by
    # four, too many for 3; "Adoption" only starts sentences, so it is no proper name.
    assert idx.name_links(3) == {"p0": {"p4": "Ines"}, "p4": {"p0": "Ines"}, "p7": {"p8": "Lea"}, "p8": {"p7": "Lea"}}
    assert set(idx.name_links(4)["p3"]) == {"p7", "p8", "p9"}  # Kai counts at 4 turns
    cfg = RetrievalConfig(top_facts=1, top_passages_rpe=1, rpe_max_per_episode=1, lexical_weight=0.0, answer_share=0.0,
                          use_graph=False, rpe_after=0)
    ranked = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg).ranked
    assert [r.passage_id for r in ranked[:4]] == ["p0", "p1", "p4", "p5"]  # neighbour, the Ines turn, its reply
    assert str(ranked[2].reason) == "names Ines, as anchor D1:0 does"
    assert str(ranked[3].reason) == "answers D2:4, which names Ines as anchor D1:0 does"
    off = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg.replace(rpe_name_turns=0)).ranked
    assert "p4" not in [r.passage_id for r in off[:3]]
    adoption = retrieve(idx, unit(0, 0, 1), np.zeros((0, DIM), np.float32), cfg).ranked
    assert adoption[0].passage_id == "p2" and not any(str(r.reason).startswith(("names", "answers")) for r in adoption)


def test_graph_edges_kinds_and_weights():
    f = facts([("Ann", "play", "guitar", "p0"), ("ann", "play", "Guitar", "p1")])
    edges = graph_edges(f, [("n_x", "n_y", 0.9)])
    by_kind = dict(edges.group_by(GraphEdges.kind).len().iter_rows())
    assert by_kind == {"fact": 1, "mention": 4, "synonym": 1}
    assert edges.filter(pl.col(GraphEdges.kind) == "fact")[GraphEdges.weight].to_list() == [2.0]


SEEM = str(Path(sys.executable).parent / "seem")
QUESTION = "When did Jon lose his job as a banker?"  # LoCoMo asks it as "When Jon has lost ...?": gold D1:2


@pytest.fixture(scope="module")
def conv30(tmp_path_factory) -> str:
    """conv-30 built once for the module's slow tests (a module fixture cannot take the per-test one)."""
    store = str(tmp_path_factory.mktemp("conv30") / "store")
    built = subprocess.run([SEEM, "build", "--input", str(need(LOCOMO_DEV)), "--conversation", "conv-30", "--store", store, "--quiet"],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-2000:]
    return store


def query_json(store: str, *extra: str) -> dict:
    out = subprocess.run([SEEM, "query", "--store", store, "--conversation", "conv-30", "--k", "10", "--json", "--date", "2023-08-01",
                          *extra, QUESTION], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
def test_seem_query_json_lists_ten_turns_each_with_its_source_and_reason_and_finds_the_gold_turn(conv30):
    payload = query_json(conv30)
    assert len(payload["passages"]) == 10 and payload["date"].startswith("2023-08-01")
    for item in payload["passages"]:
        assert {"passage_id", "source_ref", "text", "timestamp", "score", "reason", "why"} <= set(item)
        assert item["reason"] and item["why"]["kind"]
    assert "D1:2" in [p["source_ref"] for p in payload["passages"][:5]]  # the turn where Jon says he lost it


@pytest.mark.slow
def test_rpe_places_its_turns_after_the_first_five_and_a_setting_turns_it_off(conv30):
    payload = query_json(conv30)
    expanded = [p["why"]["kind"] in ("episode", "neighbour", "name_link", "answers_name_link", "answers_top") for p in payload["passages"]]
    assert any(expanded[5:]) and not any(expanded[:5])
    plain = query_json(conv30, "--set", "retrieval.use_rpe=false")["passages"]
    assert len(plain) == 10 and not any("anchor" in p["reason"] for p in plain)
    assert [p["passage_id"] for p in plain[:5]] == [p["passage_id"] for p in payload["passages"][:5]]


@pytest.mark.slow
def test_a_bad_setting_or_an_unknown_conversation_is_one_line_exit_2(conv30):
    bad = subprocess.run([SEEM, "query", "--store", conv30, "--conversation", "conv-30", "--set", "retrieval.use_rpe=maybe", "hi"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "retrieval.use_rpe" in bad.stderr
    missing = subprocess.run([SEEM, "query", "--store", conv30, "--conversation", "nope", "hello"], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr == "seem: error: no memory of conversation 'nope' in this store\n"


@pytest.mark.slow
def test_a_ranking_is_the_same_on_every_call(conv30):
    """prpack's ~1e-14 noise reordered graph-only's tail before near-equal masses tied (32 of conv-30's
    first 40 questions differed between two calls)."""
    from seem_dagster import Memory
    from seem_dagster.evaluation.methods import ids, rankers

    with Memory.open(conv30) as memory:
        index = memory.index("conv-30")
        questions = memory.sql("SELECT question FROM questions LIMIT 40", "conv-30").frame["question"].to_list()
        queries = [memory.encode("conv-30", q, datetime(2023, 8, 1)) for q in questions]
        for name, rank in rankers(RetrievalConfig(), ["seem", "graph-only"]).items():
            assert [ids(rank(index, q)) for q in queries] == [ids(rank(index, q)) for q in queries], name


def test_the_attributable_methods_by_hand():
    from seem_dagster import methods as registry
    from seem_dagster.evaluation.methods import ids, rankers
    from seem_dagster.retrieval.query import EncodedQuery

    turns = [("Ann", "I went hiking."), ("Bo", "Where did you stay in Lisbon?"), ("Ann", "With my aunt."), ("Bo", "Lisbon is far.")]
    p = table(Passages, [
        {"passage_id": f"p{i}", "conversation_id": "c", "session_id": "s", "session_index": 0, "turn_index": i,
         "speaker": who, "text": text, "timestamp": T, "source_ref": f"D1:{i}"}
        for i, (who, text) in enumerate(turns)
    ])
    f = facts([])
    vectors = embeddings_frame(PASSAGE, p["passage_id"].to_list(), np.stack([unit(1)] * 4), "hand", DIM)
    idx = MemoryIndex.from_tables(p, f, entities_from_facts(f), episodes([[f"p{i}"] for i in range(4)]), graph_edges(f, []), vectors)
    assert idx.answers_to.tolist() == [-1, -1, 1, -1]  # "With my aunt." answers "Where did you stay in Lisbon?"
    # The question's vector is orthogonal to every passage: dense ranks in row order, BM25 on "lisbon", "stay".
    query = EncodedQuery("Lisbon stay", T, unit(0, 0, 1), [], np.zeros((0, DIM), np.float32))
    ranked = rankers(RetrievalConfig(rpe_after=0, top_passages_rpe=1), registry.names())
    methods = {name: (lambda rank: lambda i, q: ids(rank(i, q)))(rank) for name, rank in ranked.items()}
    assert set(methods) == set(registry.names())
    assert methods["dense"](idx, query) == ["p0", "p1", "p2", "p3"]
    assert methods["bm25"](idx, query)[:2] == ["p1", "p3"]
    # RRF (k=60): p1 1/61+1/62 = 0.03252, p0 1/63+1/61 = 0.03227, p3 1/62+1/64 = 0.03175, p2 1/64+1/63 = 0.03150.
    assert methods["hybrid"](idx, query) == ["p1", "p0", "p3", "p2"]
    # The reply inherits 0.35 of its question's: p2 0.03150 + 0.35 x 0.03252 = 0.04288, first.
    assert methods["hybrid+reply"](idx, query) == ["p2", "p1", "p0", "p3"]
    # The prior alone: BM25 scaled to the best (p1 0.5), the reply 0.35 of that (0.175), p0 nothing.
    prior = methods["prior"](idx, query)
    assert prior[0] == "p1" and prior.index("p2") < prior.index("p0")
    assert methods["prior+facts"](idx, query) == prior  # no facts, no keys
    # RPE over the prior: the anchor p1 brings its neighbours p0 and p2 (and p2 is also its reply).
    assert methods["prior+rpe"](idx, query)[:3] == ["p1", "p0", "p2"]


def test_facts_are_retrieval_keys_that_lift_their_passage():
    # p1's own words miss the question (cosine 0); its fact (Mel; go swim with; kids) matches it fully.
    idx = index([("Mel", "go swim with", "kids", "p1")], [unit(1)], 3, [unit(0.6, 0.8), unit(0, 1), unit(0.5, 0.866)])
    keyed = RetrievalConfig(use_graph=False, use_rpe=False, lexical_weight=0.0, answer_share=0.0)
    # prior: p0 0.6, p1 0.0, p2 0.5; p1's key is 0.3 x (1.0 - 0.3) = 0.21, still below both.
    assert [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), keyed).ranked] == ["p0", "p2", "p1"]
    strong = keyed.replace(fact_key_weight=1.0)  # 0.7: now first
    assert [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), strong).ranked] == ["p1", "p0", "p2"]
    below = keyed.replace(fact_key_weight=1.0, min_fact_score=1.0)  # a fact at the threshold is no key
    assert [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), below).ranked] == ["p0", "p2", "p1"]


def test_the_question_without_the_speakers_names_is_matched_beside_it():
    # The question as asked is closest to p0 (its speaker's name matches every turn of that speaker);
    # without the name it is unit(0, 1), the topic of p1 and, less, of p2.
    idx = index([("Mel", "paint", "a sunrise", "p0")], [unit(0, 0, 1)], 3, [unit(1), unit(0.6, 0.8), unit(0.9, 0.436)])
    cfg = RetrievalConfig(use_graph=False, use_rpe=False, lexical_weight=0.0, answer_share=0.0, fact_key_weight=0.0)
    none = np.zeros((0, DIM), np.float32)

    def order(c, unnamed):
        return [r.passage_id for r in retrieve(idx, unit(1), none, c, unnamed=unnamed).ranked]

    # As asked only: p0 1.0, p2 0.9, p1 0.6.
    assert order(cfg.replace(unnamed_weight=0.0), unit(0, 1)) == ["p0", "p2", "p1"]
    # Beside it, weight 1: p1 0.6 + 0.8 = 1.4, p2 0.9 + 0.436 = 1.336, p0 1.0 + 0 = 1.0.
    assert order(cfg.replace(unnamed_weight=1.0), unit(0, 1)) == ["p1", "p2", "p0"]
    # A question that names no speaker has no unnamed vector: nothing is added.
    assert order(cfg.replace(unnamed_weight=1.0), None) == ["p0", "p2", "p1"]


def test_facts_are_matched_by_the_weighted_mean_of_the_question_with_and_without_the_names():
    # f0 holds only its subject's name (the question as asked, unit(1)); f1 also the topic (unit(0, 1)).
    idx = index([("Mel", "paint", "a sunrise", "p0"), ("Mel", "bake", "bread", "p1")], [unit(1), unit(0.8, 0.6)], 3,
                [unit(0, 0, 1)] * 3)
    named, unnamed, none = unit(1), unit(0, 1), np.zeros((0, DIM), np.float32)
    assert np.allclose(score_facts(idx, named, none), [1.0, 0.8])
    # Weight 0.5: f0 (1.0 + 0.5 x 0) / 1.5 = 0.667, f1 (0.8 + 0.5 x 0.6) / 1.5 = 0.733; a fact matching both
    # alike keeps its cosine (the mean keeps min_fact_score's scale).
    assert np.allclose(score_facts(idx, named, none, unnamed, 0.5), [2 / 3, 1.1 / 1.5])
    assert np.allclose(score_facts(idx, named, none, named, 0.5), [1.0, 0.8])
    # As keys (every passage's prior 0): p0 1.0 - 0.3 ahead of p1 0.8 - 0.3 as asked; p1 ahead with the mean.
    cfg = RetrievalConfig(use_graph=False, use_rpe=False, lexical_weight=0.0, answer_share=0.0, fact_key_weight=1.0)

    def order(c, u):
        return [r.passage_id for r in retrieve(idx, named, none, c, unnamed=u).ranked]

    assert order(cfg.replace(unnamed_fact_weight=0.0), unnamed) == ["p0", "p1", "p2"]
    assert order(cfg.replace(unnamed_fact_weight=0.5), unnamed) == ["p1", "p0", "p2"]
    assert order(cfg.replace(unnamed_fact_weight=0.5), None) == ["p0", "p1", "p2"]  # the question named no speaker
    # seem-named takes both away, seem-named-facts only the facts'.
    from seem_dagster import methods as registry
    from seem_dagster.evaluation.methods import method_config

    configs = {name: method_config(RetrievalConfig(), name) for name in registry.names()}
    assert (configs["seem-named"].unnamed_weight, configs["seem-named"].unnamed_fact_weight) == (0.0, 0.0)
    assert (configs["seem-named-facts"].unnamed_weight, configs["seem-named-facts"].unnamed_fact_weight) == (1.0, 0.0)


def test_without_speakers_takes_out_whole_names_and_their_possessive():
    from seem_dagster.retrieval.query import without_speakers

    speakers = ("Caroline", "Melanie", "Will")
    assert without_speakers("What activities does Melanie partake in?", speakers) == "What activities does partake in?"
    assert without_speakers("What is Caroline's identity?", speakers) == "What is identity?"
    assert without_speakers("Did Melanie’s kids like it?", speakers) == "Did kids like it?"
    assert without_speakers("When did Caroline and Melanie meet?", speakers) == "When did and meet?"
    # Names match as written, whole words only; a question naming nobody, or only a name, has no such form.
    assert without_speakers("What will Carolines say?", speakers) is None
    assert without_speakers("Where did I go?", speakers) is None
    assert without_speakers("Caroline?", speakers) is None
    assert without_speakers("Where did Caroline go?", ()) is None


@pytest.mark.slow
def test_encode_query_embeds_the_question_without_the_speakers_names():
    from seem_dagster import backends
    from seem_dagster.retrieval.query import encode_query

    embedder = backends.embedder()
    q = encode_query("What activities does Melanie partake in?", T, backends.extractor(), embedder, "c", facts=[],
                     speakers=("Caroline", "Melanie"))
    # Real MiniLM: the vector is the stripped question's own (a text's vector does not depend on its batch).
    assert np.array_equal(q.unnamed_vector, embedder.encode(["What activities does partake in?"])[0])
    assert np.array_equal(q.vector, embedder.encode(["What activities does Melanie partake in?"])[0])
    assert q.fact_vectors.shape == (0, embedder.dim)
    assert encode_query("Where did I go?", T, backends.extractor(), embedder, "c", facts=[], speakers=("Melanie",)).unnamed_vector is None


def test_the_questions_own_facts_are_matched_only_with_query_facts_on():
    # The question's vector misses p1's fact (cosine 0); the question's own fact matches it fully.
    idx = index([("Mel", "go swim with", "kids", "p1")], [unit(1)], 3, [unit(0.8, 0, 0.6), unit(0, 1), unit(0, 0.866, 0.5)])
    question, own_fact = unit(0, 0, 1), np.stack([unit(1)])
    cfg = RetrievalConfig(use_graph=False, use_rpe=False, lexical_weight=0.0, answer_share=0.0, fact_key_weight=1.0)
    # prior: p0 0.6, p1 0.0, p2 0.5; with the question's fact p1's key is 1.0 x (1.0 - 0.3) = 0.7: first.
    on = retrieve(idx, question, own_fact, cfg.replace(query_facts=True)).ranked
    assert [r.passage_id for r in on] == ["p1", "p0", "p2"]
    off = retrieve(idx, question, own_fact, cfg.replace(query_facts=False)).ranked
    assert [r.passage_id for r in off] == ["p0", "p2", "p1"]


def test_a_method_pays_for_reading_the_question_only_when_it_uses_the_questions_facts():
    from seem_dagster.evaluation.methods import query_encoding

    off, on = RetrievalConfig(query_facts=False), RetrievalConfig(query_facts=True)
    # "vectors": the question's and its form without the speakers' names; the -named ablations only the first.
    assert [query_encoding(off, m) for m in ("bm25", "dense", "prior", "seem", "seem+query-facts", "seem-named", "prior-named")] == [
        "none", "vector", "vectors", "vectors", "full", "vector", "vector"]
    assert [query_encoding(on, m) for m in ("prior", "prior+rpe", "prior+facts", "seem", "graph-only")] == [
        "vectors", "vectors", "full", "full", "full"]


def test_rpe_places_what_it_brings_after_the_head_and_only_turns_the_walk_reaches():
    # One session of 8 turns; the prior ranks p4, p0, p1, p2, p3, p5, p6, p7 (decreasing cosine).
    order = ["p4", "p0", "p1", "p2", "p3", "p5", "p6", "p7"]
    vecs = {p: unit(1.0 - 0.1 * k, 0.1 * k) for k, p in enumerate(order)}
    idx = index([("Ann", "play", "guitar", "p4")], [unit(0, 0, 1)], 8, [vecs[f"p{i}"] for i in range(8)])
    cfg = RetrievalConfig(use_graph=False, lexical_weight=0.0, answer_share=0.0, rpe_name_turns=0, top_passages_rpe=1,
                          rpe_max_per_episode=2, rpe_scope="session", rpe_after=2, rpe_within=8)
    ranked = retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg).ranked
    # The anchor p4 brings its neighbours p3 and p5 (walk ranks 4 and 5), placed after the head p4, p0.
    assert [r.passage_id for r in ranked] == ["p4", "p0", "p3", "p5", "p1", "p2", "p6", "p7"]
    assert str(ranked[2].reason) == "same-session neighbour of anchor D1:4"
    # Only turns the walk ranks within rpe_within move: p5 (rank 5) stays where the walk put it.
    gated = [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg.replace(rpe_within=5)).ranked]
    assert gated == ["p4", "p0", "p3", "p1", "p2", "p5", "p6", "p7"]
    # A neighbour already in the head stays there: with the head p4, p0, p1, p2, p3, p4 brings only p5.
    wide = [r.passage_id for r in retrieve(idx, unit(1), np.zeros((0, DIM), np.float32), cfg.replace(rpe_after=5)).ranked]
    assert wide == ["p4", "p0", "p1", "p2", "p3", "p5", "p6", "p7"]
