"""Associative fusion: frames, in time order, join the episode of the same event or start a new one.

Pure: frames in, episodes out. For each frame the candidates are the top ``candidates`` existing
episodes of the conversation by cosine between the frame's summary vector and the episode's
(its closest member summary by default, or the normalised centroid of its members). The rule judge scores each candidate:

    score = cosine + adjacency bonus (follows one of the episode's turns closely in the same session)
                   + participant bonus (shares a named participant or place other than the speakers)
                   + time bonus (within ``time_window_days`` of the episode)

and fuses at ``score >= threshold`` when ``cosine >= min_similarity``. Time proximity is evidence,
not a gate, so a storyline can join across sessions weeks apart. Episodes are capped at
``max_passages``. Fusing a later batch of frames into saved episodes gives the same episodes as
fusing everything at once (the state is fully derived from the member frames, in join order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from seem_dagster import ids
from seem_dagster.config import FusionConfig


@dataclass(frozen=True)
class FrameItem:
    frame_id: str
    passage_id: str
    conversation_id: str
    timestamp: datetime
    session_index: int
    turn_index: int
    summary: str
    events: tuple[dict, ...]
    vector: np.ndarray
    anchors: frozenset[str] = frozenset()

    @property
    def order(self) -> tuple:
        return (self.timestamp, self.session_index, self.turn_index)


@dataclass
class Episode:
    episode_id: str
    conversation_id: str
    members: list[FrameItem] = field(default_factory=list)
    vector_sum: np.ndarray | None = None
    events: list[dict] = field(default_factory=list)
    _event_keys: set = field(default_factory=set)

    def add(self, frame: FrameItem) -> None:
        self.members.append(frame)
        v = frame.vector.astype(np.float64)
        self.vector_sum = v.copy() if self.vector_sum is None else self.vector_sum + v
        for event in frame.events:
            key = (
                (event.get("action") or "").lower(),
                tuple(sorted(event.get("participants") or [])),
                event.get("time"),
            )
            if key not in self._event_keys:
                self._event_keys.add(key)
                self.events.append(event)

    @property
    def centroid(self) -> np.ndarray:
        norm = np.linalg.norm(self.vector_sum)
        return (self.vector_sum / norm if norm > 0 else self.vector_sum).astype(np.float32)

    @property
    def anchors(self) -> set[str]:
        return set().union(*(m.anchors for m in self.members))

    @property
    def passage_ids(self) -> list[str]:
        return [m.passage_id for m in self.members]

    @property
    def first_time(self) -> datetime:
        return min(m.timestamp for m in self.members)

    @property
    def last_time(self) -> datetime:
        return max(m.timestamp for m in self.members)

    def summary(self) -> str:
        """The most central frame's summary, with the span of the event when it has several turns."""
        centre = self.centroid
        # Two members are equally central by construction; ties (to embedding noise) go to the earlier turn,
        # so an incremental build and a full rebuild name an episode alike.
        near = [float(m.vector @ centre) for m in self.members]
        best = min((m for m, d in zip(self.members, near) if d >= max(near) - 1e-4), key=lambda m: m.order)
        if len(self.members) == 1:
            return best.summary
        sessions = len({m.session_index for m in self.members})
        span = f"{self.first_time:%Y-%m-%d}" + (f" to {self.last_time:%Y-%m-%d}" if self.last_time.date() != self.first_time.date() else "")
        return f"{best.summary} [{len(self.members)} turns, {sessions} session{'s' if sessions > 1 else ''}, {span}]"


@dataclass(frozen=True)
class Judgement:
    same: bool
    score: float
    similarity: float
    reason: str


def judge(frame: FrameItem, episode: Episode, similarity: float, config: FusionConfig) -> Judgement:
    parts = [f"cos {similarity:.2f}"]
    score = similarity
    last = episode.members[-1]
    if (
        last.session_index == frame.session_index
        and 0 < frame.turn_index - last.turn_index <= config.adjacency_turns
    ):
        score += config.adjacency_bonus
        parts.append("adjacent turn")
    shared = frame.anchors & episode.anchors
    if shared:
        score += config.participant_bonus
        parts.append("shares " + ", ".join(sorted(shared)[:3]))
    gap_days = abs((frame.timestamp - episode.last_time).total_seconds()) / 86400
    if gap_days <= config.time_window_days:
        score += config.time_bonus
        parts.append(f"{gap_days:.0f} days apart")
    same = score >= config.threshold and similarity >= config.min_similarity
    return Judgement(same, score, similarity, "; ".join(parts))


@dataclass
class FusionStats:
    frames: int = 0
    fused: int = 0
    capped: int = 0

    @property
    def fusion_rate(self) -> float:
        return self.fused / self.frames if self.frames else 0.0


