"""Tables <-> fusion: build FrameItems from the frames and passages tables, and the episodes table back.

Pure polars and numpy; the episodes asset calls ``fuse_frames`` and writes what it returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from seem_dagster import ids
from seem_dagster.episodic.fusion import Episode, FrameItem, FusionConfig, FusionStats, fuse, rebuild_state
from seem_dagster.schemas import EVENT_ROLES, Episodes, EventFrames, Passages, table


def _anchors(events, speakers: set[str]) -> frozenset[str]:
    names = set()
    for event in events:
        for person in event.get("participants") or []:
            names.add(person)
        if event.get("location"):
            names.add(event["location"])
    return frozenset(n.lower() for n in names if n and n not in speakers)


def frame_items(frames: pl.DataFrame, passages: pl.DataFrame, vectors: np.ndarray, speakers: set[str] | None = None) -> list[FrameItem]:
    """One FrameItem per frame row; ``vectors`` are the frames' summary vectors in row order.
    ``speakers``: the conversation's, when ``passages`` holds only the frames' own turns."""
    position = {
        r[Passages.passage_id]: (r[Passages.session_index], r[Passages.turn_index])
        for r in passages.select(Passages.passage_id, Passages.session_index, Passages.turn_index).iter_rows(named=True)
    }
    speakers = speakers if speakers is not None else set(passages[Passages.speaker].unique().to_list())
    items = []
    for row, vector in zip(frames.iter_rows(named=True), vectors, strict=True):
        session_index, turn_index = position[row[EventFrames.passage_id]]
        events = tuple(row[EventFrames.events] or [])
        items.append(
            FrameItem(
                frame_id=row[EventFrames.frame_id],
                passage_id=row[EventFrames.passage_id],
                conversation_id=row[EventFrames.conversation_id],
                timestamp=row[EventFrames.timestamp],
                session_index=session_index,
                turn_index=turn_index,
                summary=row[EventFrames.summary],
                events=events,
                vector=vector,
                anchors=_anchors(events, speakers),
            )
        )
    return items


def episodes_table(episodes: list[Episode], merged: dict[str, tuple[str, list[dict]]] | None = None) -> pl.DataFrame:
    """``merged``: episode id -> (summary, events) written by a model; the rest summarise themselves."""
    merged = merged or {}
    rows = []
    for e in sorted(episodes, key=lambda e: e.members[0].order):
        summary, events = merged.get(e.episode_id, (e.summary(), e.events))
        rows.append(
            {
                Episodes.episode_id: e.episode_id,
                Episodes.conversation_id: e.conversation_id,
                Episodes.summary: summary,
                Episodes.events: [{role: ev.get(role) for role in EVENT_ROLES} for ev in events],
                Episodes.passage_ids: e.passage_ids,
                Episodes.frame_ids: [m.frame_id for m in e.members],
                Episodes.first_time: e.first_time,
                Episodes.last_time: e.last_time,
            }
        )
    return table(Episodes, rows)


def frame_digest(item: FrameItem) -> str:
    """What fusion read from a frame. Frame ids name the passage, not the content, so a new extractor
    version gives the same ids with other summaries: saved episodes are only reused when this matches."""
    return ids.stable_hash("frame", item.summary, json.dumps(list(item.events), sort_keys=True, default=str))


@dataclass
class FusionResult:
    episodes: pl.DataFrame
    stats: FusionStats
    mode: str  # "full" or "incremental"
    reason: str
    digests: dict[str, str] = field(default_factory=dict)  # frame id -> frame_digest, to save with the episodes


def fuse_frames(
    items: list[FrameItem],
    config: FusionConfig,
    previous: pl.DataFrame | None = None,
    previous_digests: dict[str, str] | None = None,
) -> FusionResult:
    """Fuse all frames, continuing from ``previous`` episodes when that gives the same answer.

    ``previous`` must come from the same ``config`` (the caller keys its saved episodes by config).
    Incremental only when all their frames are still here with the content they had then
    (``previous_digests``, from that result's ``digests``), and every new frame comes after them in
    time order; otherwise a full re-fusion (and the reason is reported).
    """
    stats = FusionStats()
    by_id = {item.frame_id: item for item in items}
    digests = {item.frame_id: frame_digest(item) for item in items}
    reason = _incremental_blocker(items, by_id, digests, previous, previous_digests or {})
    if reason is None:
        saved = [
            (r[Episodes.episode_id], r[Episodes.conversation_id], [by_id[f] for f in r[Episodes.frame_ids]])
            for r in previous.iter_rows(named=True)
        ]
        state = rebuild_state(sorted(saved, key=lambda s: s[2][0].order))
        done = {f for _, _, members in saved for f in (m.frame_id for m in members)}
        new = [i for i in items if i.frame_id not in done]
        episodes = fuse(new, config, state, stats)
        return FusionResult(episodes_table(episodes), stats, "incremental", f"{len(new)} new frames fused into {len(state)} episodes", digests)
    episodes = fuse(items, config, (), stats)
    return FusionResult(episodes_table(episodes), stats, "full", reason, digests)


def _incremental_blocker(items, by_id, digests, previous, previous_digests) -> str | None:
    if previous is None or previous.height == 0:
        return "no previous episodes"
    old_ids = [f for fids in previous[Episodes.frame_ids].to_list() for f in fids]
    if any(f not in by_id for f in old_ids):
        return "frames of previous episodes changed or were removed"
    if any(previous_digests.get(f) != digests[f] for f in old_ids):
        return "frames of previous episodes have other summaries or events now (or no record of them was kept)"
    old = set(old_ids)
    new = [i for i in items if i.frame_id not in old]
    if new and min(i.order for i in new) < max(by_id[f].order for f in old_ids):
        return "new frames are not all later than the fused ones"
    return None
