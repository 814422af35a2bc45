from datetime import datetime

import polars as pl
import pytest

from conftest import SAMPLE, SAMPLE_QUESTIONS, message, write_jsonl
from seem_dagster.config import IngestConfig
from seem_dagster.evaluation.run import LONGMEMEVAL_TURN_CHARS
from seem_dagster.ingest import InputError, load_input
from seem_dagster.ingest.longmemeval import session_of
from seem_dagster.schemas import Passages, Questions


def test_locomo_dev_conversation_has_every_turn(locomo_dev):
    (conv,) = load_input(locomo_dev, conversations=["conv-26"])
    p = conv.passages
    Passages.validate(p)
    assert p.height == 419
    first = p.row(0, named=True)
    assert first[Passages.source_ref] == "D1:1"
    assert first[Passages.timestamp] == datetime(2023, 5, 8, 13, 56)  # "1:56 pm on 8 May, 2023"
    assert p[Passages.session_id].n_unique() == 19


def test_locomo_image_turn_is_rendered_with_its_caption(locomo_dev):
    (conv,) = load_input(locomo_dev, conversations=["conv-26"])
    row = conv.passages.filter(pl.col(Passages.source_ref) == "D1:5").row(0, named=True)
    assert row[Passages.text].startswith('Caroline said, "The transgender stories were so inspiring!')
    assert row[Passages.text].endswith("and shared a photo of a dog walking past a wall with a painting of a woman")


def test_locomo_questions_keep_raw_evidence_and_integer_answers(locomo_dev):
    (conv,) = load_input(locomo_dev, conversations=["conv-26"])
    q = conv.questions
    Questions.validate(q)
    assert q.height == 199
    sunrise = q.filter(pl.col(Questions.question) == "When did Melanie paint a sunrise?").row(0, named=True)
    assert sunrise[Questions.answer] == "2022" and sunrise[Questions.evidence] == ["D1:12"]


def test_all_locomo_dev_conversations_validate(locomo_dev):
    convs = load_input(locomo_dev)
    assert [c.conversation_id for c in convs] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47"]
    for conv in convs:
        Passages.validate(conv.passages)


def test_longmemeval_one_memory_per_question_without_leaking_session_ids(longmemeval_dev):
    # The dev file has user turns of up to 76,560 characters: `seem eval longmemeval` reads it with LONGMEMEVAL_TURN_CHARS.
    with pytest.raises(InputError, match=r"852ce960.*76560 characters, over the limit of 32000"):
        load_input(longmemeval_dev, options=IngestConfig(allow_empty_turns=True))
    convs = load_input(longmemeval_dev, options=IngestConfig(allow_empty_turns=True, max_turn_chars=LONGMEMEVAL_TURN_CHARS))
    assert len(convs) == 105
    conv = convs[0]
    p, q = conv.passages, conv.questions
    Passages.validate(p)
    assert set(p[Passages.speaker].unique()) == {"user", "assistant"}
    question = q.row(0, named=True)
    assert question[Questions.question_date] == datetime(2023, 7, 1, 2, 36)
    assert question[Questions.evidence_sessions] == ["answer_0a00c163_1", "answer_0a00c163_2"]
    # Session ids only in source_ref: never in the text or the session_id retrieval may read.
    assert not p[Passages.session_id].str.contains("answer_").any()
    assert p[Passages.source_ref].str.contains(r"^[^:]+:\d+$").all()
    gold_refs = set(question[Questions.evidence])
    assert gold_refs and gold_refs <= set(p[Passages.source_ref])
    assert {session_of(r) for r in gold_refs} <= set(question[Questions.evidence_sessions])


def test_longmemeval_empty_turn_is_reported_not_silently_dropped(longmemeval_dev):
    convs = load_input(longmemeval_dev, options=IngestConfig(allow_empty_turns=True, max_turn_chars=LONGMEMEVAL_TURN_CHARS),
                       conversations=["gpt4_4edbafa2"])
    assert convs[0].skipped == ["question 0 (gpt4_4edbafa2), session 26, turn 16 (sharegpt_XRsEKS0_0:16): empty text"]


