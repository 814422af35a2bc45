"""The tools, over one `Memory`: what an agent may call, each bounded and validated.

Every argument is treated as hostile: strings have length limits, counts have caps, dates must
parse, conversation ids must have a memory in the store and be in the caller's scope, SQL goes
through ``sql.guard`` and runs in a worker process under a memory bound (``sql.pool``). A refused
call raises ``ToolInputError`` with one line the agent can act on, naming no conversation but the
one it asked for. Reads go through `Memory`, so each call answers from the
conversation's memory as published at that moment (a rebuild is seen at the next call).
"""

from __future__ import annotations

import difflib
import json
import re
from datetime import datetime

import polars as pl

from seem_dagster.agent.tokens import Tenant
from seem_dagster.graph.entities import normalise
from seem_dagster.ingest.errors import InputError
from seem_dagster.memory import BuildFailed, InvalidRequest, Memory, WriterBusy
from seem_dagster.properties.as_of import held_on, history_lines
from seem_dagster.retrieval.as_of import parse_as_of
from seem_dagster.retrieval.index import MemoryIndex
from seem_dagster.schemas import Entities, Passages, Properties
from seem_dagster.sql.guard import SqlRefused
from seem_dagster.sql.output import as_records
from seem_dagster.store.keys import InvalidConversationId, check_conversation_id
from seem_dagster.store.snapshot import SnapshotError

MAX_TEXT = 2000
MAX_NAME = 200
MAX_K = 50
MAX_ROWS = 200
MAX_REMEMBER = 100  # turns in one remember call (an agent writes a message or a session at a time)
PER_ENTITY = 30
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the a an of to in on at for and or is was are were do does did what when where who which how with from by "
                  "about my your his her their our has have had".split())


class ToolInputError(ValueError):
    """A refused or failed call: one line for the agent."""


