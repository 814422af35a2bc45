"""Whether a question asks for several things (pure).

"What activities does Melanie partake in?", "Which cities has Jon visited?", "How many books did she
read?": the answer is a list, and its items are usually in different sessions. Reverse Provenance
Expansion places the best matches' neighbouring turns after the top five, which is what a question
with one answer needs (the answer sits beside the turn that matched) and what a list question needs
only in part: its best match's event may hold an item in a neighbouring turn (the tank's fish named
in the session's first turn, the later turns talking about the tank), but expanding each of the top
matches gives the slots to their sessions instead of the other items the walk found. So a list
question has only its best match expanded (RetrievalConfig.list_breadth, list_top_passages_rpe).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

WH_WORDS = {"what", "which"}
FIRST_WORD = re.compile(r"\W*(\w+)")
PLURAL_NOUN_TAGS = {"NNS", "NNPS"}
# After "what"/"which", the plural noun that names the asked-for things comes within this many words
# ("what activities", "what kinds of books", "which Star Wars locations").
WINDOW = 3


def asks_for_several(tokens: Sequence[tuple[str, str]]) -> bool:
    """``tokens``: the question's (word, Penn Treebank tag) pairs, punctuation left out. True for a
    leading "how many", or a leading what/which followed within WINDOW words by a plural noun."""
    words = [(w.lower(), tag) for w, tag in tokens]
    if len(words) >= 2 and words[0][0] == "how" and words[1][0] == "many":
        return True
    if not words or words[0][0] not in WH_WORDS:
        return False
    return any(tag in PLURAL_NOUN_TAGS for _, tag in words[1:1 + WINDOW])


# Plural nouns that do not end in "s" (the tagger's NNS on the dev files' questions: children, people,
# women, media), so a question whose next words hold neither cannot ask for several.
IRREGULAR_PLURALS = frozenset("""people children men women feet teeth mice geese oxen lice dice data media criteria phenomena
bacteria alumni cacti fungi cattle police sheep deer fish""".split())
WORD = re.compile(r"[A-Za-z]+")


def may_ask_for_several(question: str) -> bool:
    """False when the question cannot ask for several things whatever its tags: its first word is not
    what, which or how; or after what/which no word within reach could be a plural noun (none ends in
    "s", none is an irregular plural). Most questions then need no tagging, and a one-shot query never
    loads the tagger for them."""
    words = WORD.findall(question)
    if not words or words[0].lower() not in WH_WORDS | {"how"}:
        return False
    if words[0].lower() == "how":
        return len(words) > 1 and words[1].lower() == "many"  # asks_for_several's "how many": no tag needed
    reach = [w.lower() for w in words[1:2 + WINDOW]]  # a word more than the tagger's window: contractions split there
    return any(w.endswith("s") or w in IRREGULAR_PLURALS for w in reach)


# "Which streaming service did I start using most recently?", "How many followers do I currently
# have?", "Do I still ...", "What is my current record": the latest statement answers.
LATEST = re.compile(r"\b(most recent(ly)?|latest|currently|current|now|still|these days|nowadays|at the moment|so far|anymore"
                    r"|any more|last time)\b", re.IGNORECASE)
# "Can you recommend ...", "any tips for ...", "suggest some ...", "what should I ...": the user's
# earlier sessions match by meaning, not by the question's words.
ADVICE = re.compile(r"\b(?:can|could|would|will) you (?:please )?(?:recommend|suggest|give me|help me|share|think of)\b"
                    r"|\bany (?:good |other |more )?(?:advice|tips|suggestions|recommendations|ideas)\b"
                    r"|\b(?:do you|what do you) (?:think|recommend|suggest)\b|\bwhat should i\b|\bshould i\b"
                    r"|^\s*(?:recommend|suggest)\b", re.IGNORECASE)


def asks_latest(question: str) -> bool:
    """Whether the question's words ask what holds now or happened last (the latest statement answers
    it); a request for advice is read otherwise (query.read_question)."""
    return bool(LATEST.search(question))


def asks_advice(question: str) -> bool:
    """Whether the question asks for a recommendation, tips or ideas rather than a fact that was said."""
    return bool(ADVICE.search(question))
