"""The configuration tree: every setting of seem-dagster and its default, in one place.

One typed, frozen model per stage (store, ingest, extraction, fusion, synonyms, retrieval, query,
llm, evaluation), nested under ``SeemConfig``. The pure modules take their own section
(``fuse(frames, config.fusion)``); the CLI, the Dagster resource and the evaluation resolve the
whole tree from files, the environment, ``--set`` and run config (``config/resolve.py``) and hand
the sections down. Nothing else defines a default. Descriptions are what ``seem config show`` and
the Dagster launchpad show.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seem_dagster import methods as registry

DEFAULT_API_KEY_ENV = "SEEM_LLM_API_KEY"


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False)

    def replace(self, **changes) -> Section:
        """A copy with ``changes`` applied and validated (pydantic's model_copy does not validate)."""
        return type(self).model_validate({**self.model_dump(), **changes})


class StoreConfig(Section):
    root: str = Field("assets", description="snapshot store: a local folder or an fsspec URL")
    inbox: str = Field("inbox", description="folder the inbox sensor watches for new or grown input files")
    writer_wait_s: float = Field(
        600.0, ge=0, description="how long a write (add, build, forget) waits for another writer of the same conversation "
        "on this host before it is refused in one line; 0: refused at once"
    )
    append: bool = Field(
        True, description="an add to a conversation whose memory is current is built in process and published as a "
        "commit on it (the same tables a build would make); off: every add is a run of the build job"
    )
    compact_after: int = Field(
        64, ge=1, description="commits a conversation's memory takes before the next add is built by the build job "
        "instead, which folds them into a fresh base (the nightly schedule and `seem build` compact too)"
    )
    compact_commits: int = Field(
        16, ge=1, description="commits on a conversation's memory at which the compaction sensor runs the build job for it "
        "(appends made while it runs are carried onto the fresh base; the sensor runs where the Dagster daemon does)"
    )

    @field_validator("root")
    @classmethod
    def _reachable(cls, root: str) -> str:
        from upath import UPath  # constructing one reads nothing; it refuses an unknown protocol

        if not root.strip():
            raise ValueError("the store root is empty")
        try:
            UPath(root)
        except (ValueError, ImportError) as err:
            raise ValueError(f"cannot open a store at {root!r}: {err}") from None
        return root


class IngestConfig(Section):
    max_turn_chars: int = Field(32_000, gt=0, description="a longer turn is rejected as bad input")
    allow_empty_turns: bool = Field(False, description="skip empty turns (each one reported) instead of rejecting the file")
    only_speakers: tuple[str, ...] | None = Field(
        None, description="keep only these speakers' turns (LongMemEval's official corpus: user); the rest are counted"
    )


class ExtractionConfig(Section):
    extractor: Literal["embedded"] = Field(
        "embedded", description="extractor without a language model (a model is chosen in llm.backend)"
    )
    embedder: Literal["minilm", "minilm-bf16"] = Field(
        "minilm", description="sentence embedder for passages, frames, facts and entity names (see synonyms.embedder); "
        "minilm-bf16: the same model with bfloat16 matrix products, about half the time on a CPU that has them natively "
        "(AVX512-BF16 or AMX; refused elsewhere), vectors at cosine 0.9999 with minilm's"
    )
    fact_vectors: Literal["pooled", "embedded"] = Field(
        "pooled", description="pooled: a fact's vector is the mean of its passage's token states where the extractor found "
        "it, from the pass that embeds the passage (no second pass of the model; dated facts, facts that state a "
        "single-valued property and facts without a place, such as a language model's, are still embedded alone); "
        "embedded: every fact's text embedded on its own, about 2 s more per 1,000 turns of build for no recall "
        "measured beyond noise (docs/experiments.md)"
    )
    parse_processes: int = Field(
        2, ge=1, description="processes that parse and extract a build's new turns (the same extractions in any number): "
        "workers started by the first build with more than one batch of 64 new turns, kept for the process; at most the cores "
        "this process may use, and none inside a daemonic process such as a Celery worker"
    )


class FusionConfig(Section):
    """The rule judge of associative fusion (fusion.py). Defaults: the best of
    benchmarks/tune_fusion.py's grid on LoCoMo dev (docs/experiments.md)."""

    candidates: int = Field(3, ge=1, description="most similar episodes the judge compares a new frame with")
    threshold: float = Field(0.68, description="judge score (cosine + bonuses) at which a frame joins an episode")
    min_similarity: float = Field(0.3, description="cosine below which a frame never joins, whatever the bonuses")
    adjacency_bonus: float = Field(0.0, description="bonus when the frame follows one of the episode's turns closely")
    adjacency_turns: int = Field(2, ge=0, description="turns within which a frame counts as adjacent")
    participant_bonus: float = Field(0.15, description="bonus for a shared named participant or place (not a speaker)")
    time_bonus: float = Field(0.0, description="bonus when the frame is within time_window_days of the episode")
    time_window_days: float = Field(14.0, ge=0, description="window of the time bonus")
    max_passages: int = Field(32, ge=1, description="an episode holds at most this many turns")
    link: Literal["max", "centroid"] = Field(
        "max", description="episode similarity: its closest member frame (max) or the centroid of its frames"
    )
    vectors: Literal["passage", "summary"] = Field(
        "passage", description="what the judge's cosine compares: the frames' passages, whose vectors the retrieval index "
        "needs anyway, or the frames' summaries, embedded for fusion alone (a dearer build, the same recall: docs/experiments.md)"
    )


class SynonymConfig(Section):
    threshold: float = Field(0.8, description="entity names with cosine at least this get a synonym edge")
    max_per_node: int = Field(100, ge=0, description="synonym edges per entity at most")
    embedder: Literal["extraction", "minilm-static"] = Field(
        "minilm-static", description="embedder of entity names: minilm-static, a static table distilled once (about 20 s, "
        "kept in ~/.cache/seem-dagster) from the installed MiniLM, or the extraction's (extraction.embedder): the same "
        "recall on both benchmarks for a fifth to a quarter of the graph step's time (docs/experiments.md)"
    )


class RetrievalConfig(Section):
    """Fact seeds, personalized PageRank over a passage prior, then Reverse Provenance Expansion.
    The values were measured with `seem eval` on the dev data; docs/experiments.md has the runs."""

    use_graph: bool = Field(True, description="seed PageRank from the question's facts (false: rank by the passage prior)")
    use_rpe: bool = Field(True, description="Reverse Provenance Expansion after ranking")
    use_synonyms: bool = Field(True, description="the walk follows the synonym edges between entity names (false: the "
                               "ablation without them, on the same memory)")
    top_facts: int = Field(5, ge=0, description="facts that seed the walk")
    query_facts: bool = Field(
        False, description="also match the question's own facts (read by the extractor, or by the language model when one is "
        "configured) against the memory's facts, beside the question's vector; each query then costs a parse"
    )
    min_fact_score: float = Field(0.3, description="a fact below this cosine with the question seeds nothing and is no key")
    fact_key_weight: float = Field(
        0.3, ge=0, description="facts as retrieval keys: a passage's prior gains this weight times its best fact's score "
        "above min_fact_score (0: off)"
    )
    damping: float = Field(0.5, gt=0, lt=1, description="PageRank: probability of continuing the walk (igraph's damping)")
    passage_share: float = Field(2.0, ge=0, description="weight of each passage's prior in the PageRank reset vector")
    lexical_weight: float = Field(
        0.5, ge=0, description="BM25 (scaled to the best passage's) added to the dense cosine in the prior: MiniLM misses names"
    )
    lexical_stems: bool = Field(
        True, description="BM25 matches a word by its Snowball stem (\"camped\" finds \"camping\"), in the prior and the bm25 and "
        "hybrid baselines (false: the exact word, an ablation of seem and of the prior)"
    )
    unnamed_weight: float = Field(
        1.0, ge=0, description="the question with the conversation's speakers' names taken out is matched against the passages "
        "too, with this weight beside the question's own cosine: every passage starts with its speaker's name, so a name in the "
        "question matches all of that speaker's turns alike (0: off, an ablation)"
    )
    unnamed_fact_weight: float = Field(
        0.5, ge=0, description="a fact's match with a question that names a speaker is the weighted mean of its cosine with the "
        "question and with the question without the speakers' names, this the latter's weight: a fact's vector holds its "
        "subject's name, which then matches all of that person's facts alike. A mean keeps the cosine's scale, so "
        "min_fact_score means what it did (0: off, an ablation; docs/experiments.md has the weights tried)"
    )
    compose_names: float = Field(
        0.6, ge=0, description="a question that names a speaker is encoded once, without the names, and its own vector is "
        "composed from that one plus this weight times each named speaker's name alone (a name's vector is encoded once and "
        "kept): one forward pass per question instead of two, the same recall within noise (0: the question encoded a second "
        "time as asked, an ablation; docs/experiments.md has the weights tried)"
    )
    answer_share: float = Field(
        0.35, ge=0, description="a reply inherits this share of the prior of the question turn it answers"
    )
    sentence_weight: float = Field(
        0.5, ge=0, description="a passage of several sentences gains this weight times what its best sentence matches beyond "
        "the whole passage (each sentence's vector is pooled from the passage's forward pass at build): a remark made in "
        "passing (\"Can you recommend some plants? By the way, my tank has 10 neon tetras\") is diluted in its turn's "
        "vector (0: off, an ablation; docs/experiments.md has the weights tried)"
    )
    list_breadth: bool = Field(
        True, description="a question that asks for several things (a plural noun after a leading what/which, or \"how many\") "
        "has RPE expand only its list_top_passages_rpe best matches: its items are spread across sessions, and expanding "
        "each of the top passages would give the slots after the top five to their neighbours (costs a tagging of the "
        "question, about 1.4 ms; false: such a question expanded as any other, an ablation)"
    )
    list_top_passages_rpe: int = Field(
        1, ge=0, description="with list_breadth, the top passages that RPE expands for a question that asks for several things "
        "(at most top_passages_rpe): the best match brings its nearest turns, name links and replies, as any question's "
        "anchors do, and the replies to questions among the top rpe_after follow; the other items the walk found keep their "
        "order after those (0: no RPE for such a question, the walk's ranking kept, an ablation; docs/experiments.md has "
        "what each count did)"
    )
    top_passages_rpe: int = Field(2, ge=0, description="top passages that RPE expands")
    rpe_after: int = Field(
        5, ge=0, description="the expanded turns are placed after this many ranked passages, so RPE never displaces the best matches"
    )
    rpe_within: int = Field(
        30, ge=1, description="an expanded turn must rank within this many passages of the walk: RPE reorders the neighbourhood "
        "of the best matches, it does not import turns the question does not reach"
    )
    rpe_max_per_episode: int = Field(2, ge=0, description="nearest turns each expanded passage brings")
    rpe_scope: Literal["episode", "session", "both"] = Field(
        "both", description="what RPE draws from: the anchor's fused episode, its session's neighbours, or both"
    )
    rpe_turn_window: int = Field(
        1, ge=0, description="session turns within this many turns of the original conversation are neighbours"
    )
    rpe_follow_reply: bool = Field(True, description="RPE also brings the reply to an expanded turn that asks a question")
    rpe_head_replies: bool = Field(
        True, description="RPE also brings the reply to a question among the top rpe_after passages (kept within rpe_within)"
    )
    rpe_name_turns: int = Field(
        3, ge=0, description="a proper name that at most this many turns mention links them in RPE (0: off)"
    )
    rpe_name_links: int = Field(2, ge=0, description="turns a name link brings at most")
    rerank: bool = Field(
        False, description="reorder the top rerank_depth passages by a logistic model over what the query already computed "
        "(the rank, the prior, the facts' match, replies, the speaker the question names, the list form, the turn's length), "
        "fitted on LoCoMo dev by benchmarks/train_rerank.py and bundled (retrieval/rerank_model.json; measured "
        "by adding it). Off: what it gains on held-out LoCoMo conversations is LoCoMo's way of marking evidence, and on "
        "a conversation marked otherwise (the bundled sample) it loses gold turns (README, docs/experiments.md)"
    )
    rerank_depth: int = Field(100, ge=1, description="passages the reranker reorders; the rest keep their order")
    time_weight: float = Field(
        0.8, ge=0, description="the question's time (\"10 days ago\", \"last Saturday\", \"in January\"): a passage about those "
        "days (its session's date or a fact's resolved time) gains this weight times how sure the reading is, less as its "
        "time lies farther outside them; the rest keep their score (0: off)"
    )
    time_relative: float = Field(
        0.25, ge=0, le=1, description="a time counted from the question's date (\"last week\", \"a month ago\") counts this "
        "share of one that names the calendar (\"on 16 June, 2023\", \"in February\", \"on 2/8\", \"on Valentine's day\"): a "
        "question may be worded from another day than the one it is asked on, which moves the first, not the second"
    )
    time_calendar: float = Field(
        1.0, ge=0, le=1, description="a time that names the calendar without its year (\"in February\", \"on March 15th\", \"on "
        "2/8\", \"on Valentine's day\": the year is the question's) counts this share of one that says its year; at "
        "time_relative it is read like a time counted from the question's date"
    )
    time_fact_weight: float = Field(
        0.3, ge=0, description="a fact dated in or near the question's time gains this much of its match, so the walk seeds "
        "from the facts of those days (0: off)"
    )
    split_events: bool = Field(
        False, description="a question about two or more events (\"X or Y first\", \"between X and Y\", quoted events, \"the "
        "order of\") is ranked once per event as well, and the rankings merged turn by turn, so each event's best turns reach "
        "the top"
    )
    latest_first: bool = Field(
        True, description="a question about what holds now or happened last (\"most recently\", \"currently\", \"still\"; "
        "not a request for advice, whose \"my current setup\" sets the scene): "
        "among the top latest_depth passages, those stating what the best one states (a property of the same name) are "
        "reordered latest first, and a turn whose single-valued property was superseded brings the turn that superseded it"
    )
    latest_depth: int = Field(10, ge=1, description="latest_first: passages at the top of the ranking it reorders")
    advice_lexical: float = Field(
        0.5, ge=0, description="a request for advice or ideas (\"can you recommend\", \"any tips\") matches the user's earlier "
        "turns by meaning: BM25's weight in its prior is multiplied by this (1: unchanged)"
    )

    @property
    def matches_unnamed(self) -> bool:
        """Whether a query needs the question's vector without the speakers' names (turns or facts use it)."""
        return bool(self.unnamed_weight or self.unnamed_fact_weight)

    @property
    def reads_form(self) -> bool:
        """Whether a query needs to know if the question asks for several things (list_breadth, the reranker)."""
        return (self.use_rpe and self.list_breadth) or self.rerank


class QueryConfig(Section):
    k: int = Field(10, ge=1, description="passages `seem query` prints and `retrieved_context` keeps per question")
    budget_tokens: int = Field(
        1500, ge=32, description="tokens of the whole context an answering model reads (turns, episode frames, seed facts)"
    )


class LlmConfig(Section):
    """The language model: ``embedded`` means none (the spaCy extractor builds the memory).

    ``response_format`` chooses how the schema reaches an HTTP server: ``json_schema`` (OpenAI,
    ``vllm serve``) or ``json_object`` with the schema inside it (llama.cpp's server, which answers
    500 to json_schema). The API key is read from the environment variable named by
    ``api_key_env`` at call time and never stored, so it cannot reach logs, metadata or tables.
    """

    backend: Literal["embedded", "openai", "vllm"] = Field(
        "embedded", description="embedded (no model), openai (any OpenAI-compatible server) or vllm (offline batch, GPU)"
    )
    model: str = Field("", description="model name as the server or vLLM knows it")
    base_url: str = Field("", description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field(DEFAULT_API_KEY_ENV, description="environment variable holding the API key (never printed)")
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema", description="json_schema (OpenAI, vllm serve) or json_object with the schema (llama.cpp's server)"
    )
    max_concurrency: int = Field(8, ge=1, description="HTTP requests in flight")
    timeout_s: float = Field(120.0, gt=0, description="seconds per HTTP request")
    max_retries: int = Field(4, ge=0, description="retries on 429, 5xx, timeouts and connection errors")
    backoff_s: float = Field(1.0, ge=0, description="first retry's wait; doubles each retry")
    max_tokens: int = Field(768, ge=1, description="cap on every reply's tokens (each prompt has its own lower cap)")
    # Bounds of an extraction reply: a server decoding by the schema (llama.cpp, vLLM) then always
    # closes the JSON; a small model would otherwise repeat itself up to max_tokens.
    max_events: int = Field(6, ge=0, description="events one turn's extraction may hold at most (part of the reply schema)")
    max_facts: int = Field(10, ge=0, description="facts one turn's extraction may hold at most (part of the reply schema)")
    max_field_chars: int = Field(200, ge=8, description="characters of any text in an extraction reply at most (part of the reply schema)")
    temperature: float = Field(0.0, ge=0, description="sampling temperature (0: the cache gives what a new call would)")
    tensor_parallel_size: int = Field(1, ge=1, description="vLLM offline batch: GPUs per model")
    max_model_len: int = Field(8192, ge=256, description="vLLM offline batch: context length")

    @model_validator(mode="after")
    def _reachable(self) -> LlmConfig:
        if self.backend != "embedded" and not self.model:
            raise ValueError(f"backend {self.backend!r} needs a model name (llm.model, --model or SEEM_LLM_MODEL)")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs a base URL (llm.base_url, --base-url or SEEM_LLM_BASE_URL), "
                             "e.g. http://127.0.0.1:8000/v1")
        return self

    @property
    def enabled(self) -> bool:
        return self.backend != "embedded"

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def describe(self) -> dict:
        """What may be shown (metadata, logs): everything but the key, which is only named."""
        return {"backend": self.backend, "model": self.model, "base_url": self.base_url, "response_format": self.response_format,
                "api_key_env": self.api_key_env, "api_key_set": self.api_key() is not None, "max_tokens": self.max_tokens,
                "reply_bounds": self.reply_bounds}

    @property
    def reply_bounds(self) -> tuple[int, int, int]:
        """(events, facts, characters of a text) an extraction reply may hold at most."""
        return self.max_events, self.max_facts, self.max_field_chars


class PropertiesConfig(Section):
    """The property memory at query time (the table itself is built with the facts)."""

    context_lines: int = Field(
        8, ge=0, description="single-valued property histories the answer context shows, current value first, superseded ones marked"
    )
    route_properties: int = Field(5, ge=1, description="the property route: best-matching properties whose histories bring passages")
    route_min_score: float = Field(0.45, description="the property route: a property below this cosine with the question brings nothing")
    route_weight: float = Field(0.5, ge=0, description="the property route: weight of its ranking in the fusion with SEEM's")


class SqlConfig(Section):
    """`seem sql` and the agent's sql tool: DuckDB over one consistent snapshot, read-only and bounded."""

    max_rows: int = Field(1000, ge=1, description="rows returned at most; more are cut and the result says so")
    timeout_s: float = Field(10.0, gt=0, description="a query still running after this many seconds is interrupted")
    max_chars: int = Field(20_000, ge=1, description="longest SQL text accepted")
    memory_limit_mb: int = Field(
        1024, ge=16, description="a query's memory in MB: DuckDB's limit, and the bound the operating system enforces on the "
        "worker process that runs it, beyond the tables it holds (a query over it fails alone, with one line)",
    )
    threads: int = Field(1, ge=1, description="DuckDB threads per query")
    workers: int = Field(
        2, ge=1, le=32, description="worker processes that run SQL, each under its memory bound; queries beyond them wait",
    )
    max_result_mb: int = Field(32, ge=1, description="largest result a query returns, in MB (a bigger one is refused with why)")


class AgentConfig(Section):
    """`seem ask --agent`: a tool-using answerer over llm.base_url's chat API (OpenAI tool calls); and
    what `seem mcp` offers agents."""

    max_tool_calls: int = Field(40, ge=1, description="tool calls per question at most (APEX-MEM caps at 40); then the answer is forced")
    max_turns: int = Field(12, ge=1, description="model requests per question at most")
    max_result_chars: int = Field(8000, ge=100, description="a tool result longer than this is cut before the model reads it")
    max_tokens: int = Field(512, ge=1, description="cap on each model reply's tokens")
    allow_forget: bool = Field(
        False, description="`seem mcp` offers a forget tool (off: an agent must not erase memory because a prompt told it to)",
    )
    allow_add: bool = Field(
        False, description="`seem mcp` offers a remember tool that adds turns (`Memory.add`, validated alike); over HTTP only "
        "tokens made with `seem tokens add --write` may call it, on their own conversations",
    )
    tokens_file: str | None = Field(
        None, description="`seem mcp --http`: the file of bearer tokens (hashes only; `seem tokens add` writes it), each "
        "scoped to its conversations; without it the server runs only on loopback, open to every conversation",
    )
    call_timeout_s: float = Field(30.0, gt=0, description="`seem mcp --http`: a tool call still running after this is answered "
                                  "with an error (its SQL worker is stopped; a search finishes in the background)")
    max_request_bytes: int = Field(1_000_000, ge=1024, description="`seem mcp --http`: the largest request body accepted")
    concurrent_calls: int = Field(8, ge=1, le=256, description="`seem mcp --http`: tool calls run at once per server process; "
                                  "more wait their turn")
    http_processes: int = Field(
        2, ge=1, le=64, description="`seem mcp --http`: server processes sharing the port, each with its own loaded models "
        "(about 0.5 GB): retrieval is Python, so one process uses about one core whatever its threads",
    )


# The methods are named in seem_dagster.methods (the registry); here only checked against it.
def _known_methods(names: tuple[str, ...]) -> tuple[str, ...]:
    known = registry.names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r}; choose from {', '.join(known)}")
    return names


