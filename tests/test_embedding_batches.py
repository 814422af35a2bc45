"""MiniLM's vector of a text is the same whatever it is embedded with: a new session's turns, embedded
alone, get the vectors a full build gives them (fusion's near-ties follow the last bits)."""

import numpy as np

from seem_dagster.embeddings.models import MiniLMEmbedder

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
