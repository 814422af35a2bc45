"""The episodic layer through real Dagster runs: checks, cache hits, incremental sessions."""

import pytest
from dagster import AssetKey, DagsterInstance

from conftest import SAMPLE, SAMPLE_QUESTIONS, tree
from seem_dagster.defs.assemble import build_defs
from seem_dagster.defs.runner import build_conversations
from seem_dagster.registry import register_file
from seem_dagster.store import snapshot

pytestmark = pytest.mark.slow  # builds memories through Dagster; `make check` skips them

CID = "priya-tomas"
ASSETS = ["passages", "event_frames", "facts", "episodes", "properties"]


def _build(store, path, instance):
    register_file(store, str(path), "jsonl")
    (outcome,) = build_conversations(build_defs(tree(store)), [CID], instance=instance)
    assert outcome.success, outcome.error
    return outcome


def _meta(instance, asset):
    return {k: v.value for k, v in instance.get_latest_materialization_event(AssetKey(asset)).asset_materialization.metadata.items()}


def _checks(instance, run_id):
    return sorted(
        (e.event_log_entry.dagster_event.event_specific_data.check_name, e.event_log_entry.dagster_event.event_specific_data.passed)
        for e in instance.get_records_for_run(run_id).records
        if e.event_log_entry.dagster_event and e.event_log_entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
    )


