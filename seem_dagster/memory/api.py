"""`Memory`: the one door to a store of memories, for Python, the CLI, the MCP server, the demo and the evaluation.

    with Memory.open("memories/") as memory:
        memory.add("alice", [{"speaker": "Alice", "text": "I moved to Leeds.", "timestamp": "2024-03-02T19:05:00"}])
        for hit in memory.search("alice", "Where does Alice live?"):
            print(hit.source_ref, hit.text, hit.reason)
        memory.forget("alice", turns=[...])

Writes (``add``, ``add_file``, ``forget``) build through the Dagster job ``build_memory`` like every
other input, one conversation per run, so the UI, the schedule, the sensor and a backfill see them.
Reads follow each conversation's manifest (``memory.published``): a long-lived `Memory` answers from
each new publish at its next call. Reads are safe from several threads; writes of one `Memory` run
one at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from datetime import time as day_time

import polars as pl

from seem_dagster.config import ConfigError, Layer, Resolved, RetrievalConfig, SeemConfig, resolve_standard
from seem_dagster.memory import writes
from seem_dagster.memory.errors import InvalidRequest, UnknownConversation, check_date, check_text
from seem_dagster.memory.published import Published
from seem_dagster.memory.records import Added, Forgotten, Hit, Recall, SeedFact
from seem_dagster.retrieval.context import Context
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.schemas import Passages, Properties
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id
from seem_dagster.store.sources import registered_conversations

MAX_QUESTION_CHARS = 4000
MAX_K = 1000
MAX_BUDGET = 1_000_000
MAX_NAME_CHARS = 200


def _layer(source: str, values: Mapping) -> Layer:
    """Settings as dotted keys ({"retrieval.top_facts": 8}) or sections ({"retrieval": {"top_facts": 8}})."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise ConfigError(f"{source}: a setting's name must be text, got {type(key).__name__}")
        if "." in key:
            flat[key] = value
        elif isinstance(value, Mapping):
            flat.update({f"{key}.{name}": v for name, v in value.items()})
        else:
            raise ConfigError(f"{source}: {key!r} is neither section.setting nor a section's mapping of settings")
    return Layer(source, flat)


def _moment(value, name: str, *, whole_day: bool = False) -> datetime | None:
    """A date or date-time given as a datetime, a date or ISO text; a bare day means its start, or with
    ``whole_day`` its end (everything said that day). A moment outside the supported dates is refused
    whichever way it is given."""
    if value is None or isinstance(value, datetime):
        return check_date(value, name)
    if isinstance(value, date):
        return check_date(datetime.combine(value, day_time.max if whole_day else day_time.min), name)
    if not isinstance(value, str) or len(value) > 40:
        raise InvalidRequest(f"{name} must be an ISO date (YYYY-MM-DD) or date-time, got {type(value).__name__}")
    from seem_dagster.ingest.dates import DateOutOfRange, parse_iso

    try:
        moment = parse_iso(value)
    except DateOutOfRange as err:
        raise InvalidRequest(f"{name}: {err}") from None
    except ValueError:
        raise InvalidRequest(f"{name} {value!r} is not an ISO date (YYYY-MM-DD)") from None
    if whole_day and len(value.strip()) == 10:
        moment = datetime.combine(moment.date(), day_time.max)
    return check_date(moment, name)