class EvaluationConfig(Section):
    methods: tuple[str, ...] = Field(default_factory=registry.defaults, min_length=1,
                                     description="retrieval methods `seem eval` compares (seem_dagster/methods.py names them)")
    ks: tuple[int, ...] = Field((5, 10, 25, 50), min_length=1, description="LoCoMo recall cut-offs")
    budgets: tuple[int, ...] = Field((500, 1000, 2000), description="LoCoMo recall within these context budgets (tokens)")
    granularities: tuple[Literal["session", "turn"], ...] = Field(
        ("session", "turn"), min_length=1, description="LongMemEval levels scored"
    )
    corpus: Literal["user", "all"] = Field(
        "user", description="LongMemEval turns in the memory: the official protocol's user turns, or all"
    )
    answer_methods: tuple[str, ...] = Field(registry.ANSWERED, description="with a language model: methods answered and judged")
    answer_budget: int = Field(1500, ge=32, description="with a language model: context tokens per answer")

    _methods_known = field_validator("methods", "answer_methods")(_known_methods)

    @model_validator(mode="after")
    def _positive(self) -> EvaluationConfig:
        if any(k <= 0 for k in self.ks):
            raise ValueError("ks must be positive integers")
        if any(b < 32 for b in self.budgets):
            raise ValueError("budgets must be at least 32 tokens (one turn with its date and speaker)")
        return self