class _Members:
    """Every member vector of one conversation's episodes, in the order the frames joined them (time
    order), and the episode each belongs to: a frame is compared with all of them in one product,
    not one per episode. Each row's cosine is its own sum, so it never depends on the other rows: an
    incremental fusion, which starts from the saved members, gets the full fusion's figures bit for bit."""

    def __init__(self, dim: int):
        self.episodes: list[Episode] = []
        self.sizes: list[int] = []  # members of each episode
        self.rows = np.empty((64, dim), dtype=np.float32)
        self.owner = np.empty(64, dtype=np.intp)
        self.count = 0

    def start(self, episode: Episode) -> int:
        self.episodes.append(episode)
        self.sizes.append(0)
        return len(self.episodes) - 1

    def add(self, position: int, vector: np.ndarray) -> None:
        if self.count == len(self.rows):
            self.rows = np.concatenate([self.rows, np.empty_like(self.rows)])
            self.owner = np.concatenate([self.owner, np.empty_like(self.owner)])
        self.rows[self.count] = vector
        self.owner[self.count] = position
        self.count += 1
        self.sizes[position] += 1

    def similarities(self, vector: np.ndarray, link: str) -> np.ndarray:
        """Each episode's similarity with ``vector``, in ``episodes`` order."""
        if link == "centroid":
            return np.array([float(e.centroid @ vector) for e in self.episodes], dtype=np.float64)
        # "max": the episode's closest frame. A centroid of many frames drifts towards the generic and
        # attracts everything; the nearest member keeps a storyline's specific turns findable.
        cosines = (self.rows[:self.count] * vector.astype(np.float32)).sum(axis=1)
        best = np.full(len(self.episodes), -np.inf, dtype=np.float32)
        np.maximum.at(best, self.owner[:self.count], cosines)
        return best.astype(np.float64)


def members_of(episodes: list, sizes: Sequence[int], rows: np.ndarray, owner: np.ndarray) -> _Members:
    """One conversation's member index as saved: its ``episodes`` (a list fusion may index into), each
    one's member count, every member vector and the position of the episode it belongs to."""
    index = _Members(rows.shape[1])
    index.episodes, index.sizes = episodes, list(sizes)
    index.rows = np.concatenate([rows.astype(np.float32), np.empty((max(64, len(rows)), rows.shape[1]), np.float32)])
    index.owner = np.concatenate([owner.astype(np.intp), np.empty(max(64, len(rows)), np.intp)])
    index.count = len(rows)
    return index


def member_index(episodes: Sequence[Episode], dim: int) -> dict[str, _Members]:
    """The saved episodes' members by conversation, in the order fusion joined them."""
    out: dict[str, _Members] = {}
    joined = []
    for episode in episodes:
        index = out.setdefault(episode.conversation_id, _Members(dim))
        position = index.start(episode)
        joined += [(m.order, episode.conversation_id, position, m.vector) for m in episode.members]
    for _, conversation_id, position, vector in sorted(joined, key=lambda j: j[0]):
        out[conversation_id].add(position, vector)
    return out


def episode_id(conversation_id: str, first_frame_id: str) -> str:
    return "e_" + ids.stable_hash("episode", conversation_id, first_frame_id)


def fuse(
    frames: Iterable[FrameItem],
    config: FusionConfig,
    episodes: Sequence[Episode] = (),
    stats: FusionStats | None = None,
    members: dict[str, _Members] | None = None,
) -> list[Episode]:
    """Fuse ``frames`` (any order; processed in time order) into ``episodes`` (kept, extended).
    ``members``: ``member_index(episodes)`` kept from an earlier call, which this one extends (an
    append fuses a few frames into a memory's episodes without indexing all their members again)."""
    stats = stats if stats is not None else FusionStats()
    result = list(episodes)
    frames = sorted(frames, key=lambda f: f.order)
    if not frames:
        return result
    if members is None:
        members = member_index(result, len(frames[0].vector))
    for frame in frames:
        stats.frames += 1
        index = members.setdefault(frame.conversation_id, _Members(len(frame.vector)))
        sims = index.similarities(frame.vector, config.link)
        is_open = np.array(index.sizes, dtype=np.intp) < config.max_passages
        open_at = np.flatnonzero(is_open)
        chosen = None
        if open_at.size:
            top = open_at[np.argsort(-sims[open_at], kind="stable")[: config.candidates]]
            judged = [(judge(frame, index.episodes[i], float(sims[i]), config), i) for i in top]
            passing = [(j, i) for j, i in judged if j.same]
            if passing:
                chosen = int(max(passing, key=lambda ji: ji[0].score)[1])
        if chosen is None:
            stats.capped += int(bool(np.any(sims[~is_open] >= config.threshold)))
            episode = Episode(episode_id(frame.conversation_id, frame.frame_id), frame.conversation_id)
            result.append(episode)
            chosen = index.start(episode)
        else:
            stats.fused += 1
        index.episodes[chosen].add(frame)
        index.add(chosen, frame.vector)
    return result


def rebuild_state(members_by_episode: Sequence[tuple[str, str, Sequence[FrameItem]]]) -> list[Episode]:
    """Episodes as saved (id, conversation, member frames in join order) -> the state fusion continues from."""
    episodes = []
    for eid, conversation_id, members in members_by_episode:
        episode = Episode(eid, conversation_id)
        for frame in members:
            episode.add(frame)
        episodes.append(episode)
    return episodes