def _text(value: str, name: str, limit: int = MAX_TEXT, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be text")
    if len(value) > limit:
        raise ToolInputError(f"{name} is {len(value)} characters, over the limit of {limit}")
    if not empty_ok and not value.strip():
        raise ToolInputError(f"{name} is empty")
    return value.strip()


def _count(value: int, name: str, limit: int) -> int:
    if not isinstance(value, int) or value < 1 or value > limit:
        raise ToolInputError(f"{name} must be a whole number from 1 to {limit}, got {value!r}")
    return value


def _day(value: datetime | None) -> str | None:
    return value.isoformat(sep=" ", timespec="minutes") if value is not None else None


class MemoryTools:
    """The tools over one `Memory`, as one caller sees them. ``conversation_id``: the conversation a
    call that names none is about (and the only one `sql` and `schema` see). ``tenant``: a token's
    scope (`seem mcp --http`); every path (a named id, the default, SQL's views) holds only its
    conversations, and a conversation outside it is refused with the words used for one that does
    not exist, so no call tells a tenant what others hold. ``scoped`` gives a caller its own view
    over the same loaded memory."""

    def __init__(self, memory: Memory, conversation_id: str | None = None, tenant: Tenant | None = None):
        self.memory = memory
        self.store = memory.store
        self.config = memory.config
        self.default = conversation_id
        self.tenant = tenant

    def scoped(self, tenant: Tenant | None) -> MemoryTools:
        return self if tenant is None else MemoryTools(self.memory, None, tenant)

    def close(self) -> None:
        self.memory.close()

    # -- the scope -------------------------------------------------------------------------------

    def visible(self) -> list[str]:
        """The conversations with a memory this caller may read."""
        known = self.memory.conversations()
        return known if self.tenant is None else [c for c in known if self.tenant.may_read(c)]

    def conversation(self, conversation_id: str | None) -> str:
        """The conversation a call is about: the one named (with a memory in the store, and in the
        caller's scope), else the server's, else the only one the caller can read."""
        if conversation_id is None or conversation_id == "":
            if self.default is not None:
                return self.default
            known = self.visible()
            if len(known) == 1:
                return known[0]
            whose = "the store holds" if self.tenant is None else "this token reads"
            raise ToolInputError(f"name a conversation_id: {whose} {len(known)} conversations")
        try:
            check_conversation_id(conversation_id)
        except InvalidConversationId as err:
            raise ToolInputError(f"conversation_id: {err}") from None
        if (self.tenant is not None and not self.tenant.may_read(conversation_id)) or conversation_id not in self.memory.conversations():
            raise ToolInputError(f"conversation_id {conversation_id[:80]!r} is not in this store")
        return conversation_id

    def writable(self, conversation_id: str | None) -> str:
        """The conversation a write goes to: the one named (it may not have a memory yet), else the
        server's, else the token's only named conversation. A token writes only where it reads and
        only if made with ``--write``; anything else is refused in the same words whether or not the
        conversation exists."""
        if conversation_id is None or conversation_id == "":
            if self.default is not None:
                return self.default
            if self.tenant is not None and self.tenant.prefix is None and len(self.tenant.conversations) == 1:
                conversation_id = next(iter(self.tenant.conversations))
            else:
                raise ToolInputError("name the conversation_id to remember into")
        try:
            check_conversation_id(conversation_id)
        except InvalidConversationId as err:
            raise ToolInputError(f"conversation_id: {err}") from None
        if self.tenant is not None and not self.tenant.may_write(conversation_id):
            why = "" if self.tenant.write else " (an operator grants writing with `seem tokens add --write`)"
            raise ToolInputError(f"this token may not write to conversation_id {conversation_id[:80]!r}{why}")
        return conversation_id

    def _sql_scope(self) -> str | list[str] | None:
        if self.default is not None:
            return self.default
        if self.tenant is None:
            return None  # the operator's own server: every conversation
        known = self.visible()
        if not known:
            raise ToolInputError("none of this token's conversations has a memory yet")
        return known

    def index(self, conversation_id: str | None) -> MemoryIndex:
        cid = self.conversation(conversation_id)
        try:
            return self.memory.index(cid)
        except (SnapshotError, InvalidRequest) as err:
            raise ToolInputError(str(err)) from None

    def _sql(self, query: str) -> dict:
        try:
            return as_records(self.memory.sql(query, self._sql_scope()))
        except SqlRefused as err:
            raise ToolInputError(str(err)) from None
        except (SnapshotError, InvalidRequest) as err:
            raise ToolInputError(str(err)) from None

    # -- the tools -------------------------------------------------------------------------------

    def schema(self) -> dict:
        """The SQL views and columns, the property names in use (with counts), and the limits."""
        try:
            description = self.memory.sql_schema(self._sql_scope())
        except (SnapshotError, InvalidRequest) as err:
            raise ToolInputError(str(err)) from None
        description.pop("skipped", None)
        names = self._sql(f"SELECT {Properties.property}, {Properties.single_valued}, count(*) AS n FROM properties "
                          "GROUP BY 1, 2 ORDER BY n DESC, 1 LIMIT 40")["rows"] if "properties" in description["views"] else []
        description["property_names"] = [{"property": r[Properties.property], "single_valued": r[Properties.single_valued], "rows": r["n"]}
                                         for r in names]
        description["notes"] = ("properties: valid_to NULL = still holds; a single-valued property's later value supersedes the "
                                "earlier (supersedes names the row it replaced); properties_on(day) = what held on a day")
        return description

    def entity_lookup(self, name: str, conversation_id: str | None = None) -> dict:
        """Entities whose name is closest to ``name``, each with its current and past properties."""
        name = _text(name, "name", MAX_NAME)
        index = self.index(conversation_id)
        wanted = normalise(name)
        candidates: dict[str, str] = {}
        for eid, display, aliases in index.entities.select(Entities.entity_id, Entities.name, Entities.aliases).iter_rows():
            for alias in [display, *aliases]:
                candidates.setdefault(normalise(alias), eid)
        names = dict(zip(index.entities[Entities.entity_id].to_list(), index.entities[Entities.name].to_list()))
        scored: dict[str, float] = {}
        for alias, eid in candidates.items():
            score = difflib.SequenceMatcher(None, wanted, alias).ratio()
            if wanted and (f" {wanted} " in f" {alias} " or f" {alias} " in f" {wanted} "):
                score = max(score, 0.8)
            scored[eid] = max(scored.get(eid, 0.0), score)
        best = sorted((e for e in scored if scored[e] >= 0.5), key=lambda e: -scored[e])[:5]
        props = index.properties if index.properties is not None else pl.DataFrame(schema={Properties.entity_id: pl.String})
        refs = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.source_ref].to_list()))
        out = []
        for eid in best:
            rows = props.filter(pl.col(Properties.entity_id) == eid).sort(Properties.valid_from, descending=True)
            current = rows.filter(pl.col(Properties.valid_to).is_null())
            past = rows.filter(pl.col(Properties.valid_to).is_not_null())
            out.append({"entity": names[eid], "entity_id": eid, "match": round(scored[eid], 2),
                        "current": [_property(r, refs) for r in current.head(PER_ENTITY).iter_rows(named=True)],
                        "past": [_property(r, refs) for r in past.head(PER_ENTITY).iter_rows(named=True)],
                        "more": max(0, current.height - PER_ENTITY) + max(0, past.height - PER_ENTITY)})
        return {"query": name, "entities": out}

    def property_search(self, query: str = "", entity: str | None = None, property: str | None = None, as_of: str | None = None,
                        limit: int = 20, conversation_id: str | None = None) -> dict:
        """Property rows matching words of ``query`` (in entity, property or value), optionally of one
        entity or property, optionally only those that held on ``as_of`` (as known then)."""
        query = _text(query or "", "query", empty_ok=True)
        limit = _count(limit, "limit", MAX_ROWS)
        index = self.index(conversation_id)
        props = index.properties
        if props is None or props.height == 0:
            return {"rows": [], "note": "this memory has no properties"}
        if as_of:
            try:
                when = parse_as_of(_text(as_of, "as_of", 40))
            except ValueError:
                raise ToolInputError(f"as_of {as_of[:40]!r} is not an ISO date (YYYY-MM-DD)") from None
            props = held_on(props, when, passages=index.passages)
        if entity:
            wanted = normalise(_text(entity, "entity", MAX_NAME))
            props = props.filter(pl.col(Properties.entity).map_elements(lambda e: wanted in normalise(e), return_dtype=pl.Boolean))
        if property:
            wanted_p = re.sub(r"[^a-z0-9]+", "_", _text(property, "property", MAX_NAME).lower()).strip("_")
            props = props.filter(pl.col(Properties.property).str.contains(wanted_p, literal=True))
        words = [w for w in _WORD.findall(query.lower()) if w not in _STOP and len(w) > 2]
        if words:
            text = pl.concat_str([Properties.entity, Properties.property, Properties.value], separator=" ").str.to_lowercase()
            props = props.with_columns(pl.sum_horizontal([text.str.contains(w, literal=True).cast(pl.Int32) for w in words]).alias("_hits"))
            props = props.filter(pl.col("_hits") > 0).sort(["_hits", Properties.said_at], descending=True)
        else:
            props = props.sort(Properties.said_at, descending=True)
        refs = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.source_ref].to_list()))
        texts = dict(zip(index.passages[Passages.passage_id].to_list(), index.passages[Passages.text].to_list()))
        rows = [{**_property(r, refs), "entity": r[Properties.entity], "turn": texts[r[Properties.passage_id]][:300]}
                for r in props.head(limit).iter_rows(named=True)]
        return {"rows": rows, "total": props.height, "as_of": as_of or None}

    def sql(self, query: str) -> dict:
        """One read-only SELECT over the memory's views (``schema`` lists them)."""
        return self._sql(_text(query, "query", self.config.sql.max_chars))

    def search(self, question: str, date: str | None = None, k: int = 10, conversation_id: str | None = None) -> dict:
        """SEEM retrieval: the turns that answer ``question``, each with why it is there, and the
        histories of the properties they state."""
        question = _text(question, "question")
        k = _count(k, "k", MAX_K)
        try:
            when = datetime.fromisoformat(_text(date, "date", 40)) if date else None
        except ValueError:
            raise ToolInputError(f"date {date[:40]!r} is not an ISO date (YYYY-MM-DD)") from None
        cid = self.conversation(conversation_id)
        try:
            recall = self.memory.query(cid, question, k=k, date=when, answer=False, context=False)  # no context to render
            index = self.memory.index(cid)
        except (SnapshotError, InvalidRequest) as err:
            raise ToolInputError(str(err)) from None
        passages = [h.to_json() for h in recall.hits]
        histories = history_lines(index.properties, [h.passage_id for h in recall.hits], recall.date,
                                  limit=self.config.properties.context_lines, passages=index.passages) if index.properties is not None else []
        return {"question": question, "date": recall.date.date().isoformat(), "passages": passages,
                "seed_facts": [{"subject": s.subject, "relation": s.relation, "object": s.object, "time": s.time} for s in recall.seed_facts],
                "property_histories": histories}


    def remember(self, turns: list, session_id: str | None = None, conversation_id: str | None = None) -> dict:
        """Add turns to a conversation (``Memory.add``: the same validation, one line naming the turn
        and field); offered only when agent.allow_add is on. Searchable once it returns."""
        if not self.config.agent.allow_add:
            raise ToolInputError("remember is off on this server (agent.allow_add)")
        if not isinstance(turns, list) or not turns:
            raise ToolInputError("turns must be a non-empty list of {speaker, text, timestamp, id} objects")
        if len(turns) > MAX_REMEMBER:
            raise ToolInputError(f"{len(turns)} turns in one call, over the limit of {MAX_REMEMBER}: remember them in parts")
        cid = self.writable(conversation_id)
        try:
            done = self.memory.add(cid, turns, session_id=_text(session_id, "session_id", MAX_NAME) if session_id else None)
        except (InvalidRequest, InputError) as err:
            raise ToolInputError(str(err).split("\n")[0]) from None
        except WriterBusy as err:  # nothing was written
            raise ToolInputError(str(err).split("\n")[0]) from None
        except BuildFailed as err:  # the turns are kept in the input log; the next build takes them
            raise ToolInputError(f"the turns are stored but their build failed: {str(err).splitlines()[0] if str(err) else ''}") from None
        return {"conversation_id": cid, "status": done.status, "turns_added": done.turns_added, "turns": done.passages,
                "build_id": done.build_id, "commit": done.commit}

    def forget(self, turns: list[str] | None = None, session_id: str | None = None, speaker: str | None = None,
               before: str | None = None, conversation_id: str | None = None) -> dict:
        """Forget turns of the conversation (``Memory.forget``); offered only when agent.allow_forget is on."""
        if not self.config.agent.allow_forget:
            raise ToolInputError("forget is off on this server (agent.allow_forget)")
        if not (turns or session_id or speaker or before):
            raise ToolInputError("name what to forget: turns, session_id, speaker or before (a whole conversation is forgotten "
                                 "by its operator, not through this tool)")
        cid = self.conversation(conversation_id)
        try:
            done = self.memory.forget(cid, turns=turns or None, session_id=session_id or None, speaker=speaker or None,
                                      before=_text(before, "before", 40) if before else None)
        except InvalidRequest as err:
            raise ToolInputError(str(err)) from None
        return {"conversation_id": cid, "forgotten_turns": done.turns, "source_refs": list(done.source_refs),
                "turns_left": done.passages, "build_id": done.build_id}


def _property(r: dict, refs: dict) -> dict:
    return {"property": r[Properties.property], "value": r[Properties.value], "dtype": r[Properties.dtype],
            "valid_from": _day(r[Properties.valid_from]), "valid_to": _day(r[Properties.valid_to]), "said_at": _day(r[Properties.said_at]),
            "turn_ref": refs.get(r[Properties.passage_id])}


def as_json(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