def test_sessions_added_later_extract_only_new_turns_and_fuse_incrementally(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    early = [line for line in lines if '"session_id": "s4"' not in line]
    growing = tmp_path / "chat.jsonl"
    growing.write_text("\n".join(early) + "\n")
    store, instance = tmp_path / "store", DagsterInstance.ephemeral()

    first = _build(store, growing, instance)
    assert all(passed for _, passed in _checks(instance, first.run_id))
    assert _meta(instance, "event_frames")["extracted"] == len(early)
    before = snapshot.read_snapshot(store, CID, ["properties"])["properties"]

    growing.write_text("\n".join(lines) + "\n")  # session 4 arrives
    second = _build(store, growing, instance)
    checks = _checks(instance, second.run_id)
    assert ("episodes_provenance", True) in checks and ("event_frames_provenance", True) in checks
    assert all(passed for _, passed in checks), checks
    frames_meta = _meta(instance, "event_frames")
    assert (frames_meta["cache_hits"], frames_meta["extracted"]) == (len(early), len(lines) - len(early))
    episodes_meta = _meta(instance, "episodes")
    assert episodes_meta["fusion_mode"].startswith("incremental")
    assert episodes_meta["embedded"] == len(lines) - len(early)
    # Properties: session 4 appends rows and closes the one its move supersedes; history is not rewritten.
    assert ("properties_schema", True) in checks and ("properties_provenance", True) in checks
    props_meta = _meta(instance, "properties")
    assert (props_meta["kept"], props_meta["closed"], props_meta["withdrawn"]) == (before.height, 1, 0) and props_meta["appended"] > 0
    after = snapshot.read_snapshot(store, CID, ["properties"])["properties"]
    links = ["valid_to", "supersedes"]
    assert after.filter(after["property_id"].is_in(before["property_id"].implode())).drop(links).sort("property_id").equals(
        before.drop(links).sort("property_id"))
    closed = after.filter(after["property_id"].is_in(before.filter(before["valid_to"].is_null())["property_id"].implode())
                          & after["valid_to"].is_not_null())
    assert closed.select("entity", "property", "value").rows() == [("Tomas", "lives_in", "Chorlton")]

    # The same memory as building everything from scratch in a fresh store.
    fresh = tmp_path / "fresh"
    _build(fresh, SAMPLE, DagsterInstance.ephemeral())
    incremental = snapshot.read_snapshot(store, CID, ASSETS)
    rebuilt = snapshot.read_snapshot(fresh, CID, ASSETS)
    for asset in ASSETS:
        assert incremental[asset].equals(rebuilt[asset]), asset


def test_a_rebuild_with_nothing_new_hits_every_cache(tmp_path):
    store, instance = tmp_path / "store", DagsterInstance.ephemeral()
    _build(store, SAMPLE, instance)
    _build(store, SAMPLE, instance)
    frames_meta, episodes_meta = _meta(instance, "event_frames"), _meta(instance, "episodes")
    assert (frames_meta["cache_hits"], frames_meta["extracted"]) == (48, 0)
    assert (episodes_meta["embedding_cache_hits"], episodes_meta["embedded"]) == (48, 0)
    episodes = snapshot.read_table(snapshot.table_path(store, "episodes", CID))
    assert "sample_episode" in episodes_meta and 0 < episodes.height < 48
    assert episodes_meta["fusion_rate"] == round(1 - episodes.height / 48, 3)  # of the memory, not of this run
    assert episodes_meta["frames_fused_this_run"] == 0 and episodes_meta["fusion_mode"].startswith("incremental: 0 new frames")
    assert episodes_meta["fusion_config"]["threshold"] == 0.68


def test_a_new_extractor_version_fuses_its_frames_again_instead_of_keeping_stale_episodes(tmp_path, monkeypatch):
    from seem_dagster.episodic.extraction import embedded, summary

    store = tmp_path / "store"
    _build(store, SAMPLE, DagsterInstance.ephemeral())
    # Same frame ids (they name the passage), other summaries: what an extractor upgrade does.
    monkeypatch.setattr(embedded.EmbeddedExtractor, "version", "summaries-of-12-words")
    monkeypatch.setattr(summary, "MAX_SUMMARY_WORDS", 12)
    instance = DagsterInstance.ephemeral()
    _build(store, SAMPLE, instance)
    assert _meta(instance, "event_frames")["extracted"] == 48
    assert _meta(instance, "episodes")["fusion_mode"].startswith("full: frames of previous episodes have other summaries")
    fresh = tmp_path / "fresh"
    _build(fresh, SAMPLE, DagsterInstance.ephemeral())
    assert snapshot.read_snapshot(store, CID, ["episodes"])["episodes"].equals(snapshot.read_snapshot(fresh, CID, ["episodes"])["episodes"])


def test_query_job_turns_stored_questions_into_retrieved_context(tmp_path):
    from seem_dagster.schemas import Retrieved

    store, instance = tmp_path / "store", DagsterInstance.ephemeral()
    _build(store, SAMPLE, instance)
    register_file(store, str(SAMPLE), "jsonl", questions=str(SAMPLE_QUESTIONS))
    build_conversations(build_defs(tree(store)), [CID], instance=instance)
    (outcome,) = build_conversations(build_defs(tree(store)), [CID], instance=instance, job_name="query_memory")
    assert outcome.success, outcome.error
    table = snapshot.read_table(snapshot.table_path(store, "retrieved_context", CID))
    Retrieved.validate(table)
    assert table["question_id"].n_unique() == 12
    assert table.filter(table["rank"] == 1)["reason"].str.len_chars().min() > 0
    meta = _meta(instance, "retrieved_context")
    # As `seem demo` shows, every gold turn of the sample's questions is in the top 10.
    assert meta["questions"] == 12 and meta["latency_p50_ms"] > 0 and meta["evidence_recall_at_10"] == 1.0
    assert table.group_by("question_id").len()["len"].to_list() == [10] * 12  # query.k passages per question


def test_run_config_changes_a_setting_for_one_run_and_each_table_records_what_made_it(tmp_path):
    store, instance = tmp_path / "store", DagsterInstance.ephemeral()
    register_file(store, str(SAMPLE), "jsonl")
    defs = build_defs(tree(store))
    (result,) = build_conversations(defs, [CID], instance=instance,
                                    run_config={"resources": {"seem": {"config": {"fusion": {"threshold": 0.99}}}}})
    assert result.success, result.error
    footers = {a: snapshot.read_footer(snapshot.table_path(store, a, CID)) for a in ("passages", "event_frames", "facts", "episodes")}
    assert footers["episodes"]["stage"]["fusion"]["threshold"] == 0.99 and _meta(instance, "episodes")["fusion_config"]["threshold"] == 0.99
    assert {f["build_id"] for f in footers.values()} == {result.run_id}
    assert footers["episodes"]["upstream"] == {"event_frames": footers["event_frames"]["fingerprint"],
                                               "passages": footers["passages"]["fingerprint"], "facts": footers["facts"]["fingerprint"]}
    assert footers["passages"]["stage"]["source"]["path"] == str(SAMPLE)
    assert _meta(instance, "episodes")["made_from"] == footers["episodes"]["upstream"]
    # A run config the tree refuses fails the run before any step, with the setting named.
    (bad,) = build_conversations(defs, [CID], instance=instance, run_config={"resources": {"seem": {"config": {"llm": {"backend": "openai"}}}}})
    assert not bad.success and bad.error.endswith("settings [llm]: backend 'openai' needs a model name (llm.model, --model or "
                                                  "SEEM_LLM_MODEL) (set: llm.backend from dagster run config)")


def test_a_step_refuses_inputs_from_two_builds(tmp_path):
    from seem_dagster.schemas import Facts

    store, instance = tmp_path / "store", DagsterInstance.ephemeral()
    _build(store, SAMPLE, instance)
    # A rebuild that rewrote facts and died before the graph and the index: they still hold the old facts'.
    facts_path = snapshot.table_path(store, "facts", CID)
    old = snapshot.read_footer(facts_path)
    snapshot.write_snapshot(facts_path, snapshot.read_table(facts_path).head(3), asset="facts", conversation_id=CID,
                            build_id="died-half-way", upstream=old["upstream"], stage=old["stage"])
    (outcome,) = build_conversations(build_defs(tree(store)), [CID], instance=instance, job_name="query_memory")
    assert not outcome.success
    assert "tables come from different builds" in outcome.error and "another facts than the stored one (build died-hal)" in outcome.error
    assert snapshot.read_table(facts_path).height == 3 and Facts.fact_id in snapshot.read_table(facts_path).columns


def test_fusion_on_passage_vectors_embeds_no_summary(tmp_path):
    """fusion.vectors = passage: the judge compares the passages' vectors, which the retrieval index
    needs anyway, so the build embeds passages with MiniLM, pools most facts' vectors and every
    sentence's from that same pass and embeds only the rest of the facts alone (entity names go through the static table,
    synonyms.embedder), and no frame summary."""
    from seem_dagster.embeddings.cache import HASH, span_hash, text_hash
    from seem_dagster.retrieval.index import FACT, SENTENCE, fact_text, passage_spans, passage_text
    from seem_dagster.store.cache import ConversationCache

    store, instance = tmp_path / "store", DagsterInstance.ephemeral()
    register_file(store, str(SAMPLE), "jsonl")
    (outcome,) = build_conversations(build_defs(tree(store, {"fusion.vectors": "passage"})), [CID], instance=instance)
    assert outcome.success, outcome.error
    read = {name: snapshot.read_table(snapshot.table_path(store, name, CID)) for name in ("passages", "facts", "entities", "event_frames")}
    texts = {pid: passage_text(s, t) for pid, s, t in read["passages"].select("passage_id", "speaker", "text").iter_rows()}
    spans = passage_spans(read["passages"], read["facts"])
    pooled = [span_hash(texts[pid], ranges) for pid, items in spans.items() for _, _, ranges in items]
    pooled_ids = {f for items in spans.values() for kind, f, _ in items if kind == FACT}
    assert any(kind == SENTENCE for items in spans.values() for kind, _, _ in items)
    alone = [fact_text(s, r, o) for f, s, r, o in read["facts"].select("fact_id", "subject", "relation", "object").iter_rows() if f not in pooled_ids]
    cached = set(ConversationCache(store, CID).table("embeddings", "all-MiniLM-L6-v2")[HASH].to_list())
    assert alone and pooled and cached == {text_hash(t) for t in [*texts.values(), *alone]} | set(pooled)
    # The episodes step ran each passage through the model once, pooling its facts and sentences then: the index
    # step found them all in the cache and ran the model for the facts embedded alone only.
    assert _meta(instance, "retrieval_index")["embedded"] == len(set(alone))
    assert {text_hash(n) for n in read["entities"]["name"].to_list()} - cached  # names are not MiniLM's
    summaries = {text_hash(s) for s in read["event_frames"]["summary"].to_list()}
    assert summaries - cached  # the summaries differ from the passages, and none was embedded
    assert _meta(instance, "episodes")["fusion_config"]["vectors"] == "passage"
