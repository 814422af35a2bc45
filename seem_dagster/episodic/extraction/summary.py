"""A turn's one-line summary: its most eventful sentences with "I" and "you" replaced by the
speakers' names (and the verbs agreeing), resolved dates after the words that said them, so the
summary reads, and embeds, on its own."""

from __future__ import annotations

import re

from seem_dagster.episodic.extraction.interface import PassageInput

MAX_SUMMARY_WORDS = 40
IRREGULAR_THIRD_PERSON = {"be": "is", "have": "has", "do": "does", "go": "goes"}
CONTRACTED_THIRD_PERSON = {"'m": "is", "'re": "is", "'ve": "has", "'ll": "will"}


def summary_sentences(scored) -> list:
    """The most eventful sentences, in their original order, within the summary length."""
    chosen, words = [], 0
    for _score, sent in sorted(scored, key=lambda p: -p[0]):
        if chosen and words + len(sent) > MAX_SUMMARY_WORDS:
            continue
        chosen.append(sent)
        words += len(sent)
    return sorted(chosen, key=lambda s: s.start)


def _third_person(verb) -> str:
    """The verb a named subject takes in place of "I"/"you": "am"/"'m"/"are" -> "is", "'ve" -> "has",
    "want" -> "wants", "'ll" -> "will" ("I'm away" must not read "Tomas'm away")."""
    low = verb.lower_
    if low in CONTRACTED_THIRD_PERSON:
        spelled = CONTRACTED_THIRD_PERSON[low]
    elif low == "'d":
        spelled = "had" if _next_is_participle(verb) else "would"
    elif low == "were":
        spelled = "was"
    elif verb.tag_ != "VBP":
        spelled = None
    elif verb.lemma_ in IRREGULAR_THIRD_PERSON:
        spelled = IRREGULAR_THIRD_PERSON[verb.lemma_]
    elif re.search(r"(s|sh|ch|x|z|o)$", low):
        spelled = low + "es"
    elif re.search(r"[^aeiou]y$", low):
        spelled = low[:-1] + "ies"
    else:
        spelled = low + "s"
    if spelled is None:
        return verb.text
    if verb.text[:1].isupper():
        spelled = spelled[:1].upper() + spelled[1:]
    return (" " if verb.text.startswith("'") else "") + spelled


def _next_is_participle(tok) -> bool:
    return tok.i + 1 < len(tok.doc) and tok.doc[tok.i + 1].tag_ == "VBN"


def _agreeing_verbs(sentences, replaced) -> dict:
    """For each replaced subject pronoun, its clause's finite verb, by token index."""
    out = {}
    for tok in (t for sent in sentences for t in sent):
        joined = any(c.dep_ == "conj" for c in tok.children)  # "you and I are" stays plural
        if tok.dep_ in ("nsubj", "nsubjpass") and tok.lower_ in replaced and not joined:
            head = tok.head
            finite = min([c for c in head.children if c.dep_ in ("aux", "auxpass")] + [head], key=lambda t: t.i)
            out[finite.i] = _third_person(finite)
    return out


def summarise(inp: PassageInput, sentences, times, other) -> str:
    words = []
    replaced = {"i"} | ({"you"} if other else set())
    verbs = _agreeing_verbs(sentences, replaced)
    for tok in (t for sent in sentences for t in sent):
        low = tok.lower_
        if low in ("i", "me", "myself"):
            text = inp.speaker
        elif low in ("my", "mine"):
            text = f"{inp.speaker}'s"
        elif low in ("you", "yourself") and other:
            text = other
        elif low == "your" and other:
            text = f"{other}'s"
        elif tok.i in verbs:
            text = verbs[tok.i]
        else:
            text = tok.text
        words.append(text)
        for _start, end, resolved in times:
            if tok.idx < end <= tok.idx + len(tok.text):
                words.append(f" ({resolved.iso})")
        words.append(tok.whitespace_)
    body = re.sub(r"\s+", " ", "".join(words)).strip() or inp.text
    clipped = body.split()
    if len(clipped) > MAX_SUMMARY_WORDS:
        body = " ".join(clipped[:MAX_SUMMARY_WORDS]) + " …"
    return f"{inp.speaker}: {body}"
