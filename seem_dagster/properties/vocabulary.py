"""Property names and how many values each holds at a time.

A fact's relation becomes a property name. A small vocabulary gives the canonical name of the
relations that mean one attribute ("live in", "move to" and "relocate to" are all ``lives_in``) and
marks the **single-valued** ones: a person lives in one place, works at one place, has one job title,
one spouse, one coach at a time, and a count ("I have two kids") has one value. A later value of a
single-valued property supersedes the earlier one.

**Rule for everything else:** a relation outside the vocabulary is multi-valued, named by its words
in snake case ("marry in" -> ``marry_in``), and its values accumulate (activities, places visited,
things bought). Treating an unknown relation as multi-valued never hides a value that still holds;
the cost is that a change of such a property is not marked as one.

Bump ``VERSION`` whenever a change here changes what the derivation writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERSION = "1"

# canonical name -> the relations (lemmas, as facts spell them) that state it. All single-valued.
SINGLE_VALUED: dict[str, tuple[str, ...]] = {
    "lives_in": ("live in", "live at", "move to", "move into", "relocate to", "settle in", "reside in"),
    "works_at": ("work at", "work for", "employ at", "employ by", "works at"),
    "job_title": ("work as", "start as", "employ as", "hire as", "promote to"),
    "studies_at": ("study at", "enrol at", "enroll at"),
    "spouse": ("marry", "be married to", "wed"),
}
# Relationship nouns of possessive facts ("my coach Marta" -> (speaker, coach, Marta)) that one
# person has one of at a time; sister, friend, neighbour and the like accumulate.
SINGLE_ROLES = frozenset({
    "coach", "therapist", "physiotherapist", "doctor", "dentist", "boss", "manager", "landlord", "landlady",
    "husband", "wife", "partner", "boyfriend", "girlfriend", "fiance", "fiancee", "fiancé", "fiancée",
})
# "got a job at the library", "took a position with Acme": the employer is in the object.
JOB_VERBS = frozenset({"get", "start", "take", "accept", "land", "begin", "have", "find", "start at"})
JOB_OBJECT = re.compile(r"^(?:(?:a|an|the|new|my)\s+)*(?:job|position|role|post)\s+(?:at|with|in)\s+(?:the\s+)?(?P<where>.+)$",
                        re.IGNORECASE)
# "I have two kids" -> kids_count = 2 (a count has one value at a time).
COUNT_VERBS = frozenset({"have", "own"})
NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2,
}
COUNT_OBJECT = re.compile(r"^(?P<n>\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")\s+(?P<noun>[a-z][a-z -]*)$",
                          re.IGNORECASE)
# Units that make "<number> <noun>" a measure, not a count of things one has.
NOT_COUNTED = frozenset({"minute", "minutes", "hour", "hours", "day", "days", "week", "weeks", "month", "months", "year", "years",
                         "time", "times", "kilometre", "kilometres", "mile", "miles", "percent"})

_ALIAS = {relation: name for name, relations in SINGLE_VALUED.items() for relation in relations}
_SINGLE = frozenset(SINGLE_VALUED) | SINGLE_ROLES


@dataclass(frozen=True)
class Named:
    property: str
    value: str
    single_valued: bool
    dtype: str | None = None  # set when the naming fixes it (a count is a number)


def snake(text: str) -> str:
    """A property name: lower-case words joined by underscores ("marry in" -> marry_in)."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def is_single_valued(name: str) -> bool:
    return name in _SINGLE or name.endswith("_count")


def name_property(relation: str, value: str) -> Named | None:
    """(relation, object) of a fact -> the property it states and its value; None when the relation
    has no usable name."""
    rel = " ".join(relation.lower().split())
    job = JOB_OBJECT.match(value.strip()) if rel in JOB_VERBS else None
    if job:
        return Named("works_at", job.group("where").strip(), True)
    count = COUNT_OBJECT.match(value.strip()) if rel in COUNT_VERBS else None
    if count and count.group("noun").lower() not in NOT_COUNTED:
        n = count.group("n").lower()
        number = int(n) if n.isdigit() else NUMBER_WORDS[n]
        return Named(f"{snake(count.group('noun'))}_count", str(number), True, "number")
    name = _ALIAS.get(rel) or snake(rel)
    if not name:
        return None
    return Named(name, value.strip(), is_single_valued(name))


def canonical_name(name: str) -> str:
    """A property name a model wrote -> ours: the vocabulary's when it is one of its relations."""
    spelled = " ".join(name.lower().replace("_", " ").split())
    return _ALIAS.get(spelled) or snake(spelled)
