"""Language models as the method calls them: the engines (vLLM in process, any OpenAI-compatible
server), the cached client that batches, validates and records each call, and the versioned prompts,
one module each. What asks a model lives with its layer: extraction (``episodic.extraction.llm``),
the fusion judge (``episodic.judges``), query-time calls (``retrieval.llm_session``)."""
