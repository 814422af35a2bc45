"""The embedded default extractor: deterministic, CPU only, on spaCy's English pipeline.

Per passage: events and facts from the dependency parse (events_and_facts.py) and a one-sentence
summary that reads on its own (summary.py). A batch big enough is parsed by forked workers
(parse_pool.py), as many as ``scheduling`` allows; a parse gives the same result in any number.
"""

from __future__ import annotations

from collections.abc import Sequence

from seem_dagster.episodic.extraction import spacy_model
from seem_dagster.episodic.extraction.events_and_facts import extract_one
from seem_dagster.episodic.extraction.interface import PassageExtraction, PassageInput
from seem_dagster.episodic.extraction.parse_pool import WorkerPool
from seem_dagster.episodic.extraction.spacy_model import MODEL
from seem_dagster.scheduling import chunk_size, cores, parse_processes


class EmbeddedExtractor:
    name = "embedded-spacy"
    version = "7"

    def __init__(self, model: str = MODEL, batch_size: int = 64, processes: int = 1):
        self.model = model
        self.batch_size = batch_size
        self.processes = processes  # extraction.parse_processes: a parse gives the same docs in any number
        self._pool: WorkerPool | None = None  # started by the first batch worth it, kept for the process

    @property
    def nlp(self):
        return spacy_model.load(self.model)

    def extract(self, batch: Sequence[PassageInput]) -> list[PassageExtraction]:
        processes = parse_processes(self.processes, len(batch), self.batch_size)
        if processes == 1:
            with spacy_model.QUERY_LOCK:  # a query's parse and a build's in threads of one process take turns (one pipeline)
                return self.extract_here(batch)
        if self._pool is None:
            spacy_model.load(self.model)  # before the fork, so no worker loads it again
            self._pool = WorkerPool(self.extract_here, min(self.processes, cores()))
        return self._pool.map_chunks(batch, chunk_size(len(batch), self._pool.processes, self.batch_size))

    def extract_here(self, batch: Sequence[PassageInput]) -> list[PassageExtraction]:
        docs = self.nlp.pipe([inp.text for inp in batch], batch_size=self.batch_size)
        return [extract_one(inp, doc) for inp, doc in zip(batch, docs)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