def _count(value, name: str, limit: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
        raise InvalidRequest(f"{name} must be a whole number from 1 to {limit}, got {value!r}")
    return value


class Memory:
    """Memories of conversations in one store. Open it with ``Memory.open``; use it as a context manager."""

    def __init__(self, resolved: Resolved):
        self.resolved = resolved
        self.config: SeemConfig = resolved.config
        self.store = str(self.config.store.root)
        self._writes = writes.Writer(self)
        # A forget a crash stopped is finished before anything is read of the store (``writes.Writer.recover``).
        self._published = Published(self.store, finish_forgets=self._writes.recover)
        self._sql_pool = None
        self._pool_lock = threading.Lock()
        self._closed = False
        self._writes.recover()

    @classmethod
    def open(cls, store: str | os.PathLike | None = None, config: str | os.PathLike | Mapping | Resolved | None = None,
             **settings) -> Memory:
        """``store``: a local folder or an fsspec URL (default: the configured ``store.root``).
        ``config``: a TOML/YAML/JSON file shaped like the configuration tree, a mapping shaped like it,
        or a resolved tree. ``settings``: any setting, ``retrieval={"top_facts": 8}`` or
        ``**{"retrieval.top_facts": 8}``. Precedence, lowest first: defaults, the file (``config``,
        else ``SEEM_CONFIG``), ``SEEM_*`` variables, ``config`` as a mapping, ``settings``, ``store``.
        Raises ConfigError naming any unknown setting or bad value."""
        top: list[Layer] = []
        path = None
        if isinstance(config, Mapping):
            top.append(_layer("Memory.open(config=...)", config))
        elif isinstance(config, str | os.PathLike):
            path = config
        elif config is not None and not isinstance(config, Resolved):
            raise ConfigError(f"Memory.open: config must be a file path, a mapping or a resolved tree, got {type(config).__name__}")
        if settings:
            top.append(_layer("Memory.open(settings)", settings))
        if store is not None:
            top.append(Layer("Memory.open(store=...)", {"store.root": str(store)}))
        resolved = config.over(*top) if isinstance(config, Resolved) else resolve_standard(path, top)
        return cls(resolved)

    def close(self) -> None:
        self._published.close()
        if self._sql_pool is not None:
            self._sql_pool.close()
        self._closed = True

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- what the store holds -------------------------------------------------------------------

    def conversations(self) -> list[str]:
        """Every conversation with a published memory in the store, sorted."""
        return registered_conversations(self.store)

    def _conversation(self, conversation_id) -> str:
        try:
            return check_conversation_id(conversation_id)
        except InvalidConversationId as err:
            raise InvalidRequest(f"conversation_id: {err}") from None

    def _loaded(self, conversation_id):
        cid = self._conversation(conversation_id)
        held = self._published.index(cid)
        if held is None:
            raise UnknownConversation(f"no memory of conversation {cid[:MAX_NAME_CHARS]!r} in this store")
        return held

    def index(self, conversation_id: str) -> MemoryIndex:
        """The conversation's memory as published now, in memory: its tables, vectors and graph
        (read-only; for notebooks and the evaluation)."""
        return self._loaded(conversation_id).index

    def unload(self, conversation_id: str) -> None:
        """Drop what this `Memory` holds in memory of a conversation (its next read loads it again):
        for a caller that reads many conversations once each, such as the evaluation."""
        self._drop_loaded(conversation_id)

    def _drop_loaded(self, conversation_id: str, sql_workers: bool = False) -> None:
        """``sql_workers``: the SQL workers are stopped too (after a forget, no process keeps the
        forgotten rows in its memory; the next query starts fresh ones)."""
        self._published.forget(conversation_id)
        if sql_workers:
            with self._pool_lock:
                pool, self._sql_pool = self._sql_pool, None
            if pool is not None:
                pool.close()

    def build_id(self, conversation_id: str) -> str:
        """The build (Dagster run) that published the conversation's memory as it is now: its base,
        when appends were published on it since (``commit``)."""
        return self._loaded(conversation_id).build_id

    def commit(self, conversation_id: str) -> str | None:
        """The last append commit on that build (None: the memory is the build's alone)."""
        held = self._loaded(conversation_id)
        return held.commits[-1] if held.commits else None

    # ---- reading --------------------------------------------------------------------------------

    def encode(self, conversation_id: str, question: str, date: datetime | str | None = None, *, facts: list | None = None,
               several: bool | None = None, retrieval: RetrievalConfig | None = None):
        """The question as retrieval reads it for this conversation (``retrieval.answer.encode``): what
        ``query`` ranks with, for the evaluation, which encodes once and ranks with every method.
        ``retrieval``: the retrieval settings to encode it for (default the memory's)."""
        from seem_dagster import backends
        from seem_dagster.retrieval.answer import encode

        index = self.index(conversation_id)
        when = _moment(date, "date") or index.passages[Passages.timestamp].max()
        config = self.config
        return encode(index, question, when, backends.extractor(config.extraction.extractor), backends.query_embedder(config.extraction.embedder),
                      retrieval or config.retrieval, facts=facts, several=several)

    def warm(self, writes: bool = False) -> None:
        """Load what a query needs (the question's parser, tagger and encoder) now rather than at the
        first query: a long-lived server calls it as it starts, so that its first callers do not wait
        seconds. ``writes``: also what an add needs (the extractor's date parser and the embedding
        model, seconds more): an agent that writes a turn per message calls ``warm(writes=True)``.
        Conversations' memories still load at their first read."""
        from seem_dagster import backends
        from seem_dagster.retrieval.query import encode_query, form_of

        config = self.config
        question = "Which two things did Alice do last week?"
        form_of(question, config.retrieval)
        extractor = backends.extractor(config.extraction.extractor)
        encode_query(question, datetime(2024, 1, 1), extractor, backends.query_embedder(config.extraction.embedder))
        if writes:
            from seem_dagster.episodic.extraction.interface import PassageInput

            said = PassageInput("p_0000000000000000", "warm", "Alice", "I moved to York last week and start a new job on Monday.",
                                datetime(2024, 1, 1), speakers=("Alice", "Bob"))
            extractor.extract([said])
            backends.embedder(config.extraction.embedder).encode_pooled([f"Alice: {said.text}"], [[]])

    def query(self, conversation_id: str, question: str, *, k: int | None = None, date: datetime | str | None = None,
              as_of: datetime | str | None = None, budget: int | None = None, answer: bool | None = None,
              context: bool = True) -> Recall:
        """Everything retrieval gives for one question: the top ``k`` turns with their reasons, the
        seed facts, the context within ``budget`` tokens, and (``answer``; default: when a model is
        configured) the answering model's answer. ``date``: the question's date (relative dates in it
        resolve against it; default the last turn's, or ``as_of``); ``as_of``: the memory as it stood
        then (later turns left out; a bare day counts whole). ``context`` False: the ranking alone
        (``Recall.context`` is then None; what ``search`` asks for)."""
        from seem_dagster import backends
        from seem_dagster.retrieval.answer import ask

        if not isinstance(question, str):
            raise InvalidRequest(f"the question must be text, got {type(question).__name__}")
        if not question.strip():
            raise InvalidRequest("the question is empty")
        check_text(question, "question")
        if len(question) > MAX_QUESTION_CHARS:
            raise InvalidRequest(f"the question is {len(question)} characters, over the limit of {MAX_QUESTION_CHARS}")
        k = _count(self.config.query.k if k is None else k, "k", MAX_K)
        budget = _count(self.config.query.budget_tokens if budget is None else budget, "budget", MAX_BUDGET)
        when, then = _moment(date, "date"), _moment(as_of, "as_of", whole_day=True)
        held = self._loaded(conversation_id)
        index, cid = held.index, index_id(held.index, conversation_id)
        config = self.config
        session = None
        if (config.llm.enabled if answer is None else answer) or (config.llm.enabled and config.retrieval.query_facts):
            if not config.llm.enabled:
                raise InvalidRequest("answer=True needs a language model: set llm.backend (see `seem config show --describe`)")
            from seem_dagster.retrieval.llm_session import LlmSession

            session = LlmSession(config.llm, self.store, cid)
        answered = ask(index, question, when, backends.extractor(config.extraction.extractor), backends.query_embedder(config.extraction.embedder),
                       config.retrieval, budget_tokens=budget, llm=session, as_of=then, property_lines=config.properties.context_lines,
                       answer=answer is not False and context, context=context)
        rows = index.rows
        hits = [Hit(rank, r.passage_id, rows[r.passage_id][Passages.source_ref], rows[r.passage_id][Passages.speaker],
                    rows[r.passage_id][Passages.text], rows[r.passage_id][Passages.timestamp], r.score, r.reason)
                for rank, r in enumerate(answered.result.ranked[:k], start=1)]
        seeds = [SeedFact(s.subject, s.relation, s.object, s.time, s.passage_id, s.score) for s in answered.result.seeds]
        calls = None
        if session is not None:
            calls = [{f: getattr(r, f) for f in ("prompt", "status", "cached", "calls", "prompt_tokens", "completion_tokens", "error")}
                     for r in session.records]
        return Recall(cid, question, answered.date, then, answered.result.mode, hits, seeds, answered.context, answered.seconds,
                      held.build_id, answered.answer, calls, held.commits[-1] if held.commits else None)

    def search(self, conversation_id: str, question: str, *, k: int = 10, date: datetime | str | None = None,
               as_of: datetime | str | None = None) -> list[Hit]:
        """The ``k`` turns that best answer ``question``, ranked, each with its reason (``query``)."""
        return self.query(conversation_id, question, k=k, date=date, as_of=as_of, answer=False, context=False).hits

    def context(self, conversation_id: str, question: str, *, budget: int | None = None, date: datetime | str | None = None,
                as_of: datetime | str | None = None) -> Context:
        """The context an answering model reads for ``question``, within ``budget`` tokens
        (``query.budget_tokens`` by default): turns in time order with dates, episodes, seed facts,
        property histories."""
        return self.query(conversation_id, question, budget=budget, date=date, as_of=as_of, answer=False).context

    def properties(self, conversation_id: str, entity: str | None = None, as_of: datetime | str | None = None) -> pl.DataFrame:
        """The property rows (entity, property, typed value, valid_from, valid_to, said_at, the turn),
        of one entity (a part of its name, any case) and/or those that held on ``as_of`` as known then."""
        from seem_dagster.graph.entities import normalise
        from seem_dagster.properties.as_of import held_on

        when = _moment(as_of, "as_of", whole_day=True)
        if entity is not None:
            if not isinstance(entity, str) or not entity.strip() or len(entity) > MAX_NAME_CHARS:
                raise InvalidRequest(f"entity must be non-empty text of at most {MAX_NAME_CHARS} characters")
            check_text(entity, "entity")
        index = self.index(conversation_id)
        props = index.properties if index.properties is not None else pl.DataFrame(schema={Properties.entity: pl.String})
        if when is not None and props.height:
            props = held_on(props, when, passages=index.passages)
        if entity is not None:
            wanted = normalise(entity)
            props = props.filter(pl.col(Properties.entity).map_elements(lambda e: wanted in normalise(e), return_dtype=pl.Boolean))
        return props.sort(Properties.entity, Properties.property, Properties.valid_from) if props.height else props

    def sql(self, query: str, conversation_id: str | Sequence[str] | None = None):
        """One read-only SELECT over the memory's views: of one conversation, of a list of them (the
        views hold those alone, whatever the SQL), or of all (None). A ``SqlResult`` (frame, types,
        truncated, seconds). It runs in a worker process under ``sql.memory_limit_mb`` (enforced by the
        operating system) and ``sql.timeout_s``; refused or failed SQL raises ``SqlRefused`` with one line."""
        check_text(query, "sql")
        conversations, key = self._sql_scope(conversation_id)
        return self._pool().query(self.store, conversations, key, query)

    def sql_schema(self, conversation_id: str | Sequence[str] | None = None) -> dict:
        """The views, their columns and row counts, the macros and limits; ``skipped``: conversations
        left out of the views, each with why."""
        conversations, key = self._sql_scope(conversation_id)
        return self._pool().describe(self.store, conversations, key)

    def _sql_scope(self, conversation_id):
        if isinstance(conversation_id, str):
            self._loaded(conversation_id)  # an unknown conversation is refused as everywhere
        elif conversation_id is not None:
            conversation_id = [self._conversation(c) for c in conversation_id]
            if not conversation_id:
                raise UnknownConversation("no conversation to query: the list is empty")
        key = self._published.sql_scope(conversation_id)
        if not any(k for _, k in key):
            raise UnknownConversation("no built conversation in this store: build one with `seem build` or `Memory.add`"
                                      if conversation_id is None else "none of these conversations has a memory in this store")
        return conversation_id, key

    def _pool(self):
        with self._pool_lock:
            if self._sql_pool is None:
                from seem_dagster.sql.pool import SqlPool

                self._sql_pool = SqlPool(self.config.sql)
            return self._sql_pool

    # ---- writing --------------------------------------------------------------------------------

    def add(self, conversation_id: str, turns: Iterable[Mapping] | Mapping, *, session_id: str | None = None) -> Added:
        """Append turns to the conversation's memory and build it. Each turn is a dict (or a ``Turn``)
        with ``speaker``, ``text``, optional ``timestamp`` (ISO text or a datetime; default now, UTC)
        and optional ``id`` (unique in the conversation). ``session_id``: default each turn's UTC day.
        Bad turns raise ``InputError`` (one line naming the turn and field) and nothing is written.
        Only the new turns are extracted. Raises ``BuildFailed`` when the build fails: the turns stay
        in the store's input log and the next build takes them."""
        return self._writes.add(self._conversation(conversation_id), turns, session_id)

    def add_file(self, path: str | os.PathLike, format: str | None = None, *, questions: str | os.PathLike | None = None,
                 conversations: Iterable[str] | None = None, rebuild: bool = False, progress: bool = False) -> list[Added]:
        """Register an input file (LoCoMo, LongMemEval or JSONL; ``format`` detected when omitted) and
        build each of its conversations; a conversation whose input and memory are current is not
        rebuilt unless ``rebuild``. The whole file is validated first: ``InputError`` and nothing
        written on bad input. Raises ``BuildsFailed`` (with every conversation's result) when a build
        fails. ``progress``: a progress bar on stderr."""
        return self._writes.add_file(str(path), format, None if questions is None else str(questions),
                                     list(conversations) if conversations else None, rebuild, progress)

    def forget(self, conversation_id: str, *, turns: Iterable[str] | str | None = None, session_id: str | None = None,
               speaker: str | None = None, before: datetime | date | str | None = None) -> Forgotten:
        """Forget turns, named by the id their input gave them (LoCoMo's ``D1:3``, a JSONL line's ``id``)
        or their passage id, and/or by session, speaker, or ``before`` a date (the criteria given all
        hold); nothing named forgets the whole conversation. The memory is rebuilt without them from
        what stays, and their text leaves every table, cache, older build and log of the store and the
        Dagster instance; tombstones (ids and keyed hashes) keep every later build from bringing them
        back. Unknown ids, a bad date or an empty selection raise ``InvalidRequest`` and change nothing."""
        return self._writes.forget(self._conversation(conversation_id), turns, session_id, speaker, _moment(before, "before"))


def index_id(index: MemoryIndex, fallback: str) -> str:
    return index.passages[Passages.conversation_id][0] if index.passages.height else fallback

