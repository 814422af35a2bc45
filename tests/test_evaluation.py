"""The evaluation harness: metrics on hand-computed cases, then `seem eval` end to end on small real files."""

import json
from datetime import datetime

import pytest

from conftest import tree
from seem_dagster import methods as registry
from seem_dagster.cli import main
from seem_dagster.evaluation.methods import rrf_scores
from seem_dagster.evaluation.metrics import (
    evidence_recall,
    first_occurrences,
    is_abstention,
    longmemeval_session_gold,
    ndcg_any,
    normalise_locomo_evidence,
    recall_all,
    recall_any,
)
from seem_dagster.evaluation.sample import sample_sessions, write_sample_as_locomo
from seem_dagster.evaluation.scoring import LocomoQuestion, score_locomo, score_longmemeval, summarise_locomo

VALID = {"D1:3", "D1:4", "D8:6", "D9:17", "D11:26", "D30:5", "D2:1"}


@pytest.mark.parametrize(
    "raw, expected",
    [
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),  # joined with a semicolon
        (["D1:3 D1:4"], ["D1:3", "D1:4"]),  # joined with a space
        (["D:11:26"], ["D11:26"]),  # stray colon
        (["D30:05"], ["D30:5"]),  # zero-padded turn
        (["D"], []),  # bare "D"
        (["D7:7"], []),  # not in the conversation
        (["D2:1", "D2:1"], ["D2:1"]),  # repeated
        ([], []),
    ],
)
def test_locomo_evidence_normalisation(raw, expected):
    assert normalise_locomo_evidence(raw, VALID) == expected


def test_evidence_recall_counts_the_share_found_and_empty_evidence_as_one():
    assert evidence_recall(["a", "b"], ["x", "a", "y"], 2) == 0.5
    assert evidence_recall(["a", "b"], ["x", "a", "b"], 2) == 0.5
    assert evidence_recall(["a", "b"], ["x", "a", "b"], 3) == 1.0
    assert evidence_recall([], ["x"], 1) == 1.0


def test_locomo_summary_overall_and_categories_1_4():
    rows = [LocomoQuestion("1 multi-hop", {"recall@1": 1.0}), LocomoQuestion("4 single-hop", {"recall@1": 0.5}),
            LocomoQuestion("5 adversarial", {"recall@1": 0.0})]
    summary = summarise_locomo(rows)["recall@1"]
    assert summary["overall"] == pytest.approx(0.5)
    assert summary["categories_1_4"] == pytest.approx(0.75)
    assert summary["by_category"] == {"1 multi-hop": 1.0, "4 single-hop": 0.5, "5 adversarial": 0.0}


def test_longmemeval_recall_and_official_ndcg_by_hand():
    ranked = ["s3", "s1", "s2", "s4"]
    gold = {"s1", "s2"}
    assert recall_any(ranked, gold, 1) == 0.0 and recall_any(ranked, gold, 2) == 1.0
    assert recall_all(ranked, gold, 2) == 0.0 and recall_all(ranked, gold, 3) == 1.0
    # Official DCG: ranks 1 and 2 undiscounted, rank 3 divided by log2(3).
    # Actual at 3: 0 + 1 + 1/log2(3) = 1.6309; ideal at 3: 1 + 1 = 2.
    assert ndcg_any(ranked, gold, 3, corpus_size=4) == pytest.approx((1 + 1 / 1.5849625) / 2, rel=1e-6)
    assert ndcg_any(ranked, gold, 1, corpus_size=4) == 0.0
    assert ndcg_any(ranked, set(), 3, corpus_size=4) == 0.0
    # Empty gold: as the official code, recall_all is vacuously 1 and recall_any 0.
    assert recall_all(ranked, set(), 1) == 1.0 and recall_any(ranked, set(), 1) == 0.0


def test_turn_rankings_become_session_rankings_at_each_sessions_best_rank():
    assert first_occurrences(["s2", "s2", "s1", "s2", "s3"]) == ["s2", "s1", "s3"]
    scores = score_longmemeval(["s2", "s2", "s1", "s3"], {"s1"}, corpus_size=3, ks=(1, 2))
    assert scores["recall_any@1"] == 0.0 and scores["recall_any@2"] == 1.0


def test_longmemeval_noans_and_abstention_rules():
    # answer_b has no user turn with has_answer: by the official "noans" rule it is no gold.
    assert longmemeval_session_gold(["answer_a", "answer_b"], {"answer_a"}) == {"answer_a"}
    assert is_abstention("gpt4_2655b836_abs") and not is_abstention("gpt4_2655b836")


