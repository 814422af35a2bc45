"""MiniLM's vector of a text is the same whatever it is embedded with: a new session's turns, embedded
alone, get the vectors a full build gives them (fusion's near-ties follow the last bits)."""

import numpy as np
import pytest

from seem_dagster.embeddings.models import MiniLMEmbedder, native_bf16

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday.",
    "Melanie: We went camping with the kids last weekend!",
    "Caroline went to support group",
    "Melanie went camping",
    "Melanie painted sunrise",  # the same token count as another fact: one batch
    "Caroline: " + "It was a long day at the shelter, but the kids loved the new books we brought. " * 6,
    "ok",
]


def test_a_text_gets_the_same_vector_alone_in_any_batch_and_in_any_order():
    minilm = MiniLMEmbedder(batch_size=2)
    together = minilm.encode(TEXTS)
    assert together.shape == (len(TEXTS), 384) and np.allclose(np.linalg.norm(together, axis=1), 1, atol=1e-6)
    for i, text in enumerate(TEXTS):
        assert np.array_equal(minilm.encode([text])[0], together[i]), text
    order = [4, 0, 6, 2, 5, 1, 3]
    assert np.array_equal(MiniLMEmbedder(batch_size=64).encode([TEXTS[i] for i in order]), together[order])


def test_the_vectors_are_minilms_usual_ones_to_the_last_bits():
    """The model's usual way (the batch padded to its longest text, padding masked out of the mean)."""
    import torch

    minilm = MiniLMEmbedder()
    tokenizer, model, limit = minilm._loaded
    with torch.inference_mode():
        features = tokenizer(TEXTS, padding=True, truncation=True, max_length=limit, return_tensors="pt")
        tokens = model(**features).last_hidden_state
        mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        padded = torch.nn.functional.normalize((tokens * mask).sum(1) / mask.sum(1), dim=1).numpy()
    assert np.abs(minilm.encode(TEXTS) - padded).max() < 1e-5


needs_bf16 = pytest.mark.skipif(not native_bf16(), reason="this CPU has no native bfloat16 (minilm-bf16 is refused here)")


@needs_bf16
def test_bf16_vectors_are_minilms_to_four_nines_and_do_not_depend_on_their_batch():
    fp32, bf16 = MiniLMEmbedder(), MiniLMEmbedder(batch_size=2, precision="bf16")
    assert bf16.name == "all-MiniLM-L6-v2 bf16" != fp32.name  # other vectors: other cache keys and build records
    together = bf16.encode(TEXTS)
    assert together.dtype == np.float32 and np.allclose(np.linalg.norm(together, axis=1), 1, atol=1e-6)
    assert ((together * fp32.encode(TEXTS)).sum(axis=1) > 0.9999).all()
    for i, text in enumerate(TEXTS):
        assert np.array_equal(bf16.encode([text])[0], together[i]), text


def test_bf16_is_refused_on_a_cpu_without_it(monkeypatch):
    from seem_dagster.embeddings import models

    monkeypatch.setattr(models, "native_bf16", lambda: False)  # a stand-in for such a CPU: this one may have it
    with pytest.raises(RuntimeError, match="native bfloat16.*use minilm"):
        models.MiniLMEmbedder(precision="bf16").encode(["Melanie went camping"])
    with pytest.raises(ValueError, match="fp32 or bf16"):
        models.MiniLMEmbedder(precision="int8")


@needs_bf16
@pytest.mark.slow
def test_a_memory_built_with_bf16_says_so_and_the_fp32_model_builds_another(tmp_path):
    from conftest import build_sample, tree
    from seem_dagster.defs.assemble import build_defs
    from seem_dagster.defs.runner import build_conversations
    from seem_dagster.store.snapshot import read_table, table_path

    store = tmp_path / "store"
    build_sample(store, {"extraction.embedder": "minilm-bf16"})
    index = read_table(table_path(store, "retrieval_index", "priya-tomas"))
    assert set(index["model"].to_list()) == {"all-MiniLM-L6-v2 bf16"}
    # The same build with the fp32 model is another memory: it is built again, not reused.
    (again,) = build_conversations(build_defs(tree(store)), ["priya-tomas"])
    assert again.success and set(read_table(table_path(store, "retrieval_index", "priya-tomas"))["model"].to_list()) == {"all-MiniLM-L6-v2"}


def test_a_span_pooled_from_the_texts_own_pass_is_the_mean_of_its_tokens_states():
    """encode_pooled: the texts' vectors as encode gives them and, from the same forward pass, each span's
    tokens' mean state (special and padding tokens never count), whatever the batch."""
    import torch

    minilm = MiniLMEmbedder(batch_size=2)
    text = TEXTS[1]  # "Melanie: We went camping with the kids last weekend!"
    camping = ((0, 7), (text.index("went"), text.index("kids") + 4))  # the name, then "went camping with the kids"
    past_the_end = ((500, 600),)
    vectors, pooled = minilm.encode_pooled(TEXTS, [(), (camping, past_the_end)] + [()] * (len(TEXTS) - 2))
    assert np.array_equal(vectors, minilm.encode(TEXTS))
    assert pooled[0] == [] and pooled[1][1] is None
    tokenizer, model, limit = minilm._loaded
    features = tokenizer([text], return_offsets_mapping=True, return_tensors="pt")
    offsets = features.pop("offset_mapping")[0].tolist()
    words = [tokenizer.convert_ids_to_tokens(int(i)) for i in features["input_ids"][0]]
    chosen = [i for i, (a, b) in enumerate(offsets) if b > a and (b <= 7 or a >= camping[1][0] and b <= camping[1][1])]
    assert [words[i] for i in chosen] == ["melanie", "went", "camping", "with", "the", "kids"]
    with torch.inference_mode():
        states = model(**features).last_hidden_state[0]
    expected = torch.nn.functional.normalize(states[chosen].mean(0), dim=0).numpy()
    assert np.abs(pooled[1][0] - expected).max() < 1e-5
    alone = MiniLMEmbedder().encode_pooled([text], [(camping,)])[1][0][0]
    assert np.array_equal(alone, pooled[1][0])  # the batch does not change it