class ExecutionConfig(Section):
    """Which of Dagster's executors runs a run's steps. It is chosen when the definitions are built
    (the code location, `seem build`, each Celery worker), so it is not a per-run setting: every process
    of one deployment must resolve the same value (same SEEM_CONFIG or SEEM_EXECUTION_* environment)."""

    executor: Literal["in_process", "multiprocess", "celery", "k8s"] = Field(
        "in_process", description="in_process (one process per run: tests, `seem build`), multiprocess (a process per step, "
        "one machine), celery (steps on Celery workers: dagster-celery), k8s (a pod per step: dagster-k8s)"
    )
    max_concurrent: int = Field(0, ge=0, description="multiprocess: step processes at once (0: one per CPU)")
    celery_broker: str = Field(
        "redis://127.0.0.1:6379/0", description="celery: the broker URL the launcher and the workers share (a password in it: "
        "set it through SEEM_EXECUTION_CELERY_BROKER, never a file)"
    )
    celery_backend: str = Field("redis://127.0.0.1:6379/1", description="celery: the result backend URL")
    k8s_config: str = Field(
        "", description="k8s: a YAML file of k8s_job_executor's config (per-step resources, the GPU node selector of "
        "extraction), e.g. deploy/k8s/executor.yaml; empty: the executor's defaults"
    )


class SeemConfig(Section):
    store: StoreConfig = StoreConfig()
    ingest: IngestConfig = IngestConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    fusion: FusionConfig = FusionConfig()
    synonyms: SynonymConfig = SynonymConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    query: QueryConfig = QueryConfig()
    llm: LlmConfig = LlmConfig()
    properties: PropertiesConfig = PropertiesConfig()
    sql: SqlConfig = SqlConfig()
    agent: AgentConfig = AgentConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    execution: ExecutionConfig = ExecutionConfig()