def test_recall_within_a_budget_counts_the_turns_the_context_holds_and_rrf():
    scores = score_locomo(["a", "c"], ["a", "b", "c"], [1, 3], {500: ["a"], 2000: ["a", "b", "c"]})
    assert scores == {"recall@1": 0.5, "recall@3": 1.0, "recall@budget500": 0.5, "recall@budget2000": 1.0}
    fused = rrf_scores([["a", "b", "c"], ["b", "c", "a"]])
    assert sorted(fused, key=lambda k: -fused[k]) == ["b", "a", "c"]  # 1/61+1/62 > 1/61+1/63 > 1/62+1/63


# --- end to end on the bundled sample, converted to each benchmark's real format -------------------


def _locomo_file(tmp_path):
    path = write_sample_as_locomo(tmp_path / "locomo_sample.json")
    data = json.loads(path.read_text())
    qa = data[0]["qa"]
    qa[1]["evidence"] = ["; ".join(qa[1]["evidence"])]  # the release's joined form
    qa.append({"question": "What does Priya think of open-domain trivia?", "answer": "unknown", "evidence": [], "category": 3})
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_seem_eval_locomo_end_to_end_and_reuses_the_built_memory(tmp_path):
    data, out = _locomo_file(tmp_path), tmp_path / "out"
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["methods"]) == set(registry.defaults())
    assert results["questions"] == 13 and results["passages"] == 48
    for name, figures in results["methods"].items():
        # A longer list never finds less, nor does a bigger context.
        at_k = [figures[f"recall@{k}"]["overall"] for k in (5, 10, 25, 50)]
        at_budget = [figures[f"recall@budget{b}"]["overall"] for b in (500, 1000, 2000)]
        assert at_k == sorted(at_k) and at_budget == sorted(at_budget), name
        # The empty-evidence open-domain question counts 1 for every method.
        assert figures["recall@5"]["by_category"]["3 open-domain"] == 1.0
        assert figures["recall@50"]["overall"] == pytest.approx(1.0)  # 50 >= all 48 turns
    # As `seem demo` shows: every gold turn of every sample question is in SEEM's top 10.
    assert results["methods"]["seem"]["recall@10"]["overall"] == 1.0
    assert results["methods"]["dense"]["recall@10"]["overall"] < 1.0
    timing = results["timing"]
    assert timing["conversations_built_this_run"] == 1
    assert {"extract_frames", "episodes", "build_graph", "retrieval_index"} <= set(timing["build_seconds_per_1k_passages"]["seem_stages"])
    latency = timing["query_latency"]
    assert latency["seem"]["queries"] == latency["dense"]["queries"] == 13
    assert latency["seem"]["p50_vs_dense"] == pytest.approx(latency["seem"]["p50_ms"] / latency["dense"]["p50_ms"])
    assert latency["hybrid"]["p50_vs_bm25"] == pytest.approx(latency["hybrid"]["p50_ms"] / latency["bm25"]["p50_ms"])
    for name in ("results.md", "recall_at_k.png", "recall_at_budget.png", "by_category.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "recall_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| seem |" in (out / "results.md").read_text()
    # Each part's change with its interval, paired over the same 13 questions.
    rows = {(r["with"], r["without"]): r["columns"] for r in results["differences"]["rows"]}
    structure = rows[("seem", "prior")]["recall@10 all"]
    assert structure["questions"] == 13 and structure["low"] <= structure["difference"] <= structure["high"]
    seem, prior = (results["methods"][m]["recall@10"]["overall"] for m in ("seem", "prior"))
    assert structure["difference"] == pytest.approx(seem - prior)
    assert "| seem - prior |" in (out / "results.md").read_text()

    # Second run: the memory is reused from the store, the figures are the same.
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet", "--methods", "seem,bm25"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["timing"]["conversations_reused"] == 1 and again["timing"]["conversations_built_this_run"] == 0
    assert again["methods"]["seem"] == results["methods"]["seem"]

    # The vector `seem` composes for a question that names a speaker is its own: dense and a method that
    # matches the question as asked rank with the question encoded as asked, and seem-encoded-names is
    # seem with it encoded (retrieval.compose_names 0), on the same memory.
    methods = ["--methods", "seem,dense,seem-named,seem-encoded-names"]
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet", *methods]) == 0
    composed = json.loads((out / "results.json").read_text())["methods"]
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet", *methods, "--set", "retrieval.compose_names=0"]) == 0
    encoded = json.loads((out / "results.json").read_text())["methods"]
    assert composed["dense"] == encoded["dense"] == results["methods"]["dense"] and composed["seem-named"] == encoded["seem-named"]
    assert composed["seem-encoded-names"] == encoded["seem"] == encoded["seem-encoded-names"]

    # A memory `seem build` made is evaluated as it is: no Dagster run, the same figures, no timings.
    built = tmp_path / "built"
    assert main(["build", "--input", str(data), "--format", "locomo", "--store", str(built), "--quiet"]) == 0
    published = json.loads(next((built / "_manifests").glob("*.json")).read_text())["build_id"]
    assert main(["eval", "locomo", "--data", str(data), "--out", str(tmp_path / "o2"), "--store", str(built), "--quiet",
                 "--methods", "seem"]) == 0
    third = json.loads((tmp_path / "o2" / "results.json").read_text())
    assert third["timing"]["conversations_reused"] == 1 and third["timing"]["conversations_untimed"] == 1
    assert json.loads(next((built / "_manifests").glob("*.json")).read_text())["build_id"] == published
    assert third["methods"]["seem"] == results["methods"]["seem"]


def _longmemeval_file(tmp_path):
    sessions, questions = sample_sessions()
    role = {"Priya": "user", "Tomas": "assistant"}
    gold_q = next(q for q in questions if q["question_id"] == "q6")  # s4-01, a Priya (user) turn
    items = []
    for qid, q, gold in (("lme-1", gold_q, set(gold_q["evidence"])), ("lme-2_abs", gold_q, set())):
        ids, dates, haystack = [], [], []
        for sid, ts in sessions.items():
            has = any(t["id"] in gold for t in ts)
            ids.append(f"answer_{sid}" if has or sid == "s3" else sid)  # s3: an answer session without has_answer (noans)
            dates.append(datetime.fromisoformat(ts[0]["timestamp"]).strftime("%Y/%m/%d (%a) %H:%M"))
            haystack.append([{"role": role[t["speaker"]], "content": t["text"], "has_answer": t["id"] in gold} for t in ts])
        items.append({"question_id": qid, "question_type": "single-session-user", "question": q["question"],
                      "answer": q["answer"], "question_date": "2024/11/01 (Fri) 10:00", "haystack_session_ids": ids,
                      "haystack_dates": dates, "haystack_sessions": haystack,
                      "answer_session_ids": [i for i in ids if i.startswith("answer_")]})
    path = tmp_path / "lme_sample.json"
    path.write_text(json.dumps(items))
    return path


@pytest.mark.slow
def test_seem_eval_longmemeval_end_to_end(tmp_path):
    data, out = _longmemeval_file(tmp_path), tmp_path / "out"
    assert main(["eval", "longmemeval", "--data", str(data), "--out", str(out), "--quiet", "--methods", "seem,dense,bm25"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["abstention_questions_excluded"] == 1 and results["questions"] == 1
    assert results["excluded_turns"] > 0  # the official corpus: user turns only
    for method, per in results["methods"].items():
        assert set(per) == {"session", "turn"}
        # One gold session (answer_s4; answer_s3 has no has_answer turn, so it is no gold by the noans
        # rule) and one gold turn, which every method ranks first: recall_all@1 would be 0 if s3 counted.
        for g in ("session", "turn"):
            assert {per[g][f"{m}@{k}"] for k in (1, 3, 5, 10, 30, 50) for m in ("recall_any", "recall_all", "ndcg_any")} == {1.0}, (method, g)
    for name in ("results.md", "recall_at_k_session.png", "recall_at_k_turn.png", "by_type.png"):
        assert (out / name).stat().st_size > 0
    # A second run reuses the memories (the user-turn option survives the build record's JSON).
    assert main(["eval", "longmemeval", "--data", str(data), "--out", str(out), "--quiet", "--methods", "seem"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["timing"]["conversations_built_this_run"] == 0 and again["timing"]["conversations_reused"] == 2


@pytest.mark.slow
def test_a_changed_memory_setting_rebuilds_the_memory_instead_of_reusing_it(tmp_path):
    from seem_dagster.store.snapshot import read_footer, read_table, table_path

    data, out = _locomo_file(tmp_path), tmp_path / "out"
    run = ["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet", "--methods", "seem"]
    assert main(run) == 0
    store = out / "store"
    before = read_table(table_path(store, "episodes", "sample-1"))
    assert main(run + ["--set", "fusion.threshold=0.8"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["timing"]["conversations_built_this_run"] == 1 and results["timing"]["conversations_reused"] == 0
    assert results["config"]["settings"]["fusion"]["threshold"] == 0.8 and results["config"]["settings_sources"]["fusion.threshold"] == "--set"
    assert read_footer(table_path(store, "episodes", "sample-1"))["stage"]["fusion"]["threshold"] == 0.8
    after = read_table(table_path(store, "episodes", "sample-1"))
    assert after.height > before.height  # a stricter judge fuses less: these are new episodes, not the old ones
    # The same setting again: the memory it built is reused; a query-time setting never rebuilds.
    assert main(run + ["--set", "fusion.threshold=0.8", "--set", "retrieval.top_facts=3"]) == 0
    assert json.loads((out / "results.json").read_text())["timing"]["conversations_reused"] == 1
    # A published memory without an evaluation's record (built by `seem build`, a schedule, the UI)
    # passed its blocking checks all the same: it is reused, and only its timings are missing.
    (store / "_eval" / "sample-1.json").unlink()
    assert main(run + ["--set", "fusion.threshold=0.8"]) == 0
    timing = json.loads((out / "results.json").read_text())["timing"]
    assert timing["conversations_built_this_run"] == 0 and timing["conversations_untimed"] == 1
    assert timing["build_seconds_per_1k_passages"]["seem_total"] is None
    assert "built outside `seem eval` and left no timings" in (out / "results.md").read_text()


def test_seem_eval_rejects_unknown_methods_and_bad_cut_offs(tmp_path, capsys):
    data = _locomo_file(tmp_path)
    assert main(["eval", "locomo", "--data", str(data), "--out", str(tmp_path / "o"), "--methods", "seem,colbert"]) == 2
    assert "colbert" in capsys.readouterr().err
    assert main(["eval", "locomo", "--data", str(data), "--out", str(tmp_path / "o"), "--k", "10,x"]) == 2
    assert "--k" in capsys.readouterr().err


def test_answer_token_f1_by_locomo_normalisation():
    from seem_dagster.evaluation.metrics import token_f1

    assert token_f1("A blue mug.", "a blue mug") == 1.0
    assert token_f1("The mug", "A blue mug") == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # precision 1, recall 1/2
    assert token_f1("Lisbon and Porto", "Porto, Lisbon") == 1.0
    assert token_f1("no idea", "Biscuit") == 0.0


def test_the_ablation_table_lists_the_parts_taken_away_with_their_change_from_the_prior():
    from seem_dagster.evaluation.report import _ablation

    def figures(r10, multi_hop):
        return {"recall@10": {"overall": r10, "by_category": {"1 multi-hop": multi_hop}}}

    results = {"benchmark": "locomo", "methods": {
        "prior": figures(0.700, 0.400), "seem": figures(0.760, 0.430), "seem-named": figures(0.740, 0.435),
        "prior-named": figures(0.650, 0.340), "bm25": figures(0.5, 0.2)}}
    lines = _ablation(results)
    rows = {line.split(" | ")[1]: line for line in lines if line.startswith("| ") and " | " in line}
    assert rows["prior"].endswith("| 0.700 | 0.400 |")
    assert rows["seem"].endswith("| 0.760 (+0.060) | 0.430 (+0.030) |")
    # The parts taken away come after the chain, in the same columns, against the same prior.
    assert rows["seem-named"].endswith("| 0.740 (+0.040) | 0.435 (+0.035) |")
    assert rows["prior-named"].endswith("| 0.650 (-0.050) | 0.340 (-0.060) |")
    assert list(rows) == ["method", "prior", "seem", "seem-named", "prior-named"]  # bm25 is no step


@pytest.mark.slow
def test_a_method_registered_here_is_evaluated_and_reported(tmp_path):
    """The registry is the one place a method is named: an entry added at run time is accepted by the
    configuration, ranked by the evaluation and shown in the report's ablation with its own label."""
    from seem_dagster.config import ConfigError
    from seem_dagster.methods import Method, Step

    with pytest.raises(ConfigError, match="unknown method 'seem-top1'"):
        tree(None, {"evaluation.methods": ["seem", "seem-top1"]})
    registry.register(Method("seem-top1", "seem seeding the walk from one fact", settings={"top_facts": 1},
                             step=Step("without", "seem with a single seed fact (a test's method)", "seem")))
    try:
        data, out = _locomo_file(tmp_path), tmp_path / "out"
        assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--quiet", "--methods", "prior,seem,seem-top1"]) == 0
        results = json.loads((out / "results.json").read_text())
        assert list(results["methods"]) == ["prior", "seem", "seem-top1"]
        assert results["timing"]["query_latency"]["seem-top1"]["queries"] == 13
        assert {("seem", "seem-top1"), ("seem", "prior")} <= {(r["with"], r["without"]) for r in results["differences"]["rows"]}
        report = (out / "results.md").read_text()
        assert "| seem with a single seed fact (a test's method) | seem-top1 |" in report
    finally:
        registry.unregister("seem-top1")
