"""The bundled sample conversation written in LoCoMo's release format, so `seem eval locomo` (and the
evaluation notebook) can run anywhere, without the benchmark files."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from seem_dagster.store.files import jsonl_lines

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data"
CATEGORIES = {"multi-hop": 1, "temporal": 2, "open-domain": 3, "single-hop": 4, "adversarial": 5}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in jsonl_lines(path.read_text(encoding="utf-8")) if line.strip()]


def sample_sessions(sample_dir: Path = SAMPLE_DIR) -> tuple[dict[str, list[dict]], list[dict]]:
    sessions: dict[str, list[dict]] = defaultdict(list)
    for turn in _rows(sample_dir / "sample_conversation.jsonl"):
        sessions[turn["session_id"]].append(turn)
    return dict(sorted(sessions.items())), _rows(sample_dir / "sample_questions.jsonl")


def write_sample_as_locomo(path: Path, sample_dir: Path = SAMPLE_DIR) -> Path:
    sessions, questions = sample_sessions(sample_dir)
    speakers = list(dict.fromkeys(t["speaker"] for ts in sessions.values() for t in ts))
    conversation: dict = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
    dia: dict[str, str] = {}
    for n, turns in enumerate(sessions.values(), start=1):
        when = datetime.fromisoformat(turns[0]["timestamp"])
        conversation[f"session_{n}_date_time"] = f"{when:%-I:%M} {when:%p}".lower() + f" on {when:%-d %B, %Y}"
        conversation[f"session_{n}"] = [
            {"speaker": t["speaker"], "dia_id": f"D{n}:{i}", "text": t["text"]} for i, t in enumerate(turns, start=1)
        ]
        dia.update({t["id"]: f"D{n}:{i}" for i, t in enumerate(turns, start=1)})
    qa = [
        {"question": q["question"], "answer": q["answer"], "evidence": [dia[e] for e in q["evidence"]],
         "category": CATEGORIES[q["category"]]}
        for q in questions
    ]
    path.write_text(json.dumps([{"sample_id": "sample-1", "conversation": conversation, "qa": qa}], indent=1))
    return path
