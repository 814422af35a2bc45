"""The answering context under one token budget, on hand-made memories with hand-counted tokens."""

import pytest

from seem_dagster.retrieval.context import build_context, count_tokens, cut_to_tokens
from seem_dagster.retrieval.reasons import baseline
from seem_dagster.retrieval.search import Ranked, RetrievalResult, Seed
from tests.test_graph_retrieval import index, unit

# Hand counts: "## Conversation turns (in time order)" is 9 tokens (#, #, 6 words, 2 brackets);
# "[D1:0, 2024-01-01] Ann: turn 0" is 15 ([, D1, :, 0, ",", 2024, -, 01, -, 01, ], Ann, :, turn, 0).
TURNS_HEADER, TURN = 9, 15


def memory(n=3, groups=None):
    return index([("Ann", "adopt", "beagle", "p1")], [unit(1.0)], n, [unit(1.0)] * n, groups)


def ranked(*ids):
    return [Ranked(p, 1.0, baseline("test")) for p in ids]


def test_tokens_are_words_and_punctuation_marks():
    assert count_tokens("## Conversation turns (in time order)") == TURNS_HEADER
    assert count_tokens("[D1:0, 2024-01-01] Ann: turn 0") == TURN
    assert count_tokens("I'm off - bye!") == 7  # I ' m off - bye !
    assert cut_to_tokens("one two three four", 3) == "one two …"  # 2 words and the cut mark
    assert cut_to_tokens("one two", 5) == "one two"


def test_turns_fill_the_budget_in_rank_order_and_render_in_time_order():
    mem = memory()
    result = RetrievalResult(ranked("p2", "p0", "p1"), [], "dense", [])
    two = build_context(mem, result, TURNS_HEADER + 2 * TURN)  # 39: room for exactly two turns
    assert two.passage_ids == ["p2", "p0"] and two.tokens == 39 and two.cut is None
    assert two.text == ("## Conversation turns (in time order)\n"
                        "[D1:0, 2024-01-01] Ann: turn 0\n[D1:2, 2024-01-01] Ann: turn 2")
    one = build_context(mem, result, TURNS_HEADER + 2 * TURN - 1)  # 38: the second turn no longer fits
    assert one.passage_ids == ["p2"] and one.tokens == 24


def test_seed_facts_come_after_the_top_turn_with_their_dates_and_source():
    mem = memory()
    seed = Seed("t_1", "Ann", "adopt", "beagle", "2023-12-30", "p1", 0.9)
    undated = Seed("t_2", "Ann", "love", "walks", None, "p1", 0.8)
    result = RetrievalResult(ranked("p0", "p1"), [seed, undated], "graph", [])
    # facts header 7 (#, #, Facts, that, matched, the, question); "- (Ann; adopt; beagle) on 2023-12-30 [D1:1]" is 19
    # (-, (, Ann, ;, adopt, ;, beagle, ), on, 2023, -, 12, -, 30, [, D1, :, 1, ]); "- (Ann; love; walks) said 2024-01-01 [D1:1]" too.
    both = build_context(mem, result, TURNS_HEADER + TURN + 7 + 19 + 19)  # 69: p1's turn does not fit after them
    assert both.passage_ids == ["p0"] and both.tokens == 69
    assert both.text.endswith("## Facts that matched the question\n- (Ann; adopt; beagle) on 2023-12-30 [D1:1]\n"
                              "- (Ann; love; walks) said 2024-01-01 [D1:1]")
    short = build_context(mem, result, TURNS_HEADER + TURN + 7 + 19 + 18)  # the second fact does not fit: nothing more
    assert short.passage_ids == ["p0"] and "walks" not in short.text and short.tokens == 50


def test_an_undated_fact_whose_turn_is_in_the_context_gives_its_tokens_to_the_turns():
    mem = memory(4)
    dated = Seed("t_1", "Ann", "adopt", "beagle", "2023-12-30", "p1", 0.9)
    undated = Seed("t_2", "Ann", "love", "walks", None, "p1", 0.8)
    result = RetrievalResult(ranked("p0", "p1", "p2"), [dated, undated], "graph", [])
    # 84 = p0 24 + facts 7 + 19 + 19 + p1 15. With both facts p2 does not fit; p1 is in, so the undated
    # fact only restates it: left out, its 19 tokens take p2 (15): 24 + 7 + 19 + 15 + 15 = 80.
    ctx = build_context(mem, result, TURNS_HEADER + TURN + 7 + 19 + 19 + TURN)
    assert ctx.passage_ids == ["p0", "p1", "p2"] and ctx.tokens == 80
    assert "walks" not in ctx.text and ctx.text.endswith("## Facts that matched the question\n- (Ann; adopt; beagle) on 2023-12-30 [D1:1]")


def test_an_episode_frame_is_paid_for_once_with_the_first_turn_it_brings():
    mem = memory(4, groups=[["p0", "p1", "p2"], ["p3"]])
    result = RetrievalResult(ranked("p0", "p1", "p2", "p3"), [], "graph", [0])
    # events header 7 (#, #, Events, these, turns, belong, to); "- episode 0" is 3.
    ctx = build_context(mem, result, TURNS_HEADER + 3 * TURN + 7 + 3)
    assert ctx.passage_ids == ["p0", "p1", "p2"] and ctx.tokens == 64
    assert ctx.text.count("- episode 0") == 1 and "## Events these turns belong to" in ctx.text
    # p1 and the frame (15 + 7 + 3) do not fit in what p0 leaves (24); the top turn's own frame (10) still does.
    no_room = build_context(mem, result, TURNS_HEADER + 2 * TURN + 9)
    assert no_room.passage_ids == ["p0"] and no_room.tokens == 34 and no_room.text.endswith("turns belong to\n- episode 0")


def test_a_top_turn_longer_than_the_budget_is_cut_never_the_budget():
    mem = memory()
    mem.rows["p0"]["text"] = " ".join(f"w{i}" for i in range(100))
    result = RetrievalResult(ranked("p0", "p1"), [], "dense", [])
    ctx = build_context(mem, result, 40)  # header 9 + "[D1:0, 2024-01-01] Ann:" 13 leaves 18: 17 words and the mark
    assert ctx.tokens == 40 and ctx.cut == "p0" and ctx.passage_ids == ["p0"]
    assert ctx.text.endswith("Ann: " + " ".join(f"w{i}" for i in range(17)) + " …")


def test_a_budget_too_small_for_one_turn_is_refused():
    with pytest.raises(ValueError, match="at least 32 tokens"):
        build_context(memory(), RetrievalResult(ranked("p0"), [], "dense", []), 31)