def test_longmemeval_verbatim_repeated_session_keeps_both_copies(longmemeval_dev):
    (conv,) = load_input(longmemeval_dev, options=IngestConfig(allow_empty_turns=True, max_turn_chars=LONGMEMEVAL_TURN_CHARS),
                         conversations=["1e043500"])
    refs = conv.passages[Passages.source_ref]
    assert refs.str.starts_with("d5d1f9c4:").sum() == refs.str.starts_with("d5d1f9c4#2:").sum() > 0
    assert session_of("d5d1f9c4#2:3") == "d5d1f9c4"


def test_bundled_sample_jsonl_with_questions():
    (conv,) = load_input(SAMPLE, questions=SAMPLE_QUESTIONS)
    Passages.validate(conv.passages)
    Questions.validate(conv.questions)
    assert conv.passages.height == 48
    assert conv.passages[Passages.session_index].unique().to_list() == [0, 1, 2, 3]
    refs = set(conv.passages[Passages.source_ref])
    for evidence in conv.questions[Questions.evidence].to_list():
        assert evidence and set(evidence) <= refs


def test_jsonl_orders_sessions_by_time_and_defaults_source_ref(tmp_path):
    path = write_jsonl(
        tmp_path / "log.jsonl",
        [
            message(session_id="later", timestamp="2024-05-01T10:00:00+02:00", text="Second session."),
            message(session_id="earlier", timestamp="2024-04-01T09:00:00Z", text="First session."),
            message(session_id="earlier", timestamp="2024-04-01T09:01:00Z", speaker="Bo", text="Reply."),
        ],
    )
    (conv,) = load_input(path)
    p = conv.passages
    assert p[Passages.session_id].to_list() == ["earlier", "earlier", "later"]
    assert p[Passages.source_ref].to_list() == ["earlier:0", "earlier:1", "later:0"]
    assert p[Passages.timestamp].to_list()[2] == datetime(2024, 5, 1, 8, 0)  # offset converted to UTC


def test_ids_are_stable_across_reads():
    a = load_input(SAMPLE)[0].passages[Passages.passage_id].to_list()
    b = load_input(SAMPLE)[0].passages[Passages.passage_id].to_list()
    assert a == b and len(set(a)) == len(a)


def test_only_speaker_keeps_that_speakers_turns_and_counts_the_rest():
    from seem_dagster.ingest import InputError

    (everyone,) = load_input(SAMPLE)
    (priya,) = load_input(SAMPLE, options=IngestConfig(only_speakers=("Priya",)))
    assert set(priya.passages["speaker"].to_list()) == {"Priya"}
    assert priya.excluded == everyone.passages.height - priya.passages.height > 0
    # Kept turns keep their ids and turn indexes: the gaps show where the other speaker spoke.
    kept = everyone.passages.filter(everyone.passages["speaker"] == "Priya")
    assert priya.passages["passage_id"].to_list() == kept["passage_id"].to_list()
    with pytest.raises(InputError) as err:
        load_input(SAMPLE, options=IngestConfig(only_speakers=("Nobody",)))
    assert "sample_conversation.jsonl" in str(err.value) and "speaker" in str(err.value)


def test_an_unchanged_file_is_not_read_again_and_a_rewrite_is(tmp_path, monkeypatch):
    """Each partition's ingest loads the same input file: unchanged (by its stat), it is neither read
    nor hashed again; a rewrite of the same size with its modification time put back is still seen."""
    import os

    from seem_dagster.ingest import load as load_module

    path = write_jsonl(tmp_path / "log.jsonl", [message(text="I adopted a cat yesterday."), message(conversation_id="c2")])
    reads = []
    real_read = load_module.read_bytes
    monkeypatch.setattr(load_module, "read_bytes", lambda p: reads.append(str(p)) or real_read(p))
    (first,) = load_input(path, conversations=["c1"])
    (again,) = load_input(path, conversations=["c1"])
    (other,) = load_input(path, conversations=["c2"])
    assert reads == [str(path)]
    assert again.passages.equals(first.passages) and other.conversation_id == "c2"
    again.skipped.append("changed by the caller")
    assert load_input(path, conversations=["c1"])[0].skipped == []  # callers get copies, not the cached parse

    before = os.stat(path)
    write_jsonl(path, [message(text="I adopted a dog yesterday."), message(conversation_id="c2")])  # same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    (changed,) = load_input(path, conversations=["c1"])
    assert len(reads) == 2 and changed.passages[Passages.text].to_list() == ["I adopted a dog yesterday."]


