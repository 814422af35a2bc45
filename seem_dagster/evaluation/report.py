"""results.json, results.md and the PNG plots of one evaluation run."""

from __future__ import annotations

import json
from pathlib import Path

from seem_dagster import methods as registry
from seem_dagster.evaluation.ablation import LME_COLUMNS, LOCOMO_CUTS, added, chain, taken_away

LME_TABLE = [("session", "recall_all@5"), ("session", "ndcg_any@5"), ("session", "recall_all@10"),
             ("turn", "recall_all@5"), ("turn", "recall_all@10"), ("turn", "ndcg_any@10")]


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _ms(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def markdown(results: dict) -> str:
    methods = results["methods"]
    timing = results["timing"]
    lines = [f"# {results['benchmark']}: {results['questions']} questions, {results['conversations']} conversations, "
             f"{results['passages']} passages", ""]
    if results["benchmark"] == "locomo":
        metrics = [k for k in next(iter(methods.values())) if k.startswith("recall@") and "budget" not in k]
        budgets = [k for k in next(iter(methods.values())) if "budget" in k]
        head = ["method"] + [f"{m} all" for m in metrics] + [f"{m} cat 1-4" for m in metrics] + [b.replace("recall@budget", "R@") + " tokens" for b in budgets]
        lines += ["Official evidence recall (turns); overall = all questions incl. adversarial.", "",
                  "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name, figures in methods.items():
            row = [name] + [_fmt(figures[m]["overall"]) for m in metrics] + [_fmt(figures[m]["categories_1_4"]) for m in metrics]
            row += [_fmt(figures[b]["overall"]) for b in budgets]
            lines.append("| " + " | ".join(row) + " |")
        k10 = "recall@10" if "recall@10" in metrics else metrics[0]
        cats = list(next(iter(methods.values()))[k10]["by_category"])
        lines += ["", f"By category, {k10}:", "", "| method | " + " | ".join(cats) + " |", "|" + "---|" * (len(cats) + 1)]
        for name, figures in methods.items():
            lines.append(f"| {name} | " + " | ".join(_fmt(figures[k10]["by_category"][c]) for c in cats) + " |")
    else:
        cols = [(g, m) for g, m in LME_TABLE if g in results["config"]["granularities"]]
        lines += [f"Official protocol: query = question; {results['abstention_questions_excluded']} abstention questions "
                  f"excluded; corpus = {results['config']['corpus']} turns.", "",
                  "| method | " + " | ".join(f"{g} {m}" for g, m in cols) + " |", "|" + "---|" * (len(cols) + 1)]
        for name, per in methods.items():
            lines.append(f"| {name} | " + " | ".join(_fmt(per.get(g, {}).get(m)) for g, m in cols) + " |")
    lines += _ablation(results)
    qa = results.get("qa")
    if qa:
        llm = results["config"]["llm"]
        lines += ["", f"Question answering with {llm['backend']}:{llm['model']} (context: each method's top passages within "
                  f"{qa['budget_tokens']} tokens; {qa['model_calls']} model calls):", "",
                  "| method | questions | accuracy (LLM judge) | F1 | answer failures | judge failures | answer tokens in / out per question |",
                  "|---|---|---|---|---|---|---|"]
        for name, f in qa["methods"].items():
            lines.append(f"| {name} | {f['questions']} | {_fmt(f['accuracy_judge'])} | {_fmt(f['f1'])} | {f['answer_failures']} | "
                         f"{f['judge_failures']} | {_fmt(f['answer_prompt_tokens_per_question'])} / {_fmt(f['answer_completion_tokens_per_question'])} |")
    else:
        lines += ["", "Question answering: no language model configured (--backend), so no accuracy, F1 or tokens."]
    lines += ["", "Query latency (encoding the query + ranking; same process, same run):", "",
              "| method | p50 ms | p95 ms | p50 vs bm25 | p50 vs dense | traced peak MB |", "|---|---|---|---|---|---|"]
    for name, q in timing["query_latency"].items():
        lines.append(f"| {name} | {_ms(q['p50_ms'])} | {_ms(q['p95_ms'])} | {_fmt(q.get('p50_vs_bm25'))} | "
                     f"{_fmt(q.get('p50_vs_dense'))} | {_ms(timing['query_peak_traced_mb'].get(name))} |")
    build = timing["build_seconds_per_1k_passages"]
    untimed = timing.get("conversations_untimed", 0)
    note = " (stage timings of reused builds come from the run that built them)" if timing["conversations_reused"] else ""
    if untimed:
        note += (f"; {untimed} of {results['conversations']} memories were built outside `seem eval` and left no "
                 "timings: the figures are over the others" if untimed < results["conversations"] else
                 "; every memory was built outside `seem eval` and left no timings: none to show")
    lines += ["", f"Build seconds per 1k passages{note}:", ""]
    lines += [f"- {stage}: {seconds:.1f}" for stage, seconds in build["seem_stages"].items()]
    lines += [f"- SEEM total: {_ms(build['seem_total'])}; BM25 index: {build[registry.BM25]:.3f}; "
              f"dense embedding ({results['config']['embedder']}): {build[registry.DENSE]:.1f}",
              f"- SEEM/BM25 {_ms(timing['build_ratio']['seem_vs_bm25'])}x, SEEM/dense {_ms(timing['build_ratio']['seem_vs_dense'])}x",
              f"- peak RSS {timing['peak_rss_mb']:.0f} MB; run {results['seconds_total']:.0f} s "
              f"(build {timing['build_seconds_this_run']:.0f} s, {timing['conversations_built_this_run']} built, "
              f"{timing['conversations_reused']} reused; queries {timing['query_seconds_total']:.0f} s)"]
    return "\n".join(lines) + "\n"


def _ablation(results: dict) -> list[str]:
    """prior -> + facts as keys -> + walk -> + RPE -> + fusion, each row one part more; only the steps that were run."""
    methods = results["methods"]
    steps = [(name, label) for name, label in chain() if name in methods]
    if len(steps) < 2:
        return []
    steps += [(name, label) for name, _, label in taken_away() + added() if name in methods]
    if results["benchmark"] == "locomo":
        cuts = [f"recall@{k}" for k in LOCOMO_CUTS if f"recall@{k}" in next(iter(methods.values()))]
        k10 = "recall@10" if "recall@10" in cuts else cuts[0]
        cats = list(methods[steps[0][0]][k10]["by_category"])

        def row(name):
            f = methods[name]
            return [f[k]["overall"] for k in cuts] + [f[k10]["by_category"][c] for c in cats]

        head = [f"{k} all" for k in cuts] + [f"{k10} {c}" for c in cats]
    else:
        cols = [(g, m) for g, m in LME_COLUMNS if g in results["config"]["granularities"]]
        types = sorted({t for per in methods.values() for t in (per.get("turn") or {}).get("by_type", {})})

        def row(name):
            per = methods[name]
            return ([per.get(g, {}).get(m) for g, m in cols]
                    + [((per.get("turn") or {}).get("by_type", {}).get(t) or {}).get("recall_all@10") for t in types])

        head = [f"{g} {m}" for g, m in cols] + [f"turn recall_all@10 {t}" for t in types]
    base = row(steps[0][0])
    lines = ["", "Ablation, each row one part more than the row above, then seem with one part taken away or added (same memory, "
             "same run; in brackets: the change from the passage prior):", "", "| step | method | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 2)]
    for name, label in steps:
        cells = [_fmt(v) if name == steps[0][0] or v is None or b is None else f"{_fmt(v)} ({v - b:+.3f})"
                 for v, b in zip(row(name), base)]
        lines.append(f"| {label} | {name} | " + " | ".join(cells) + " |")
    return lines + _differences(results.get("differences"), head)


def _differences(found: dict | None, head: list[str]) -> list[str]:
    """Each part's change per question with its interval, in the ablation table's columns."""
    if not found or not found["rows"]:
        return []
    count = next((c for c in head if "recall@10" in c or "recall_all@10" in c), head[0])
    lines = ["", f"Is each part's change outside noise? (with the part) - (without it), the mean over the same questions "
             f"and its {found['level']:.0%} interval ({found['method']}: {found['resamples']:,} resamples, seed "
             f"{found['seed']}; the questions are resampled, not the conversations); * marks an interval without 0. "
             f"Last column: questions the part ranks better / worse on {count} (and, on LoCoMo, the conversations "
             f"whose mean it raises / lowers).", "",
             "| part | with - without | " + " | ".join(head) + " | better / worse |", "|" + "---|" * (len(head) + 3)]
    for row in found["rows"]:
        cells = []
        for column in head:
            d = row["columns"].get(column)
            cells.append("–" if d is None else
                         f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" + ("*" if d["outside_noise"] else ""))
        c = row["columns"].get(count)
        tally = "–" if c is None else f"{c['better']} / {c['worse']}" + (
            f" (conversations {c['groups_better']} / {c['groups_worse']} of {c['groups']})" if "groups" in c else "")
        lines.append(f"| {row['part']} | {row['with']} - {row['without']} | " + " | ".join(cells) + f" | {tally} |")
    return lines


def plots(results: dict, out: Path) -> list[Path]:
    # Figures without pyplot: no global backend switch, so a notebook calling this keeps its own.
    from matplotlib.figure import Figure

    methods = results["methods"]
    written = []
    if results["benchmark"] == "locomo":
        ks = sorted(int(k.split("@")[1]) for k in next(iter(methods.values())) if k.startswith("recall@") and "budget" not in k)
        curves = {"recall_at_k.png": ("k (turns)", [f"recall@{k}" for k in ks], ks)}
        budgets = sorted(int(k.split("budget")[1]) for k in next(iter(methods.values())) if "budget" in k)
        if budgets:
            curves["recall_at_budget.png"] = ("context budget (tokens)", [f"recall@budget{b}" for b in budgets], budgets)
        for filename, (xlabel, keys, xs) in curves.items():
            fig = Figure(figsize=(6, 4))
            ax = fig.subplots()
            for name, figures in methods.items():
                ax.plot(xs, [figures[k]["overall"] for k in keys], marker="o", label=name)
            ax.set_xlabel(xlabel), ax.set_ylabel("evidence recall (all questions)"), ax.grid(alpha=0.3), ax.legend(fontsize=8)
            fig.tight_layout(), fig.savefig(out / filename, dpi=110)
            written.append(out / filename)
        key = "recall@10" if 10 in ks else f"recall@{ks[0]}"
        groups = list(next(iter(methods.values()))[key]["by_category"])
        values = {name: [figures[key]["by_category"][c] or 0 for c in groups] for name, figures in methods.items()}
        written.append(_bars(out / "by_category.png", groups, values, f"{key} by category"))
    else:
        for granularity in results["config"]["granularities"]:
            fig = Figure(figsize=(6, 4))
            ax = fig.subplots()
            for name, per in methods.items():
                figures = per.get(granularity) or {}
                ks = [1, 3, 5, 10, 30, 50]
                ax.plot(ks, [figures.get(f"recall_all@{k}") for k in ks], marker="o", label=name)
            ax.set_xscale("log"), ax.set_xlabel(f"k ({granularity}s)"), ax.set_ylabel("recall_all"), ax.grid(alpha=0.3)
            ax.legend(fontsize=8), fig.tight_layout()
            path = out / f"recall_at_k_{granularity}.png"
            fig.savefig(path, dpi=110)
            written.append(path)
        granularity = results["config"]["granularities"][0]
        types = sorted({t for per in methods.values() for t in (per.get(granularity) or {}).get("by_type", {})})
        values = {name: [((per.get(granularity) or {}).get("by_type", {}).get(t) or {}).get("recall_all@5") or 0 for t in types]
                  for name, per in methods.items()}
        written.append(_bars(out / "by_type.png", types, values, f"{granularity} recall_all@5 by question type"))
    return written


def _bars(path: Path, groups: list[str], values: dict[str, list[float]], title: str) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6, len(groups) * 1.4), 4))
    ax = fig.subplots()
    width = 0.8 / max(1, len(values))
    for i, (name, ys) in enumerate(values.items()):
        ax.bar([g + i * width for g in range(len(groups))], ys, width=width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups, rotation=20, fontsize=8)
    ax.set_ylim(0, 1), ax.set_title(title), ax.legend(fontsize=7), ax.grid(axis="y", alpha=0.3)
    fig.tight_layout(), fig.savefig(path, dpi=110)
    return path


def write_report(results: dict, out: Path) -> str:
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    text = markdown(results)
    (out / "results.md").write_text(text)
    written = plots(results, out)
    return text + "\nwrote " + ", ".join(str(p) for p in [out / "results.json", out / "results.md", *written])
