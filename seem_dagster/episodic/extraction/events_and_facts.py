"""Events and facts from spaCy's parse of one turn: the embedded extractor's rules.

One event per main verb, clause of time ("when I visited ...") or gerund after a preposition
("thinking of adding ..."), with the six roles (participants, action, time, location, cause, manner);
facts (subject, relation, object, time) from the same clauses, with the speaker as the subject of
"I" and the other speaker as "you"; relative dates resolved against the session date (timex.py).
The turn's summary is written by summary.py from the sentences scored here.
"""

from __future__ import annotations

import re

from seem_dagster.episodic.extraction import timex
from seem_dagster.episodic.extraction.interface import Event, Fact, PassageExtraction, PassageInput
from seem_dagster.episodic.extraction.summary import summarise, summary_sentences

FIRST_PERSON = {"i", "me", "myself", "we", "us", "ourselves"}
FIRST_POSSESSIVE = {"my", "our", "mine", "ours"}
SECOND_PERSON = {"you", "yourself", "yourselves"}
SECOND_POSSESSIVE = {"your", "yours"}
SUBJECT_DEPS = {"nsubj", "nsubjpass", "csubj"}
OBJECT_DEPS = {"dobj", "attr", "oprd", "acomp", "dative"}
NAMED_ARGUMENT_DEPS = SUBJECT_DEPS | OBJECT_DEPS | {"pobj", "appos"}
CAUSE_MARKS = {"because", "since", "as", "cause", "cuz"}
PLACE_LABELS = {"GPE", "LOC", "FAC"}
TIME_LABELS = {"DATE", "TIME"}
CLOCK_DAY = re.compile(r"\b(this|last|tonight|yesterday|today|tomorrow)\b", re.IGNORECASE)
RECURRING = {"every", "each"}
WH_TAGS = {"WP", "WDT", "WRB"}
# The conjunctions of a clause of time: "when I visited", "after we moved", "while she was away".
WHEN_MARKS = {"when", "while", "after", "before", "since", "once", "until", "till", "whenever"}
# Objects that name nothing on their own: "replaced it with a toaster oven" says (replace with; toaster oven).
BARE_PRONOUNS = {"it", "this", "that", "them", "these", "those"}
# Amounts whose "of" phrase is the thing: "20 pounds of scratch grains", "a bunch of tomatoes".
AMOUNT_LABELS = {"QUANTITY", "CARDINAL", "MONEY", "PERCENT"}
# Light verbs and fillers that make no event on their own ("I think", "you know").
SKIP_LEMMAS = {"think", "know", "guess", "mean", "hope", "wish", "bet", "say", "see"}
MAX_PHRASE_TOKENS = 8
# Prepositional phrases that mark the discourse, not an argument of the verb: "By the way, I got back
# into art" is no fact (I; get by; way), and the sentence's time belongs to what follows.
DISCOURSE_MARKERS = {("by", "way"), ("in", "fact"), ("of", "course"), ("for", "example"), ("for", "instance"),
                     ("at", "least"), ("in", "general"), ("after", "all"), ("in", "particular"), ("in", "addition"),
                     ("at", "all")}


def other_speaker(inp: PassageInput) -> str | None:
    if inp.previous_speaker and inp.previous_speaker != inp.speaker:
        return inp.previous_speaker
    others = [s for s in inp.speakers if s != inp.speaker]
    return others[0] if len(others) == 1 else None


def _prefer(token) -> str:
    """Future for will/going to/present-tense plans ("It's on the 20th"), past otherwise."""
    chain = [token, *token.ancestors]
    for node in chain:
        aux = {c.lower_ for c in node.children if c.dep_ in ("aux", "auxpass")} | ({node.lower_} if node.dep_ == "aux" else set())
        if aux & {"will", "'ll", "shall", "gon", "gonna"} or node.lower_ in ("going", "planning", "plan"):
            return "future"
    for node in chain:
        if node.tag_ in ("VBD", "VBN") or node.lower_ in ("did", "was", "were", "had"):
            return "past"
        if node.tag_ in ("VBZ", "VBP", "MD"):
            return "future"
    return "past"


