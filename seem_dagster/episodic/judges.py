"""Fusion with a language-model judge, in two batches instead of one call per decision.

The rule judge decides frame by frame against the episodes built so far, which a model could only
follow one call at a time. Here each frame's candidates are its most similar *earlier frames*
(cosine over the summary vectors), which do not depend on any decision, so every (frame,
candidate) pair goes to the judge in one batch. A frame then joins the episode of its most similar
candidate judged the same event (unless that episode is full), in time order. Episodes of more
than one frame get a merged summary and events from a second batch. Pure apart from the client.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from seem_dagster.episodic.extraction.llm import event_from
from seem_dagster.episodic.fusion import Episode, FrameItem, FusionConfig, FusionStats, episode_id
from seem_dagster.llm.client import LlmClient, LlmRun
from seem_dagster.llm.prompts import fusion_judge, fusion_merge


@dataclass
class LlmFusion:
    episodes: list[Episode]
    merged: dict[str, tuple[str, list[dict]]]  # episode id -> (summary, events) from the merge prompt
    stats: FusionStats
    judge_run: LlmRun | None = None
    merge_run: LlmRun | None = None
    judged_pairs: int = 0
    same_event: int = 0
    rule_fallbacks: int = 0  # pairs whose judge call failed, decided by the rule threshold instead


def candidate_pairs(items: list[FrameItem], config: FusionConfig) -> list[tuple[int, int, float]]:
    """(frame, earlier frame, cosine) for each frame's ``candidates`` most similar earlier frames."""
    order = sorted(range(len(items)), key=lambda i: items[i].order)
    if not order:
        return []
    vectors = np.stack([items[i].vector for i in order]).astype(np.float32)
    pairs = []
    for pos in range(1, len(order)):
        sims = vectors[:pos] @ vectors[pos]
        for j in np.argsort(-sims, kind="stable")[: config.candidates]:
            if sims[j] >= config.min_similarity:
                pairs.append((order[pos], order[int(j)], float(sims[j])))
    return pairs


def _frame(item: FrameItem) -> tuple[str, str]:
    return item.timestamp.date().isoformat(), item.summary


def fuse_with_llm(client: LlmClient, items: list[FrameItem], config: FusionConfig) -> LlmFusion:
    pairs = candidate_pairs(items, config)
    stats = FusionStats()
    judge_run = None
    verdicts: dict[tuple[int, int], bool] = {}
    fallbacks = 0
    if pairs:
        payloads = [
            (f"{items[i].frame_id}~{items[j].frame_id}", fusion_judge.payload(items[j].summary, [_frame(items[j])], items[i].summary, _frame(items[i])[0]))
            for i, j, _ in pairs
        ]
        judge_run = client.run(fusion_judge.PROMPT, payloads)
        for (i, j, sim), out in zip(pairs, judge_run.outputs):
            if out is None:
                fallbacks += 1
                verdicts[(i, j)] = sim >= config.threshold
            else:
                verdicts[(i, j)] = bool(out["same_event"])
    by_frame: dict[int, list[tuple[float, int]]] = {}
    for i, j, sim in pairs:
        if verdicts[(i, j)]:
            by_frame.setdefault(i, []).append((sim, j))
    episode_of: dict[int, Episode] = {}
    episodes: list[Episode] = []
    for i in sorted(range(len(items)), key=lambda k: items[k].order):
        stats.frames += 1
        chosen = None
        for _, j in sorted(by_frame.get(i, []), reverse=True):
            candidate = episode_of[j]
            if len(candidate.members) < config.max_passages:
                chosen = candidate
                break
            stats.capped += 1
        if chosen is None:
            chosen = Episode(episode_id(items[i].conversation_id, items[i].frame_id), items[i].conversation_id)
            episodes.append(chosen)
        else:
            stats.fused += 1
        chosen.add(items[i])
        episode_of[i] = chosen
    multi = [e for e in episodes if len(e.members) > 1]
    merged: dict[str, tuple[str, list[dict]]] = {}
    merge_run = None
    if multi:
        merge_run = client.run(fusion_merge.PROMPT, [
            (e.episode_id, fusion_merge.payload([(m.timestamp.date().isoformat(), m.summary, list(m.events)) for m in e.members]))
            for e in multi
        ])
        for e, out in zip(multi, merge_run.outputs):
            if out is not None and out["summary"].strip():
                merged[e.episode_id] = (out["summary"].strip(), [asdict(event_from(ev)) for ev in out["events"]])
    return LlmFusion(episodes, merged, stats, judge_run, merge_run, len(pairs), sum(verdicts.values()), fallbacks)
