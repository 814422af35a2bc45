"""The embedded extractor on the real spaCy pipeline: roles, speaker resolution, absolute time, facts."""

import logging
import os
import signal
import threading
from datetime import datetime

import polars as pl
import pytest

from conftest import SAMPLE
from seem_dagster import backends
from seem_dagster.episodic.extraction.interface import PassageInput, extract_with_cache, inputs_from_passages, to_tables
from seem_dagster.ingest import load_input
from seem_dagster.schemas import EventFrames, Facts, Passages


@pytest.fixture(scope="module")
def sample():
    (conv,) = load_input(SAMPLE)
    inputs = inputs_from_passages(conv.passages)
    results = backends.extractor().extract(inputs)
    by_ref = dict(zip(conv.passages[Passages.source_ref], conv.passages[Passages.passage_id]))
    return {pid: res for pid, res in zip([i.passage_id for i in inputs], results)}, by_ref, inputs, results


def test_first_person_becomes_the_speaker_and_yesterday_a_date(sample):
    results, by_ref, _, _ = sample
    res = results[by_ref["s2-01"]]  # Tomas, 2024-04-14: "I adopted a beagle yesterday!"
    assert any(f.subject == "Tomas" and f.relation == "adopt" and f.object == "beagle" and f.time == "2024-04-13" for f in res.facts)
    event = next(e for e in res.events if e.action.startswith("adopt"))
    assert event.participants == ["Tomas"] and event.time == "2024-04-13" and event.time_text == "yesterday"
    assert res.summary.startswith("Tomas: ") and "Tomas adopted a beagle yesterday (2024-04-13)" in res.summary


def test_a_fact_knows_where_its_passage_says_it(sample):
    """From its verb to the end of its object: the characters the retrieval index pools its vector from."""
    results, by_ref, inputs, _ = sample
    text = {i.passage_id: i.text for i in inputs}
    adopted = next(f for f in results[by_ref["s2-01"]].facts if f.relation == "adopt")  # "I adopted a beagle yesterday!"
    assert text[by_ref["s2-01"]][adopted.span_start:adopted.span_end] == "adopted a beagle"
    pottery = next(f for f in results[by_ref["s1-10"]].facts if f.relation == "start")
    assert text[by_ref["s1-10"]][pottery.span_start:pottery.span_end] == "started a pottery class"
    spans = [(f.span_start, f.span_end, len(text[pid])) for pid, res in results.items() for f in res.facts]
    assert spans and all(0 <= start < end <= length for start, end, length in spans)


def test_a_discourse_marker_is_no_fact_and_a_typed_date_is_a_date():
    """"By the way" is not where the speaker got; "on 2/8" dates what was done then."""
    said = datetime(2023, 3, 3, 15, 10)
    texts = ["Do you have any recommendations? By the way, I took my niece to the Natural History Museum on 2/8 and she "
             "loved it!", "Of course, I moved to Lisbon in fact."]
    results = backends.extractor().extract([PassageInput(passage_id=f"p{i}", conversation_id="c", speaker="Ana", text=t,
                                                         timestamp=said) for i, t in enumerate(texts)])
    facts = [(f.subject, f.relation, f.object, f.time) for r in results for f in r.facts]
    assert ("Ana", "take", "my niece", "2023-02-08") in facts
    assert ("Ana", "move to", "Lisbon", None) in facts
    assert not [f for f in facts if f[2].lower() in ("way", "course", "fact")], facts
    assert not [e.manner for r in results for e in r.events if e.manner and "way" in e.manner]



def test_the_other_ways_of_saying_a_time_date_what_was_done():
    """"the week before last", "mid-March", "over the holidays", "summer 2021": each dates its fact."""
    said = datetime(2023, 5, 30, 15, 10)  # a Tuesday
    texts = ["We hiked Mount Tam the week before last.", "I bought a kayak in mid-March.",
             "I baked gingerbread cookies over the holidays.", "We drove to Italy in summer 2021."]
    results = backends.extractor().extract([PassageInput(passage_id=f"p{i}", conversation_id="c", speaker="Ana", text=t,
                                                         timestamp=said) for i, t in enumerate(texts)])
    times = {f.relation: f.time for r in results for f in r.facts}
    assert times == {"hike": "2023-05-15/2023-05-21", "buy": "2023-03-11/2023-03-21", "bake": "2022-12-20/2023-01-02",
                     "drive to": "2021-06-01/2021-08-31"}, times