def test_a_file_whose_parse_left_the_cache_is_read_again(tmp_path, monkeypatch):
    from seem_dagster.ingest import load as load_module

    paths = [write_jsonl(tmp_path / f"log{i}.jsonl", [message(text=f"I adopted cat number {i}.")]) for i in range(load_module._PARSED_MAX + 1)]
    reads = []
    real_read = load_module.read_bytes
    monkeypatch.setattr(load_module, "read_bytes", lambda p: reads.append(str(p)) or real_read(p))
    for path in paths:
        load_input(path)
    assert not [asked for asked in load_module._READ if asked[0] == str(paths[0])]  # its stat left with its parse
    (conv,) = load_input(paths[0])
    assert reads == [str(p) for p in paths] + [str(paths[0])]
    assert conv.passages[Passages.text].to_list() == ["I adopted cat number 0."]


def test_a_log_extended_by_a_writer_reads_only_the_new_lines_and_parses_as_the_whole_file(monkeypatch, tmp_path):
    """A writer's `parse_to_write` of a log that extends the one it last wrote (and that is still on
    disk as it wrote it) reads only the new lines (jsonl.extend); the result is always `jsonl.read` of
    the whole text, errors included: new turns in the last session or later ones, a turn of an earlier
    session, a session dated before the last, a duplicate id, a bad line. `load_input` of the written
    file then parses nothing."""
    import json
    import random

    from seem_dagster.ingest import jsonl
    from seem_dagster.ingest.load import clear_parsed, parse_to_write, written

    read_only_new = []
    extend = jsonl.extend
    monkeypatch.setattr(jsonl, "extend", lambda *a: read_only_new.append(r := extend(*a)) or r)
    options, rng, lines, sessions, minute = IngestConfig(), random.Random(7), [], ["s0"], 0
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    clear_parsed()
    for n in range(240):
        if rng.random() < 0.1:
            sessions.append(f"s{len(sessions)}")
        session = sessions[-1] if rng.random() < 0.9 else rng.choice(sessions)  # now and then an earlier session
        minute = max(0, minute + (rng.choice([0, 1, 2]) if rng.random() < 0.95 else -5))  # now and then back in time
        turn = {"conversation_id": "c", "session_id": session, "timestamp": f"2024-01-{1 + minute // 600:02d}T{minute % 600 // 60:02d}:{minute % 60:02d}:00",
                "speaker": rng.choice(["Ana", "Ben"]), "text": f"turn {n}", "id": f"{session}:{n}"}
        if rng.random() < 0.03 and lines:
            turn["id"] = json.loads(rng.choice(lines))["id"]  # a duplicate id
        line = json.dumps(turn) if rng.random() > 0.02 else json.dumps(turn)[:-2]  # a malformed line
        text = "".join(f"{x}\n" for x in [*lines, line])
        try:
            whole = jsonl.read(text, str(path), options)
        except InputError as err:
            with pytest.raises(InputError) as raised:
                parse_to_write(str(path), text.encode(), "jsonl", options, extends=path.stat().st_size)
            assert str(raised.value) == str(err)
            continue
        parsed = parse_to_write(str(path), text.encode(), "jsonl", options, extends=path.stat().st_size)
        assert parsed.conversations[0].passages.equals(whole[0].passages), n
        assert parsed.conversations[0].fingerprint == whole[0].fingerprint, n  # extended, not computed again
        path.write_bytes(text.encode())
        written(str(path), parsed)
        lines.append(line)
    monkeypatch.setattr("seem_dagster.ingest.load.parse_text", lambda *a: pytest.fail("the written file was parsed again"))
    (conv,) = load_input(str(path), "jsonl", options)
    assert conv.passages.equals(jsonl.read(path.read_text(), str(path), options)[0].passages)
    clear_parsed()
    extended = [r for r in read_only_new if r is not None]
    assert len(extended) > 150 and len(extended) < len(read_only_new)  # mostly extended; the rest read whole
