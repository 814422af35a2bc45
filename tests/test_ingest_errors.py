"""Every class of bad input stops with an error naming file, record and field, and writes nothing."""

import copy
import json

import pytest

from conftest import files_under, message, write_jsonl
from seem_dagster.cli import EXIT_INPUT, main

JSONL_CASES = {
    "malformed_json": (
        [message(), '{"conversation_id": "c1", "session_id": '],
        ["line 2", "malformed JSON"],
    ),
    "missing_field": ([message(), message(speaker=...)], ["line 2", "field 'speaker'", "missing"]),
    "wrong_type": ([message(timestamp=1714000000)], ["line 1", "field 'timestamp'", "expected string, got integer"]),
    "wrong_type_bool": ([message(text=True)], ["line 1", "field 'text'", "expected string, got boolean"]),
    "unparseable_date": ([message(timestamp="last tuesday-ish")], ["line 1", "field 'timestamp'", "unparseable date"]),
    "duplicate_ids": (
        [message(id="m1"), message(id="m2"), message(id="m1")],
        ["line 3", "field 'id'", "duplicate id 'm1' (also line 1)"],
    ),
    "empty_text": ([message(), message(text="   ")], ["line 2", "field 'text'", "empty text"]),
    "turn_too_long": ([message(text="x" * 101)], ["line 1", "field 'text'", "over the limit of 100"]),
    "hostile_conversation_id_nul": ([message(conversation_id="a\x00b")], ["line 1", "field 'conversation_id'", "control character"]),
    "absurd_conversation_id": ([message(conversation_id="c" * 5000)], ["line 1", "field 'conversation_id'", "over the limit"]),
}


def run_build(path, store, *extra):
    return main(["build", "--input", str(path), "--store", str(store), "--quiet", *extra])


@pytest.mark.parametrize("case", sorted(JSONL_CASES))
def test_bad_jsonl_is_rejected_with_location_and_nothing_written(case, tmp_path, capsys):
    rows, expected = JSONL_CASES[case]
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    store = tmp_path / "store"
    code = run_build(path, store, "--max-turn-chars", "100")
    err = capsys.readouterr().err.strip()
    assert code == EXIT_INPUT
    assert len(err.splitlines()) == 1, err
    assert str(path) in err
    for part in expected:
        assert part in err, (part, err)
    assert files_under(store) == []


def test_non_utf8_bytes_name_the_line_and_offset(tmp_path, capsys):
    path = tmp_path / "chat.jsonl"
    good = json.dumps(message()).encode()
    path.write_bytes(good + b"\n" + good.replace(b"adopted", b"adopt\xffed") + b"\n")
    code = run_build(path, tmp_path / "store")
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert f"{path}: line 2: not UTF-8: byte 0xff at offset" in err
    assert files_under(tmp_path / "store") == []


def _locomo(locomo_dev):
    data = json.loads(locomo_dev.read_text())
    return copy.deepcopy(data[:2])


def _broken_locomo(data, case):
    conv = data[1]["conversation"]
    if case == "missing_field":
        del conv["session_2"][3]["text"]
        return ["sample 1 (conv-30), session_2, turn 3 (D2:4)", "field 'text'", "missing"]
    if case == "wrong_type":
        conv["session_2"][3]["speaker"] = ["Jon"]
        return ["sample 1 (conv-30), session_2, turn 3 (D2:4)", "field 'speaker'", "expected string, got array"]
    if case == "unparseable_date":
        conv["session_3_date_time"] = "sometime in spring"
        return ["sample 1 (conv-30), conversation", "field 'session_3_date_time'", "unparseable date"]
    if case == "duplicate_ids":
        conv["session_2"][4]["dia_id"] = "D2:1"
        return ["sample 1 (conv-30), session_2, turn 4 (D2:1)", "field 'dia_id'", "duplicate id 'D2:1'"]
    if case == "empty_text":
        conv["session_1"][0]["text"] = ""
        return ["sample 1 (conv-30), session_1, turn 0 (D1:1)", "field 'text'", "empty text"]
    if case == "duplicate_conversation":
        data[1]["sample_id"] = data[0]["sample_id"]
        return ["sample 1", "field 'sample_id'", "duplicate id"]
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case", ["missing_field", "wrong_type", "unparseable_date", "duplicate_ids", "empty_text", "duplicate_conversation"]
)
def test_bad_locomo_is_rejected_and_nothing_written(case, locomo_dev, tmp_path, capsys):
    data = _locomo(locomo_dev)
    expected = _broken_locomo(data, case)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    store = tmp_path / "store"
    # The broken record is in the second conversation: the first, valid one must not be written either.
    code = run_build(path, store)
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    for part in [str(path), *expected]:
        assert part in err, (part, err)
    assert files_under(store) == []


def test_malformed_locomo_json_names_line_and_column(tmp_path, capsys):
    path = tmp_path / "locomo.json"
    path.write_text('[\n  {"sample_id": "x",\n   "conversation": {,}\n]')
    assert run_build(path, tmp_path / "store", "--format", "locomo") == EXIT_INPUT
    assert f"{path}: line 3: malformed JSON at column" in capsys.readouterr().err


def test_bad_longmemeval_question_date(longmemeval_dev, tmp_path, capsys):
    data = json.loads(longmemeval_dev.read_text())[:1]
    data[0]["question_date"] = "2023-07-01"
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    assert run_build(path, tmp_path / "store", "--allow-empty-turns") == EXIT_INPUT
    err = capsys.readouterr().err
    assert "question 0 (gpt4_4edbafa2): field 'question_date': unparseable date '2023-07-01'" in err


@pytest.mark.slow
def test_a_bad_rebuild_leaves_the_previous_snapshot_untouched(tmp_path, capsys):
    store = tmp_path / "store"
    good = write_jsonl(tmp_path / "chat.jsonl", [message(), message(text="We named her Miso.")])
    assert run_build(good, store) == 0
    before = {p: p.read_bytes() for p in files_under(store)}
    write_jsonl(good, [message(), message(text="")])
    assert run_build(good, store) == EXIT_INPUT
    assert {p: p.read_bytes() for p in files_under(store)} == before


def test_unknown_conversation_is_an_error(tmp_path, capsys):
    path = write_jsonl(tmp_path / "chat.jsonl", [message()])
    assert run_build(path, tmp_path / "store", "--conversation", "nope") == EXIT_INPUT
    assert "no conversation 'nope'" in capsys.readouterr().err


def test_missing_input_file(tmp_path, capsys):
    assert run_build(tmp_path / "absent.json", tmp_path / "store") == EXIT_INPUT
    assert "absent.json: file not found" in capsys.readouterr().err