def _time_spans(doc, base) -> list[tuple[int, int, timex.ResolvedTime]]:
    spans: list[tuple[int, int, timex.ResolvedTime]] = []
    candidates = [
        (e.start_char, e.end_char, e)
        for e in doc.ents
        if e.label_ == "DATE" or (e.label_ == "TIME" and CLOCK_DAY.search(e.text))
    ]
    for m in timex.RELATIVE_PATTERN.finditer(doc.text):
        if not any(s <= m.start() < e or m.start() <= s < m.end() for s, e, _ in candidates):
            span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
            if span is not None:
                candidates.append((m.start(), m.end(), span))
    for start, end, span in sorted(candidates, key=lambda c: c[0]):
        if span.start > 0 and doc[span.start - 1].lower_ in RECURRING:
            continue  # "every Sunday" is a habit, not a date
        resolved = timex.resolve(span.text, base, prefer=_prefer(span.root))
        if resolved:
            spans.append((start, end, resolved))
    return spans


def _phrase_tokens(token, limit: int = MAX_PHRASE_TOKENS) -> list:
    """The tokens of the noun phrase headed by ``token``: its left modifiers and compact right side, no clauses."""
    keep = [t for t in token.subtree if not _in_clause(t, token)]
    words = [t for t in keep if t.dep_ not in ("det", "punct", "cc", "prep") or t.i > token.i and t.dep_ == "prep"]
    words = [t for t in words if t.dep_ != "det"] or [token]
    return words[:limit]


def _phrase(token, limit: int = MAX_PHRASE_TOKENS) -> str:
    return " ".join(t.text for t in _phrase_tokens(token, limit)).strip()


def _span(*tokens) -> tuple[int, int]:
    """Where a fact is said: the characters from the first to the end of the last of ``tokens`` and the
    entities or noun phrases they head."""
    out = []
    for tok in tokens:
        ent = _entity_of(tok)
        out += list(ent) if ent is not None else _phrase_tokens(tok) + [tok]
    return min(t.idx for t in out), max(t.idx + len(t.text) for t in out)


def _in_clause(t, head) -> bool:
    node = t
    while node.i != head.i:
        if node.dep_ in ("relcl", "acl", "advcl", "ccomp", "conj", "appos"):
            return True
        node = node.head
    return False


def _prep_objects(verb, preps: tuple[str, ...] | None = None):
    """(preposition, its object) of each prepositional phrase of ``verb`` (those of ``preps`` only,
    when given), discourse markers left out."""
    for prep in (c for c in verb.children if c.dep_ == "prep" and (preps is None or c.lower_ in preps)):
        pobj = next((c for c in prep.children if c.dep_ == "pobj"), None)
        if pobj is not None and (prep.lower_, pobj.lower_) not in DISCOURSE_MARKERS:
            yield prep, pobj


def _resolve_person(token, inp: PassageInput, other: str | None) -> str | None:
    low = token.lower_
    if low in FIRST_PERSON or low in FIRST_POSSESSIVE:
        return inp.speaker
    if low in SECOND_PERSON or low in SECOND_POSSESSIVE:
        return other
    return None


def _entity_text(token, inp: PassageInput, other: str | None) -> str | None:
    person = _resolve_person(token, inp, other)
    if person:
        return person
    if token.pos_ == "PRON":
        return None
    named = next((c for c in token.children if c.dep_ == "appos" and c.pos_ == "PROPN"), None)
    if token.pos_ == "NOUN" and named is not None:
        return _name_of(named)  # "my neighbour Ines offered" -> Ines
    ent = _entity_of(token)
    if ent is not None and ent.label_ in AMOUNT_LABELS and any(c.dep_ == "prep" and c.lower_ == "of" for c in token.children):
        ent = None
    return ent.text if ent is not None else _phrase(token)


def _entity_of(tok):
    """The named-entity span ``tok`` is part of, or None."""
    if not tok.ent_type_ or tok.ent_iob_ == "O":
        return None
    return next((e for e in tok.doc.ents if e.start <= tok.i < e.end), None)


def _name_of(tok) -> str:
    ent = _entity_of(tok)
    return ent.text if ent is not None else " ".join(t.text for t in tok.subtree if t.dep_ == "compound" or t.i == tok.i)


def _named_arguments(verb) -> list[str]:
    """Third parties the clause is about, whatever the NER label: proper-noun arguments, no places or
    dates ("my neighbour Ines offered", "Did Biscuit behave with Ines?": the small model tags Ines ORG)."""
    return [
        _name_of(tok) for tok in verb.subtree
        if tok.pos_ == "PROPN" and tok.dep_ in NAMED_ARGUMENT_DEPS and tok.ent_type_ not in TIME_LABELS | PLACE_LABELS
        and tok.i != verb.i and not _in_clause(tok.head if tok.dep_ == "appos" else tok, verb)
    ]


