"""Associative fusion on small hand-made frames and on the sample with real embeddings."""

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from conftest import SAMPLE
from seem_dagster import backends
from seem_dagster.config import FusionConfig
from seem_dagster.episodic.extraction.interface import inputs_from_passages, to_tables
from seem_dagster.episodic.fusion import FrameItem, FusionStats, fuse
from seem_dagster.episodic.tables import frame_items, fuse_frames
from seem_dagster.ingest import load_input
from seem_dagster.schemas import Episodes, EventFrames, Passages

T0 = datetime(2024, 1, 1, 10)


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def frame(n, vector, *, session=0, days=0, anchors=(), action=None):
    return FrameItem(
        frame_id=f"f{n}", passage_id=f"p{n}", conversation_id="c", timestamp=T0 + timedelta(days=days),
        session_index=session, turn_index=n, summary=f"summary {n}",
        events=({"participants": ["A"], "action": action or f"act {n}", "time": None},), vector=vector,
        anchors=frozenset(anchors),
    )


def test_merge_unions_provenance_and_dedupes_events():
    cfg = FusionConfig(threshold=0.9, min_similarity=0.0)
    frames = [frame(0, unit(1, 0, 0), action="adopt dog"), frame(1, unit(0, 0, 1)), frame(2, unit(1, 0.05, 0), action="adopt dog")]
    episodes = fuse(frames, cfg)
    assert [e.passage_ids for e in episodes] == [["p0", "p2"], ["p1"]]
    assert [ev["action"] for ev in episodes[0].events] == ["adopt dog"]  # the same event once


def test_a_storyline_joins_across_sessions_when_the_judge_sees_shared_people():
    cfg = FusionConfig(threshold=0.7, min_similarity=0.3, participant_bonus=0.15, time_bonus=0.0)
    a = frame(0, unit(1, 0.75, 0), session=0, anchors={"lena"})
    b = frame(1, unit(1, 0, 0.9), session=3, days=60, anchors={"lena"})  # cosine ~0.58 + 0.15 shared "lena"
    c = frame(2, unit(1, 0, 0.9), session=3, days=60)  # same cosine, nobody shared: stays apart
    assert [e.passage_ids for e in fuse([a, b], cfg)] == [["p0", "p1"]]
    assert [e.passage_ids for e in fuse([a, c], cfg)] == [["p0"], ["p2"]]


def test_episode_cap_and_every_passage_kept():
    cfg = FusionConfig(threshold=0.5, min_similarity=0.0, max_passages=3)
    frames = [frame(i, unit(1, 0.01 * i, 0)) for i in range(8)]
    episodes = fuse(frames, cfg)
    assert [len(e.members) for e in episodes] == [3, 3, 2]
    assert sorted(p for e in episodes for p in e.passage_ids) == sorted(f.passage_id for f in frames)


def test_each_conversation_fuses_apart_and_a_frame_a_full_episode_turns_away_is_counted():
    cfg = FusionConfig(threshold=0.9, min_similarity=0.0, max_passages=2)
    mine = [frame(i, unit(1, 0, 0)) for i in range(3)]  # the third finds its episode full
    other = [replace(frame(10 + i, unit(1, 0, 0)), conversation_id="d") for i in range(2)]  # the same vector elsewhere
    stats = FusionStats()
    episodes = fuse(mine + other, cfg, stats=stats)
    assert [(e.conversation_id, e.passage_ids) for e in episodes] == [("c", ["p0", "p1"]), ("c", ["p2"]), ("d", ["p10", "p11"])]
    assert (stats.frames, stats.fused, stats.capped) == (5, 2, 1)
    # Continued from the first two frames' episodes, fusion reaches the same episodes.
    again = fuse(mine[2:] + other, cfg, fuse(mine[:2], cfg))
    assert [(e.conversation_id, e.passage_ids) for e in again] == [(e.conversation_id, e.passage_ids) for e in episodes]


def test_frames_are_fused_in_time_order_whatever_the_input_order():
    cfg = FusionConfig(threshold=0.9, min_similarity=0.0)
    frames = [frame(i, unit(1, 0, 0), days=i) for i in range(4)]
    assert [e.passage_ids for e in fuse(frames[::-1], cfg)] == [["p0", "p1", "p2", "p3"]]


@pytest.fixture(scope="module")
def sample_frames():
    (conv,) = load_input(SAMPLE)
    inputs = inputs_from_passages(conv.passages)
    extractor = backends.extractor()
    frames, _ = to_tables(inputs, extractor.extract(inputs), extractor.name)
    vectors = backends.embedder().encode(frames[EventFrames.summary].to_list())
    return conv.passages, frames, vectors


def test_incremental_session_gives_the_same_episodes_as_a_full_rebuild(sample_frames):
    passages, frames, vectors = sample_frames
    cfg = FusionConfig()
    items = frame_items(frames, passages, vectors)
    full = fuse_frames(items, cfg)
    last_session = passages[Passages.session_index].max()
    early_ids = set(passages.filter(pl.col(Passages.session_index) < last_session)[Passages.passage_id])
    early = [i for i in items if i.passage_id in early_ids]
    before = fuse_frames(early, cfg)
    incremental = fuse_frames(items, cfg, before.episodes, before.digests)
    assert incremental.mode == "incremental" and full.mode == "full"
    assert incremental.episodes.equals(full.episodes)
    Episodes.validate(full.episodes)
    assert full.stats.fused > 0
    # The first three sessions' episodes are all still there, possibly grown by session 4.
    assert set(before.episodes[Episodes.episode_id]) <= set(full.episodes[Episodes.episode_id])


def test_incremental_falls_back_to_full_when_history_changes(sample_frames):
    passages, frames, vectors = sample_frames
    cfg = FusionConfig()
    items = frame_items(frames, passages, vectors)
    full = fuse_frames(items, cfg)
    assert fuse_frames(items[1:], cfg, full.episodes).reason == "frames of previous episodes changed or were removed"


def test_saved_episodes_are_not_reused_when_their_frames_read_differently_now(sample_frames):
    # A new extractor version keeps every frame id (ids name the passage) but rewrites summaries.
    passages, frames, vectors = sample_frames
    cfg = FusionConfig()
    items = frame_items(frames, passages, vectors)
    before = fuse_frames(items, cfg)
    assert fuse_frames(items, cfg, before.episodes, before.digests).mode == "incremental"
    rewritten = [replace(items[0], summary=items[0].summary + " (rewritten)")] + items[1:]
    again = fuse_frames(rewritten, cfg, before.episodes, before.digests)
    assert again.mode == "full" and "other summaries or events" in again.reason
    # Episodes saved before digests were kept are fused again once, then reused.
    assert fuse_frames(items, cfg, before.episodes, {}).mode == "full"
