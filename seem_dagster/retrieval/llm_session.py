"""Query-time model calls for one conversation (query facts, the answer, the evaluation judge).

Results are cached in the store beside the build's (``_cache/llm-query/<backend>@<model>/``), so
asking the same question of the same snapshot twice costs one call.
"""

from __future__ import annotations

from datetime import datetime

from seem_dagster.config import LlmConfig
from seem_dagster.episodic.extraction.interface import Fact
from seem_dagster.episodic.extraction.llm import query_fact_list
from seem_dagster.llm.client import CallRecord, LlmClient
from seem_dagster.llm.engine import Engine
from seem_dagster.llm.engines import get_engine
from seem_dagster.llm.prompts import answer, judge
from seem_dagster.store.cache import ConversationCache


class LlmSession:
    def __init__(self, settings: LlmConfig, store: str, conversation_id: str, engine: Engine | None = None):
        self.settings = settings
        self.engine = engine or get_engine(settings)
        self.cache = ConversationCache(store, conversation_id)
        self.name = f"{settings.backend}@{settings.model}"
        self.client = LlmClient(self.engine, self.cache.kv("llm-query", self.name))
        self.records: list[CallRecord] = []

    def _keep(self, run) -> None:
        self.records.extend(run.records)
        if run.new_entries:
            self.cache.put_kv("llm-query", self.name, self.client.cache)

    def query_facts(self, question: str, date: datetime) -> list[Fact]:
        facts, run = query_fact_list(self.client, question, date.date().isoformat())
        self._keep(run)
        return facts

    def answer(self, question: str, date: datetime, context: str) -> dict | None:
        return self.answers([("answer", question, date, context)])[0]

    def answers(self, items: list[tuple[str, str, datetime, str]]) -> list[dict | None]:
        """(id, question, date, context) -> {answer, evidence} or None where the model failed; one batch."""
        run = self.client.run(answer.PROMPT, [(i, answer.payload(q, d.date().isoformat(), c)) for i, q, d, c in items])
        self._keep(run)
        return run.outputs

    def judge(self, items: list[tuple[str, str, str, str]]) -> list[dict | None]:
        """(question id, question, gold, answer) -> {correct, reason} or None where the judge failed."""
        run = self.client.run(judge.PROMPT, [(qid, judge.payload(q, gold, a)) for qid, q, gold, a in items])
        self._keep(run)
        return run.outputs