def _subject(verb, inp, other):
    node = verb
    for _ in range(3):
        subj = next((c for c in node.children if c.dep_ in SUBJECT_DEPS), None)
        if subj is not None:
            return subj
        if node.dep_ in ("conj", "xcomp", "advcl") and node.head.i != node.i:
            node = node.head
        elif node.dep_ == "pcomp" and node.head.dep_ == "prep":  # "thinking of adding plants": who thinks adds
            node = node.head.head
        else:
            break
    return None


def _object(verb):
    """(relation suffix, object token) — direct object first, then a prepositional object.

    A wh-word is no object ("What did Tomas make for Priya?" -> (Tomas; make for; Priya)), so a
    question yields the fact it asks about.
    """
    obj = next((c for c in verb.children if c.dep_ in OBJECT_DEPS and c.tag_ not in WH_TAGS and c.lower_ not in BARE_PRONOUNS), None)
    if obj is not None:
        return "", obj
    for prep, pobj in _prep_objects(verb):
        return prep.lower_, pobj
    xcomp = next((c for c in verb.children if c.dep_ == "xcomp"), None)
    if xcomp is not None:
        inner = _object(xcomp)
        if inner[1] is not None:
            return (xcomp.lemma_ + (" " + inner[0] if inner[0] else "")).strip(), inner[1]
    return "", None


def _predicates(sent):
    for tok in sent:
        if tok.pos_ not in ("VERB", "AUX"):
            continue
        # Main clauses, and two that tell of an event in passing: a clause of time ("when I visited the
        # Art Cube on 2/15") and a gerund after a preposition ("thinking of adding plants"). Relative
        # clauses and other adverbial ones ("if", "so that", "to") added more noise than facts.
        if tok.dep_ == "advcl" and not any(c.dep_ in ("mark", "advmod") and c.lower_ in WHEN_MARKS for c in tok.children):
            continue
        if tok.dep_ == "ROOT" or (tok.dep_ in ("conj", "ccomp", "xcomp", "advcl", "pcomp") and tok.pos_ == "VERB"):
            if tok.pos_ == "AUX" and not any(c.dep_ in ("attr", "acomp") for c in tok.children):
                continue
            yield tok


def _cause(verb) -> str | None:
    for child in verb.children:
        if child.dep_ == "advcl" and any(m.lower_ in CAUSE_MARKS for m in child.children if m.dep_ == "mark"):
            words = [t.text for t in child.subtree if not (t.dep_ == "mark" and t.head.i == child.i)]
            return " ".join(words)
        if child.dep_ == "prep" and child.lower_ == "because":
            return " ".join(t.text for t in child.subtree if t.i != child.i).removeprefix("of ").strip() or None
    # "..., so I stopped": the clause before "so" is the cause of this one.
    if verb.dep_ == "conj" and any(c.lower_ == "so" for c in verb.children if c.dep_ in ("advmod", "cc", "mark")):
        head = verb.head
        return " ".join(t.text for t in head.subtree if t.i < verb.i and t.dep_ != "punct" and t.lower_ != "so") or None
    return None


def _manner(verb) -> str | None:
    parts = [c.text for c in verb.children if c.dep_ == "advmod" and c.tag_ == "RB" and c.lower_.endswith("ly")]
    for prep, pobj in _prep_objects(verb, ("by", "with")):
        if pobj.ent_type_ != "PERSON" and pobj.pos_ != "PRON":
            parts.append(f"{prep.lower_} {_phrase(pobj, 4)}")
    return ", ".join(parts) or None


def _location(sent, verb) -> str | None:
    subtree = {t.i for t in verb.subtree}
    for ent in sent.ents:
        if ent.label_ in PLACE_LABELS and ent.root.i in subtree:
            return ent.text
    for _, pobj in _prep_objects(verb, ("in", "at")):
        if pobj.ent_type_ not in TIME_LABELS and pobj.pos_ in ("PROPN", "NOUN"):
            if not timex.ANCHOR.search(pobj.text):
                return _phrase(pobj, 5)
    return None


