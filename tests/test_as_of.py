"""`seem query --as-of`: the memory as it stood on a date, and the context marking superseded values."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE_CONVERSATION_ID, seem_cli

pytestmark = pytest.mark.slow  # reads a store built through Dagster


def query(store, *args: str) -> dict:
    done = seem_cli("query", "--store", str(store), "--conversation", SAMPLE_CONVERSATION_ID, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_as_of_a_date_answers_from_what_was_said_by_then_and_the_value_that_held(sample_store):
    then = query(sample_store, "--as-of", "2024-04-14", "Where does Tomas live?")
    assert then["as_of"].startswith("2024-04-14T23:59:59") and then["date"].startswith("2024-04-14")
    assert then["passages"] and all(p["timestamp"] <= "2024-04-14T23:59:59" for p in then["passages"])
    assert then["passages"][0]["source_ref"] == "s1-12"  # "I live in Chorlton"
    assert "- Tomas lives_in: Chorlton since 2024-03-02 (said 2024-03-02)" in then["context"]
    assert "Didsbury" not in then["context"]

    now = query(sample_store, "--date", "2024-11-01", "Where does Tomas live now?")
    # the old statement outranks the move ("live" matches it word for word); the history in the context says which holds
    assert now["as_of"] is None and "s4-12" in [p["source_ref"] for p in now["passages"][:10]]
    assert ("- Tomas lives_in: Didsbury since 2024-09-01 (said 2024-10-20); earlier Chorlton from 2024-03-02 until 2024-09-01"
            in now["context"])


def test_as_of_refuses_a_date_it_cannot_read(sample_store):
    done = seem_cli("query", "--store", str(sample_store), "--conversation", SAMPLE_CONVERSATION_ID, "--as-of", "last spring", "x")
    assert done.returncode == 2 and "--as-of 'last spring' is not an ISO date" in done.stderr