def test_clauses_told_in_passing_give_their_facts():
    """A clause of time and a gerund after a preposition each tell of an event; a bare "it" gives way to
    the prepositional object, and an amount's "of" phrase is the thing. A conditional clause does not."""
    said = datetime(2023, 3, 3, 15, 10)
    texts = ["I'm thinking of adding some live plants to my new tank.",
             "Can you recommend artists like James Parker, whose work I saw when I visited The Art Cube on 2/15?",
             "I got rid of the old toaster and replaced it with a toaster oven.",
             "I also bought 20 pounds of organic scratch grains for my chickens.",
             "If I visit Lisbon, I will call you."]
    results = backends.extractor().extract([PassageInput(passage_id=f"p{i}", conversation_id="c", speaker="Ana", text=t,
                                                         timestamp=said) for i, t in enumerate(texts)])
    facts = [(f.subject, f.relation, f.object, f.time) for r in results for f in r.facts]
    for fact in [("Ana", "add", "live plants", None), ("Ana", "visit", "The Art Cube", "2023-02-15"),
                 ("Ana", "replace with", "toaster oven", None), ("Ana", "buy", "20 pounds of organic scratch grains", None)]:
        assert fact in facts, (fact, facts)
    assert not [f for f in facts if f[2] == "Lisbon"], facts


def test_you_resolves_to_the_other_speaker(sample):
    results, by_ref, _, _ = sample
    res = results[by_ref["s3-06"]]  # Tomas: "Did you see someone about it?"
    assert "Priya" in res.summary and "you" not in res.summary.lower().split()


def test_summary_verbs_agree_with_the_name_that_replaces_i_and_you(sample):
    results, by_ref, _, _ = sample
    # "No, my neighbour Ines offered to look after him while I'm away for the wedding."
    assert "while Tomas is away" in results[by_ref["s2-09"]].summary
    # "You'll do great. I've been thinking about something big too: I want to adopt a dog ..."
    assert "Priya will do great. Tomas has been thinking" in results[by_ref["s1-06"]].summary
    assert "Tomas wants to adopt" in results[by_ref["s1-06"]].summary
    assert "Is Tomas taking Biscuit?" in results[by_ref["s2-08"]].summary  # "Are you taking Biscuit?"
    assert "Priya would love that" in results[by_ref["s3-11"]].summary  # "I'd love that."
    # a subject joined with another keeps the plural verb
    assert "Biscuit and Tomas were cheering" in results[by_ref["s4-04"]].summary


def test_summary_agreement_in_turns_outside_the_sample():
    said = [
        ("You and I are going to Lisbon.", "Priya and Tomas are going"),
        ("I'd been there before you'd arrived.", "Tomas had been there before Priya had arrived"),
        ("I'm away and you're here, I've got it and I'll go.", "Tomas is away and Priya is here, Tomas has got it and Tomas will go"),
        ("Am I late? I do not know if you were there.", "Is Tomas late? Tomas does not know if Priya was there"),
    ]
    inputs = [
        PassageInput(passage_id=str(i), conversation_id="c", speaker="Tomas", text=text, timestamp=datetime(2024, 1, 1),
                     speakers=("Tomas", "Priya"), previous_speaker="Priya")
        for i, (text, _) in enumerate(said)
    ]
    for result, (text, expected) in zip(backends.extractor().extract(inputs), said):
        assert expected in result.summary, (text, result.summary)


def test_frames_and_facts_validate_and_cache_skips_everything_on_rerun(sample):
    _, _, inputs, results = sample
    frames, facts = to_tables(inputs, results, "embedded-spacy")
    EventFrames.validate(frames)
    Facts.validate(facts)
    assert frames.height == 48 and facts.height > 20
    extractor = backends.extractor()
    first = extract_with_cache(extractor, inputs, {})
    assert (first.hits, first.misses) == (0, 48)
    second = extract_with_cache(extractor, inputs, first.new_entries)
    assert (second.hits, second.misses, second.new_entries) == (48, 0, {})
    assert [r.to_json() for r in second.results] == [r.to_json() for r in first.results]


@pytest.mark.slow
def test_frames_and_facts_validate_on_every_locomo_dev_conversation(locomo_dev):
    extractor = backends.extractor()
    for conv in load_input(locomo_dev):
        inputs = inputs_from_passages(conv.passages)
        frames, facts = to_tables(inputs, extractor.extract(inputs), extractor.name)
        EventFrames.validate(frames, lazy=True)
        Facts.validate(facts, lazy=True)
        assert frames.height == conv.passages.height
        assert set(facts[Facts.passage_id]) <= set(conv.passages[Passages.passage_id])
        assert facts.filter(pl.col(Facts.time).is_not_null()).height > 0
        # Every fact of the embedded extractor says where it is said, inside its passage.
        lengths = dict(zip(conv.passages[Passages.passage_id], conv.passages[Passages.text].str.len_chars()))
        assert facts[Facts.span_start].null_count() == 0
        assert all(0 <= a < b <= lengths[p] for a, b, p in facts.select(Facts.span_start, Facts.span_end, Facts.passage_id).iter_rows())