def extract_one(inp: PassageInput, doc) -> PassageExtraction:
    other = other_speaker(inp)
    times = _time_spans(doc, inp.timestamp)
    people = [e.text for e in doc.ents if e.label_ == "PERSON"]
    events: list[Event] = []
    facts: list[Fact] = []
    scored = []
    for sent in doc.sents:
        sent_times = [t for s, e, t in times if sent.start_char <= s < sent.end_char]
        time = sent_times[0] if sent_times else None
        sent_events = 0
        for verb in _predicates(sent):
            if verb.lemma_.lower() in SKIP_LEMMAS and any(c.dep_ == "ccomp" for c in verb.children):
                continue
            subj_tok = _subject(verb, inp, other)
            subject = _entity_text(subj_tok, inp, other) if subj_tok is not None else None
            prep, obj_tok = _object(verb)
            obj = _entity_text(obj_tok, inp, other) if obj_tok is not None else None
            negated = any(c.dep_ == "neg" for c in verb.children)
            particle = " ".join(c.lower_ for c in verb.children if c.dep_ == "prt")
            relation = " ".join(x for x in ("not" if negated else "", verb.lemma_.lower(), particle, prep) if x)
            action = " ".join(x for x in (relation, obj or "") if x)
            participants = []
            for tok in verb.subtree:
                name = _resolve_person(tok, inp, other) if tok.pos_ == "PRON" else None
                if name and name not in participants:
                    participants.append(name)
            if subject and subject not in participants and (subj_tok.pos_ == "PROPN" or subj_tok.ent_type_ == "PERSON"):
                participants.insert(0, subject)
            for person in people:
                if person not in participants and any(person in t.text for t in verb.subtree if t.ent_type_ == "PERSON"):
                    participants.append(person)
            location = _location(sent, verb)
            participants += [n for n in dict.fromkeys(_named_arguments(verb)) if n not in participants and n != location]
            events.append(
                Event(
                    participants=participants,
                    action=action,
                    time=time.iso if time else None,
                    time_text=time.text if time else None,
                    location=location,
                    cause=_cause(verb),
                    manner=_manner(verb),
                )
            )
            sent_events += 1
            if subject and obj and subject != obj:
                start, end = _span(obj_tok)
                start, end = min(start, verb.idx), max(end, verb.idx + len(verb.text))  # from the verb on
                facts.append(Fact(subject, relation, obj, time.iso if time else None, time.text if time else None, start, end))
        facts.extend(_possessive_facts(sent, inp, other, time))
        score = sent_events * 2 + len(sent_times) * 2 + len(sent.ents) + min(len(sent), 25) / 25
        if any(t.lower_ in FIRST_PERSON | FIRST_POSSESSIVE for t in sent):
            score += 1
        scored.append((score, sent))
    summary = summarise(inp, summary_sentences(scored), times, other)
    return PassageExtraction(inp.passage_id, summary, events, _dedupe(facts))


def _possessive_facts(sent, inp, other, time) -> list[Fact]:
    """"my sister Lena" -> (speaker, sister, Lena); "his name is Biscuit" stays a plain copula fact."""
    out = []
    for tok in sent:
        if tok.dep_ == "appos" and tok.head.pos_ == "NOUN":
            owner = next((c for c in tok.head.children if c.dep_ == "poss"), None)
            who = _resolve_person(owner, inp, other) if owner is not None else None
            if who:
                out.append(Fact(who, tok.head.lemma_.lower(), _entity_text(tok, inp, other) or tok.text,
                                time.iso if time else None, time.text if time else None, *_span(owner, tok)))
        if tok.dep_ == "poss" and tok.head.pos_ == "NOUN" and tok.lower_ in FIRST_POSSESSIVE | SECOND_POSSESSIVE:
            who = _resolve_person(tok, inp, other)
            if who and tok.head.dep_ not in SUBJECT_DEPS | OBJECT_DEPS | {"pobj"}:
                words = _phrase_tokens(tok.head, 5)
                out.append(Fact(who, "have", " ".join(t.text for t in words).strip(), None, None,
                                min(t.idx for t in (tok, *words)), max(t.idx + len(t.text) for t in (tok, *words))))
    return out


def _dedupe(facts: list[Fact]) -> list[Fact]:
    seen, out = set(), []
    for f in facts:
        key = (f.subject.lower(), f.relation, f.object.lower(), f.time)
        if key not in seen and f.subject.strip() and f.object.strip() and f.relation.strip():
            seen.add(key)
            out.append(f)
    return out
