"""Tenants of `seem mcp --http`: the tokens file (hashes only, scopes, changes seen without a restart,
a broken file lets nobody in), the address rules, and the refusal of arguments no tool has."""

from __future__ import annotations

import json
import os

import pytest

from seem_dagster.agent import tokens
from seem_dagster.agent.http_server import ServeError, is_loopback, parse_address
from seem_dagster.agent.mcp_server import unknown_arguments, validation_line


def test_a_token_is_stored_as_its_hash_with_its_scope_and_read_back(tmp_path):
    path = tmp_path / "tokens.json"
    alice, record = tokens.add(path, ["alice", "alice"], name="alice's agent")
    bob, _ = tokens.add(path, [], prefix="bob-")
    text = path.read_text()
    assert alice not in text and bob not in text and record["sha256"] == tokens.digest(alice)
    assert json.loads(text)["tokens"][0]["conversations"] == ["alice"] and oct(path.stat().st_mode & 0o777) == "0o600"
    held = tokens.TokensFile(path)
    a, b = held.tenant(alice), held.tenant(bob)
    assert a.may_read("alice") and not a.may_read("alice-2") and not a.may_read("bob-1")
    assert b.may_read("bob-1") and b.may_read("bob-") and not b.may_read("alice") and not b.may_read("xbob-1")
    assert held.tenant("seem_" + "x" * 43) is None and held.tenant(None) is None and held.tenant(alice + " ") is None
    assert [r["id"] for r in tokens.listed(path)] == [r["id"] for r in json.loads(text)["tokens"]]
    assert all("sha256" not in r for r in tokens.listed(path))
    assert not a.may_write("alice") and not b.may_write("bob-1")  # read only unless the operator said --write


def test_a_write_token_writes_only_where_it_reads(tmp_path):
    path = tmp_path / "tokens.json"
    writer, record = tokens.add(path, ["carol"], prefix="team-", write=True)
    held = tokens.TokensFile(path).tenant(writer)
    assert record["write"] is True and held.may_write("carol") and held.may_write("team-new")
    assert not held.may_write("alice") and not held.may_write("carol-2")


def test_a_change_to_the_file_is_seen_at_the_next_lookup_and_a_broken_file_lets_nobody_in(tmp_path, capsys):
    path = tmp_path / "tokens.json"
    alice, record = tokens.add(path, ["alice"])
    held = tokens.TokensFile(path)
    assert held.tenant(alice) is not None
    carol, _ = tokens.add(path, ["carol"])
    assert held.tenant(carol).may_read("carol")  # added while "running": no reload asked for
    tokens.revoke(path, record["id"])
    assert held.tenant(alice) is None and held.tenant(carol) is not None
    path.write_text("{not json")
    assert held.tenant(carol) is None and "every token is refused" in capsys.readouterr().err
    os.unlink(path)
    assert held.tenant(carol) is None


@pytest.mark.parametrize("content, message", [
    ("[]", 'expected an object with a "tokens" list'),
    ('{"tokens": [{"id": "t1"}]}', "token 1: a token record needs id, sha256"),
    ('{"tokens": [{"id": "t1", "sha256": "ab", "conversations": ["a"]}]}', "token 1: sha256 is not a SHA-256 hex digest"),
    ('{"tokens": [{"id": "t1", "sha256": "' + "a" * 64 + '", "conversations": []}]}', "token 1: the token names no conversation"),
    ('{"tokens": [{"id": "t1", "sha256": "' + "a" * 64 + '", "conversations": [], "prefix": ""}]}', "prefix must be a non-empty"),
    ('{"tokens": [{"id": "t1", "sha256": "' + "a" * 64 + '", "conversations": ["a"], "write": "yes"}]}', "write must be true or false"),
])
def test_a_malformed_tokens_file_is_refused_at_start_naming_the_file_and_the_record(tmp_path, content, message):
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(tokens.TokensError, match=message) as caught:
        tokens.TokensFile(path)
    assert str(caught.value).startswith(str(path))


def test_adding_needs_a_scope_and_revoking_an_unknown_id_says_so(tmp_path):
    path = tmp_path / "tokens.json"
    with pytest.raises(tokens.TokensError, match="name the token's conversations"):
        tokens.add(path, [])
    with pytest.raises(tokens.TokensError, match="--prefix is empty"):
        tokens.add(path, [], prefix=" ")
    with pytest.raises(tokens.TokensError, match="contains control character"):
        tokens.add(path, ["a\x00b"])
    assert not path.exists()
    tokens.add(path, ["a"])
    with pytest.raises(tokens.TokensError, match="no token with id 'tok_nope'"):
        tokens.revoke(path, "tok_nope")


def test_addresses_and_loopback():
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address(":0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("8765", "host:port", "127.0.0.1:70000"):
        with pytest.raises(ServeError, match="expected HOST:PORT"):
            parse_address(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.3.2.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("example.org")


def test_an_argument_no_tool_has_is_named_and_the_sdks_validation_report_becomes_one_line():
    accepted = {"search": frozenset({"question", "k", "date", "conversation_id"})}
    assert unknown_arguments("search", {"question": "q", "conversation": "x"}, accepted) == (
        "search has no argument 'conversation'; it takes: conversation_id, date, k, question")
    assert unknown_arguments("search", {"question": "q"}, accepted) is None
    assert unknown_arguments("search", ["q"], accepted) == "arguments must be an object"
    assert unknown_arguments("other", {"x": 1}, accepted) is None  # the SDK refuses an unknown tool itself
    report = ("Error executing tool search: 2 validation errors for searchArguments\nquestion\n  String should have at most 2000 "
              "characters [type=string_too_long, input_value='xxxx', input_type=str]\n    For further information visit https://e\n"
              "k\n  Input should be less than or equal to 50 [type=less_than_equal, input_value=90, input_type=int]\n")
    assert validation_line("search", report) == ("search: question: String should have at most 2000 characters; "
                                                 "k: Input should be less than or equal to 50")
