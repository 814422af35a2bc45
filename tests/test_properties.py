"""The property memory's pure derivation on hand-made facts: names, types, supersession of
single-valued properties, accumulation of the rest, append-only growth, and time travel."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest

from seem_dagster.properties.as_of import held_on, history_line, history_lines
from seem_dagster.properties.derive import compare, derive_properties, typed_value
from seem_dagster.properties.stated import StatedProperty
from seem_dagster.properties.vocabulary import canonical_name, is_single_valued, name_property
from seem_dagster.schemas import Facts, Passages, Properties, table

CID = "c1"
SESSIONS = {"s1": datetime(2024, 3, 2, 19, 5), "s2": datetime(2024, 6, 9, 18, 20), "s3": datetime(2024, 10, 20, 16, 0)}


def passages(turns: list[tuple[str, str, str]]) -> pl.DataFrame:
    """(passage id, session, text) -> a passages table; turn order as given."""
    rows = []
    for i, (pid, session, text) in enumerate(turns):
        rows.append({Passages.passage_id: pid, Passages.conversation_id: CID, Passages.session_id: session,
                     Passages.session_index: list(SESSIONS).index(session), Passages.turn_index: i, Passages.speaker: "Tomas",
                     Passages.text: text, Passages.timestamp: SESSIONS[session], Passages.source_ref: pid})
    return table(Passages, rows)


def facts(rows: list[tuple[str, str, str, str, str | None]]) -> pl.DataFrame:
    """(passage id, subject, relation, object, time) -> a facts table."""
    return table(Facts, [{Facts.fact_id: f"t_{i:016x}", Facts.conversation_id: CID, Facts.subject: s, Facts.relation: r,
                          Facts.object: o, Facts.time: t, Facts.time_text: None, Facts.passage_id: p, Facts.extractor: "test"}
                         for i, (p, s, r, o, t) in enumerate(rows)])


TURNS = [("p_a", "s1", "I live in Chorlton."), ("p_b", "s1", "I paint sunsets."), ("p_c", "s2", "Still in Chorlton, painting lakes."),
         ("p_d", "s3", "I moved to Didsbury last month.")]
FACTS = [("p_a", "Tomas", "live in", "Chorlton", None), ("p_b", "Tomas", "paint", "sunsets", None),
         ("p_c", "Tomas", "live in", "Chorlton", None), ("p_c", "Tomas", "paint", "lakes", None),
         ("p_d", "Tomas", "move to", "Didsbury", "2024-09-01/2024-09-30")]


def by(frame: pl.DataFrame, prop: str) -> list[dict]:
    return frame.filter(pl.col(Properties.property) == prop).sort(Properties.valid_from, Properties.said_at).to_dicts()


def test_a_later_value_of_a_single_valued_property_supersedes_the_earlier_and_both_rows_stay():
    table_ = derive_properties(facts(FACTS), passages(TURNS))
    Properties.validate(table_)
    lives = by(table_, "lives_in")
    assert [r[Properties.value] for r in lives] == ["Chorlton", "Chorlton", "Didsbury"]
    first, restated, moved = lives
    # the event time of the move ("last month"), not the day it was said, is when Chorlton stopped holding
    assert first[Properties.valid_to] == restated[Properties.valid_to] == datetime(2024, 9, 1)
    assert moved[Properties.valid_to] is None and moved[Properties.said_at] == SESSIONS["s3"]
    assert moved[Properties.supersedes] == first[Properties.property_id]
    assert restated[Properties.supersedes] is None  # saying the same value again replaces nothing
    assert all(r[Properties.single_valued] for r in lives)


def test_multi_valued_properties_accumulate_and_nothing_is_superseded():
    paints = by(derive_properties(facts(FACTS), passages(TURNS)), "paint")
    assert [r[Properties.value] for r in paints] == ["sunsets", "lakes"]
    assert all(r[Properties.valid_to] is None and r[Properties.supersedes] is None and not r[Properties.single_valued] for r in paints)


def test_a_back_dated_statement_takes_its_place_in_valid_time_not_in_the_order_it_was_said():
    turns = TURNS + [("p_e", "s3", "Before Chorlton I lived in Leeds, back in 2020.")]
    rows = [*FACTS, ("p_e", "Tomas", "live in", "Leeds", "2020-01-01/2020-12-31")]
    lives = by(derive_properties(facts(rows), passages(turns)), "lives_in")
    assert [r[Properties.value] for r in lives] == ["Leeds", "Chorlton", "Chorlton", "Didsbury"]
    leeds, chorlton = lives[0], lives[1]
    assert leeds[Properties.valid_to] == SESSIONS["s1"] and chorlton[Properties.supersedes] == leeds[Properties.property_id]


def test_an_incremental_build_appends_rows_and_closes_the_superseded_ones_without_rewriting_history():
    before = derive_properties(facts(FACTS[:4]), passages(TURNS[:3]))
    after = derive_properties(facts(FACTS), passages(TURNS))
    report = compare(before, after)
    assert (report.kept, report.appended, report.closed, report.withdrawn) == (before.height, 1, 2, 0) and report.append_only
    links = [Properties.valid_to, Properties.supersedes]
    old = before.drop(links).sort(Properties.property_id)
    assert after.filter(pl.col(Properties.property_id).is_in(before[Properties.property_id].implode())).drop(links).sort(
        Properties.property_id).equals(old)
    # and a full rebuild gives the same table as the incremental one
    assert derive_properties(facts(FACTS), passages(TURNS)).equals(after)


def test_a_changed_input_is_reported_as_withdrawn_rows_not_silently_rewritten():
    before = derive_properties(facts(FACTS), passages(TURNS))
    changed = [*FACTS[:4], ("p_d", "Tomas", "move to", "Salford", "2024-09-01/2024-09-30")]
    report = compare(before, derive_properties(facts(changed), passages(TURNS)))
    assert report.withdrawn == 1 and not report.append_only


def test_as_of_a_date_gives_what_held_then_as_known_then_or_as_known_now():
    turns = TURNS + [("p_e", "s3", "Actually I left Chorlton in May.")]
    rows = [FACTS[0], FACTS[1], FACTS[3], ("p_e", "Tomas", "move to", "Salford", "2024-05-01/2024-05-31")]
    table_ = derive_properties(facts(rows), passages(turns))

    def where(frame):
        return sorted(frame.filter(pl.col(Properties.property) == "lives_in")[Properties.value].unique().to_list())

    assert where(held_on(table_, datetime(2024, 4, 1))) == ["Chorlton"]
    # in July the memory held Chorlton (the move was only said in October)...
    assert where(held_on(table_, datetime(2024, 7, 1), passages=passages(turns))) == ["Chorlton"]
    # ...while what is known now says Tomas lived in Salford by then
    assert where(held_on(table_, datetime(2024, 7, 1), known_then=False)) == ["Salford"]
    assert where(held_on(table_, datetime(2023, 1, 1))) == []


def test_the_history_line_marks_a_superseded_value_with_its_end():
    table_ = derive_properties(facts(FACTS), passages(TURNS))
    lives = table_.filter(pl.col(Properties.property) == "lives_in")
    line = history_line(lives, datetime(2024, 11, 1))
    # a restated value is one stretch of time, from its first statement
    assert line == "Tomas lives_in: Didsbury since 2024-09-01 (said 2024-10-20); earlier Chorlton from 2024-03-02 until 2024-09-01"
    # as of April, the move is not known yet: Chorlton holds
    assert history_lines(table_, ["p_a"], datetime(2024, 4, 1), limit=5, passages=passages(TURNS)) == [
        "Tomas lives_in: Chorlton since 2024-03-02 (said 2024-03-02)"]


def test_properties_named_by_the_vocabulary_and_the_rule():
    assert name_property("get", "job at the city library").property == "works_at"
    assert name_property("get", "job at the city library").value == "city library"
    kids = name_property("have", "two kids")
    assert (kids.property, kids.value, kids.dtype, kids.single_valued) == ("kids_count", "2", "number", True)
    assert name_property("have", "seven months").property == "have"  # a measure, not a count
    assert name_property("marry in", "Lisbon").property == "marry_in" and not is_single_valued("marry_in")
    assert is_single_valued(name_property("move to", "Seattle").property)
    assert is_single_valued("coach") and not is_single_valued("sister")
    assert canonical_name("Lives In") == "lives_in" and canonical_name("moved-to") == "moved_to" and canonical_name("move to") == "lives_in"


@pytest.mark.parametrize("value,declared,expected", [
    ("3", None, ("3", "number")), ("three", None, ("3", "number")), ("Yes", None, ("true", "boolean")),
    ("2023-05-07", None, ("2023-05-07", "date")), ("2023-05", "date", ("2023-05", "date")),
    ("pottery class", "number", ("pottery class", "string")), ("  LGBTQ   support group ", None, ("LGBTQ support group", "string")),
])
def test_values_are_typed_and_a_declared_type_must_fit_the_value(value, declared, expected):
    assert typed_value(value, declared) == expected


def test_stated_properties_replace_the_derived_ones_of_their_passage_only():
    stated = {"p_d": [StatedProperty("Tomas", "lives in", "Didsbury", "string", "2024-09"),
                      StatedProperty("Tomas", "garden_count", "1", "number", None)]}
    table_ = derive_properties(facts(FACTS), passages(TURNS), stated)
    from_d = table_.filter(pl.col(Properties.passage_id) == "p_d")
    assert sorted(from_d[Properties.property].to_list()) == ["garden_count", "lives_in"]
    assert set(from_d[Properties.source].to_list()) == {"llm"}
    assert from_d.filter(pl.col(Properties.property) == "lives_in")[Properties.valid_from].item() == datetime(2024, 9, 1)
    assert table_.filter(pl.col(Properties.passage_id) == "p_a")[Properties.source].to_list() == ["t_0000000000000000"]


def test_ids_are_stable_and_the_schema_refuses_a_dangling_supersedes():
    a = derive_properties(facts(FACTS), passages(TURNS))
    assert a[Properties.property_id].to_list() == derive_properties(facts(FACTS), passages(TURNS))[Properties.property_id].to_list()
    broken = a.with_columns(pl.lit("v_0000000000000000").alias(Properties.supersedes))
    with pytest.raises(Exception, match="supersedes"):
        Properties.validate(broken, lazy=True)


def test_the_route_fusion_keeps_seems_order_and_lifts_what_both_routes_rank():
    from seem_dagster.retrieval.property_route import fuse

    seem = ["a", "b", "c", "d"]
    assert fuse(seem, [], 0.5) == seem
    assert fuse(seem, ["d"], 0.5)[:2] == ["d", "a"]  # 1/64 + 0.5/61 > 1/61
    assert fuse(seem, ["d"], 0.0) == seem


@pytest.mark.slow
def test_the_property_route_brings_the_current_value_first_on_the_sample(sample_store):
    from seem_dagster import backends
    from seem_dagster.config import PropertiesConfig, RetrievalConfig
    from seem_dagster.evaluation.methods import ids, rankers
    from seem_dagster.retrieval.load import load_index
    from seem_dagster.retrieval.property_route import property_ranking
    from seem_dagster.retrieval.query import encode_query

    index = load_index(sample_store, "priya-tomas")
    refs = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.source_ref].to_list()))
    query = encode_query("Where does Tomas live now?", datetime(2024, 11, 1), backends.extractor("embedded"), backends.embedder("minilm"))
    route = [refs[p] for p in property_ranking(index, query.vector, query.fact_vectors, PropertiesConfig())]
    assert route[:2] == ["s4-12", "s1-12"]  # the move (current value) first, then what it superseded
    # "now" asks for the latest statement, which latest_first already brings up; without it the
    # route's own share shows.
    ranked = rankers(RetrievalConfig(latest_first=False), ["seem", "seem+properties"], PropertiesConfig())
    seem, fused = ([refs[p] for p in ids(r(index, query))] for r in ranked.values())
    assert fused.index("s4-12") < seem.index("s4-12")


def test_scoring_pairs_rows_one_to_one_and_reads_times_as_days_within_the_gold_interval():
    from seem_dagster.properties.scoring import Gold, Predicted, score

    gold = [Gold("s1", "Tomas", "lives_in", "Chorlton", "2024-03-02", "2024-09-01/2024-09-30", True),
            Gold("s2", "Tomas", "adopted", "beagle", "2024-04-13", None, False, ("adopt",)),
            Gold("s3", "Priya", "coach", "Marta")]
    predicted = [Predicted("s1", "tomas", "live_in", "Chorlton", datetime(2024, 3, 2, 19, 5), datetime(2024, 9, 1), True),
                 Predicted("s2", "Tomas", "adopt", "a beagle", datetime(2024, 4, 14), None, False),
                 Predicted("s2", "Tomas", "adopt", "a beagle", datetime(2024, 4, 13), None, False),
                 Predicted("s3", "Priya", "coach", "Marta", datetime(2024, 4, 14), None, True)]
    s = score(gold, predicted)
    assert (s.matched, s.precision, s.recall) == (3, 0.75, 1.0)
    assert (s.dated, s.valid_from_correct, s.ended, s.valid_to_correct) == (2, 1, 1, 1)  # the first s2 row took the pair
    assert s.single_valued_agree == 2 and len(s.extra) == 1 and not s.missed


def test_the_property_benchmark_prints_precision_and_recall_on_the_hand_labelled_sample(capsys):
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("property_extraction", ROOT / "benchmarks" / "property_extraction.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    gold = bench.load_gold(ROOT / "data" / "sample_properties.jsonl")
    assert len(gold) >= 40 and {g.turn for g in gold} >= {"s1-12", "s3-11", "s4-12"}
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert f"{len(gold)} gold properties" in out and "precision" in out and "recall" in out
    # measured 2026-12-02: precision 0.48, recall 0.49; the three lives_in/works_at changes are among the matches
    precision = float(out.split("precision ")[1].split()[0])
    recall = float(out.split("recall ")[1].split()[0])
    assert 0.3 <= precision <= 1 and 0.3 <= recall <= 1