def test_named_third_parties_are_participants_whatever_their_entity_label(sample):
    results, by_ref, _, _ = sample
    # "No, my neighbour Ines offered to look after him while I'm away": the small model tags Ines ORG.
    res = results[by_ref["s2-09"]]
    assert res.events[0].participants == ["Tomas", "Ines"]
    assert any((f.subject, f.relation, f.object) == ("Tomas", "neighbour", "Ines") for f in res.facts)
    # "my sister Lena is getting married in Lisbon": the subject is Lena, not "my sister".
    assert any((f.subject, f.relation, f.object) == ("Lena", "marry in", "Lisbon") for f in results[by_ref["s2-07"]].facts)
    # "Did Biscuit behave with Ines?": the dog and the neighbour both take part.
    assert ["Biscuit", "Ines"] in [e.participants for e in results[by_ref["s3-03"]].events]
    # Places are the location, not participants: "Lena and her husband are moving from Lisbon to Porto".
    moving = next(e for e in results[by_ref["s4-08"]].events if e.action.startswith("move"))
    assert "Lena" in moving.participants and not {"Lisbon", "Porto"} & set(moving.participants)


def test_two_parse_processes_give_the_same_extractions(sample, monkeypatch):
    from seem_dagster.episodic.extraction.embedded import EmbeddedExtractor
    from seem_dagster.scheduling import chunk_size, parse_processes

    _, _, inputs, results = sample
    cores = len(os.sched_getaffinity(0))
    assert parse_processes(2, len(inputs), 8) == min(2, cores)  # 48 turns: six batches of 8
    assert parse_processes(2, len(inputs), 24) == min(2, cores)  # two batches, one a process
    assert parse_processes(2, len(inputs), 64) == 1  # one batch: one process's task
    assert parse_processes(2, 127, 64) == min(2, cores)  # a batch and a part batch: two tasks
    assert [chunk_size(n, 2, 64) for n in (127, 128, 240, 300, 65)] == [64, 64, 60, 50, 33]
    extractor = EmbeddedExtractor(batch_size=8, processes=2)
    threads = threading.active_count()
    try:
        forked = extractor.extract(inputs)
        assert [r.to_json() for r in forked] == [r.to_json() for r in results]
        # No helper thread: garbage collected there would close Dagster's SQLite connections in the wrong thread.
        assert threading.active_count() == threads
        if cores >= 2:
            # The workers outlive the call: the next conversation's batches go to the same processes.
            workers = extractor._pool.pids()
            assert len(workers) == 2
            assert [r.to_json() for r in extractor.extract(inputs[:16])] == [r.to_json() for r in results[:16]]
            assert extractor._pool.pids() == workers
    finally:
        extractor.close()
    # A Celery prefork worker is daemonic and may not start processes: it parses alone.
    monkeypatch.setattr("multiprocessing.current_process", lambda: type("Daemon", (), {"daemon": True})())
    assert parse_processes(2, len(inputs), 8) == 1


def test_a_parse_worker_killed_loses_no_passage(sample, caplog):
    from seem_dagster.episodic.extraction.embedded import EmbeddedExtractor

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: the extraction never starts workers")
    _, _, inputs, results = sample
    extractor = EmbeddedExtractor(batch_size=8, processes=2)
    try:
        extractor.extract(inputs[:16])
        killed = extractor._pool.pids()
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="seem_dagster.episodic.extraction.parse_pool"):
            again = extractor.extract(inputs)
        assert "a parse worker died" in caplog.text
        assert [r.to_json() for r in again] == [r.to_json() for r in results]  # all 48, in this process
        extractor.extract(inputs[:16])  # the next build starts new workers
        assert extractor._pool.pids() and not set(extractor._pool.pids()) & set(killed)
    finally:
        extractor.close()


def test_an_interrupt_handled_during_a_workers_fork_stops_the_build_after_it(monkeypatch):
    """SIGINT blocked in the forking thread still reaches another thread of the process, and Python then
    runs the handler in this one, possibly inside a library's at-fork hook: it must only be noted there,
    and raised once the worker is started and listed (so the interrupt kills it)."""
    import multiprocessing.context

    from seem_dagster.episodic.extraction.parse_pool import WorkerPool

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    started = []
    start = multiprocessing.context.ForkProcess.start

    def start_and_handle(self):  # the handler run inside the fork, as another thread's signal makes Python do
        start(self)
        started.append(self)
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", start_and_handle)
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        pool = WorkerPool(lambda chunk: chunk, 2)
        with pytest.raises(Interrupted):
            pool.map_chunks([1, 2, 3, 4], 2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(started) == 1 and started[0].exitcode == -signal.SIGKILL  # listed, so killed with the build
    assert pool._workers == []
