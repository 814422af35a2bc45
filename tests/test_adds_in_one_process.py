"""Adds as an agent makes them, many in one long-lived process: a bulk add's forked parse workers
never hold a lock the next add waits on, and a turn whose text holds a line or paragraph separator
(U+2028, U+2029, U+0085: raw inside a JSON string, common in pasted text) is stored whole, through
`Memory.add`, a JSONL file and a forget that rewrites the input log."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from seem_dagster.store.files import jsonl_lines

SEPARATED = "Pasted from my notes:\u2028the cellar key is under the blue\u2029pot by the door\x85since Tuesday."


def test_jsonl_lines_split_at_line_feeds_alone():
    text = '{"a": "x\u2028y"}\r\n{"b": "\x85\u2029"}\n\n{"c": 1}'
    assert jsonl_lines(text) == ['{"a": "x\u2028y"}', '{"b": "\x85\u2029"}', "", '{"c": 1}']
    assert "".join(jsonl_lines(text, keepends=True)) == text
    assert jsonl_lines("") == [] and jsonl_lines("a\n") == ["a"]


BULK_THEN_ONE = """
import json, sys
from seem_dagster import Memory
store, turns = sys.argv[1], json.loads(sys.argv[2])
with Memory.open(store) as memory:
    memory.add("bulk", turns[:-1])  # over one batch of 64: the parse workers are forked, inside the writer's locks
    memory.add("bulk", turns[-1:])  # the same process, its workers still running
    memory.add("other", turns[-1:])
    hits = memory.search("bulk", "Where is the cellar key?", k=3)
    print(json.dumps([h.text for h in hits]))
"""


@pytest.mark.slow
def test_a_bulk_add_then_more_adds_in_the_same_process_finish(tmp_path):
    turns = [{"speaker": "Ann" if n % 2 else "Ben", "text": f"Note {n}: we talked about the garden and the {n}th rose.",
              "timestamp": f"2024-04-{1 + n // 60:02d}T{8 + (n % 60) // 6:02d}:{n % 6 * 10:02d}:00"} for n in range(140)]
    turns.append({"speaker": "Ann", "text": SEPARATED, "timestamp": "2024-04-05T09:00:00"})
    done = subprocess.run([sys.executable, "-c", BULK_THEN_ONE, str(tmp_path / "store"), json.dumps(turns)],
                          capture_output=True, text=True, timeout=600)  # it used to wait on its own lock for ever
    assert done.returncode == 0, done.stderr[-2000:]
    assert SEPARATED in json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_turn_with_line_separators_is_stored_whole_through_add_a_file_and_a_forget(tmp_path):
    from seem_dagster import Memory

    store = tmp_path / "store"
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text(json.dumps({"conversation_id": "file", "session_id": "s1", "speaker": "Ann", "text": SEPARATED,
                                 "timestamp": "2024-04-05T09:00:00", "id": "f1"}, ensure_ascii=False) + "\n", encoding="utf-8")
    with Memory.open(store) as memory:
        memory.add("kim", [{"speaker": "Kim", "text": SEPARATED, "timestamp": "2024-04-05T09:00:00", "id": "k1"},
                           {"speaker": "Lee", "text": "Thanks, I will look there.", "timestamp": "2024-04-05T09:01:00", "id": "k2"}])
        memory.add("kim", [{"speaker": "Kim", "text": "Also water the basil.", "timestamp": "2024-04-05T09:02:00", "id": "k3"}])
        memory.forget("kim", turns=["k2"])  # rewrites the input log line by line
        memory.add("kim", [{"speaker": "Lee", "text": "Done.", "timestamp": "2024-04-05T10:00:00", "id": "k4"}])
        memory.add_file(jsonl)
        texts = dict(zip(memory.index("kim").passages["source_ref"], memory.index("kim").passages["text"]))
        assert texts == {"k1": SEPARATED, "k3": "Also water the basil.", "k4": "Done."}
        assert memory.index("file").passages["text"].to_list() == [SEPARATED]
