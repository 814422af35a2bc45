"""Sentences as keys: a passage of several sentences is also matched by its best sentence, whose vector is
pooled from the passage's own forward pass, so a remark made in passing at the end of a long request
is not lost in the request's vector."""

from __future__ import annotations

import numpy as np
import pytest

from seem_dagster.retrieval.index import passage_text, sentence_id, sentence_passage, sentence_spans

CID = "p"
TURNS = [
    "Can you suggest a few impressive but easy dishes for a dinner party this weekend? I want to serve something seasonal, "
    "maybe with asparagus or fresh peas. Two of my guests are vegetarian and one cannot eat nuts, so the menu has to work "
    "for everyone. I'd also like a dessert I can make the day before. By the way, I just put ten neon tetras in my new tank.",
    "What are some good stretches to do after a long run? My calves have been tight lately and I want to avoid injuries.",
    "Which pet food brands are the healthiest for dogs, and how do I read the ingredient labels?",
    "I'm planning a trip to Lisbon in the autumn. Which neighbourhoods are best for walking and old cafes?",
    "Could you explain how compound interest works on a savings account? I keep hearing it matters a lot.",
    "What should I know before adopting a cat from a shelter? Do they need a lot of vet visits in the first year?",
    "Can you recommend some podcasts about history? I like long episodes for my commute.",
    "How do I keep basil alive on a windowsill? Mine always wilts after a week.",
    "How big should the water tank be in a camper van? I'm converting one this summer.",
    "The fuel tank of my new car seems smaller than the old one's. Is that normal for hybrids?",
]
# The passage prior alone (no walk, facts or RPE), where what a sentence adds shows in the order itself.
PRIOR = {"use_graph": False, "use_rpe": False, "fact_key_weight": 0.0}


def test_a_passage_of_several_sentences_has_one_span_per_sentence_with_the_speakers_name():
    text = "Can you recommend some plants? By the way, my tank has 10 neon tetras!  Thanks."
    spans = sentence_spans("user", text)
    whole = passage_text("user", text)
    assert [whole[a:b] for _, (a, b) in spans] == ["Can you recommend some plants?", "By the way, my tank has 10 neon tetras!", "Thanks."]
    assert all(whole[a:b] == "user" for (a, b), _ in spans)
    assert sentence_spans("user", "One sentence only, 2.5 kg of it.") == []  # its vector is the passage's own
    assert sentence_spans("user", "") == [] and sentence_id("conv:3", 1) == "conv:3#1"
    assert sentence_passage(sentence_id("a#b", 12)) == "a#b"  # a passage id may hold the separator


@pytest.mark.slow  # builds through Dagster
def test_a_remark_made_in_passing_lifts_its_turn_by_its_sentence(tmp_path):
    from seem_dagster import Memory

    store = tmp_path / "store"
    with Memory.open(store) as memory:
        memory.add(CID, [{"speaker": "user", "text": t, "timestamp": f"2023-05-{n + 1:02d}T10:00:00", "id": f"t{n}"}
                         for n, t in enumerate(TURNS)])
        index = memory.index(CID)
        rows = {index.passages["source_ref"][int(r)] for r in index.sentence_rows}
        # Every passage of two sentences or more has its sentences in the index, a passage of one has none.
        assert rows == {f"t{n}" for n, t in enumerate(TURNS) if len(sentence_spans("user", t)) > 1} and "t2" not in rows
        assert index.sentence_vectors.shape == (len(index.sentence_rows), index.passage_vectors.shape[1])
        assert np.allclose(np.linalg.norm(index.sentence_vectors, axis=1), 1.0, atol=1e-4)

    def top(settings):
        with Memory.open(store, retrieval={**PRIOR, **settings}) as memory:
            return [h.source_ref for h in memory.search(CID, "What did I put in my new tank?", k=3, date="2023-06-01")]

    whole, by_sentence = top({"sentence_weight": 0.0}), top({})
    # The camper van's and the car's tanks match the question as whole turns; the dinner-party request
    # only by its last sentence, which lifts it above one of them.
    assert whole.index("t0") > whole.index("t8") and by_sentence.index("t0") < by_sentence.index("t8"), (whole, by_sentence)
