"""Annotation guidelines: the instructions and examples each task page shows, with versions.

Every answer and label records the guideline version it was given under, so a later
change of instructions can be told apart in the data.
"""

from __future__ import annotations

VERSIONS = {"verify": "2026.12", "entities": "2026.11", "relations": "2026.12", "clusters": "2026.11"}

INSTRUCTIONS = {
    "verify": {
        "summary": "Read the highlighted passage. Decide whether the stated relation between the "
                   "blue subject and the orange object is expressed by this text.",
        "rules": [
            "Judge only what this passage says, not what you know from elsewhere.",
            "Choose 'holds' when the passage states or clearly implies the relation.",
            "Choose 'another relation' when the two are related, but by a different relation; pick it.",
            "Choose 'no relation' when the passage does not connect them this way.",
            "Then check each highlighted mention: is it a real name of an entity (or, for the object, a value "
            "such as a date or a number), marked at the right words?",
        ],
        "examples": [
            {"text": "Barack Obama was born in Honolulu, Hawaii.", "subject": "Barack Obama",
             "relation": "place of birth", "object": "Honolulu", "answer": "holds"},
            {"text": "Obama visited Honolulu in 2019.", "subject": "Obama",
             "relation": "place of birth", "object": "Honolulu", "answer": "no relation"},
            {"text": "Angela Merkel, chancellor of Germany, met ...", "subject": "Angela Merkel",
             "relation": "country of citizenship", "object": "Germany",
             "answer": "another relation (position held / employer), unless citizenship is stated"},
        ],
        "keys": [("1", "holds"), ("2", "another relation"), ("3", "no relation"),
                 ("s", "subject mention wrong"), ("o", "object mention wrong"), ("Enter", "submit"),
                 ("u or Backspace", "undo your last answer")],
    },
    "entities": {
        # the generic text (the MTurk preview); a task page shows entity_guide(its schema's types)
        "summary": "Mark every mention of an entity of the listed types in the document, give its type, "
                   "and group mentions that refer to the same thing.",
        "rules": [
            "Select a span with the mouse (or move the token cursor with ← → and extend with Shift+← →).",
            "Press the type's key to mark the selection; marking a marked span again changes its type.",
            "Press g to put the mention under the cursor (or the one you just marked) in a group: the list offers "
            "the nearest earlier group of the same type first (Enter or g again takes it), 1–9 another, Esc none.",
            "Press k on a mention to give its knowledge-base link (e.g. a Wikidata id), when you know it.",
            "Do not mark nested spans: 'University of Tokyo' is one ORG, not also a place 'Tokyo' inside it.",
            "Backspace removes the mention under the cursor.",
        ],
        "examples": [
            {"text": "Marie Curie moved to Paris in 1891. Curie later ...",
             "answer": "Marie Curie (PER, group 1), Paris (a place), Curie (PER, group 1)"},
        ],
        "keys": [("← →", "move"), ("Shift+← →", "extend"), ("type key", "mark"),
                 ("[ ]", "previous / next mention"), ("g", "group picker"), ("k", "KB link"),
                 ("Backspace", "remove"), ("u", "undo your last answer"), ("Enter", "submit")],
    },
    "relations": {
        "summary": "For each pair of highlighted mentions in one sentence, choose every relation the "
                   "sentence states between them, in the right direction, or none.",
        "rules": [
            "A → B means A is the subject: 'A born in B' is A → B place of birth.",
            "Choose nothing (the default) when the sentence does not state a relation of the list; submitting a "
            "document with no relation at all asks you to confirm.",
            "Type part of a relation's name ('birth', 'headq'): the list shows the relations that fit the pair's "
            "types, and Enter adds the first.",
            "Several relations may hold for one pair.",
            "Judge the sentence shown; the whole document is there for context.",
            "When the two mentions lie in different sentences (a corpus whose recall counts every fact of a "
            "document), judge the passage shown and the whole document: choose every relation it states between "
            "the two entities, through any of their mentions.",
        ],
        "examples": [
            {"text": "Curie was born in Warsaw.", "answer": "Curie → Warsaw: place of birth"},
            {"text": "Curie visited Warsaw.", "answer": "none"},
        ],
        "keys": [("j / k", "next / previous pair"), ("/", "search a relation"),
                 ("Enter", "add the first match"), ("↑ ↓", "choose another match"), ("x", "clear the pair"),
                 ("u", "undo your last answer"), ("Ctrl+Enter", "submit")],
    },
    "clusters": {
        "summary": "Each line is the name of an entity that has no knowledge-base entry, with the sentence it comes "
                   "from. Put the lines that name the same real-world entity in one group.",
        "rules": [
            "Move between lines with j / k (or the arrow keys).",
            "Press a letter key (a-z, but j and k, which move) to put the current line in that group; the cursor "
            "stays on the line, and the line below the list says what it is grouped with. Lines with the same "
            "letter are one entity; a line without a letter is an entity of its own. More groups than letters: "
            "Shift and a letter (A-Z) are 26 more.",
            "Press the same letter again, or Backspace, to take the line out of its group.",
            "Enter shows your groups to check before they are sent: Enter again sends them, Esc goes back to "
            "editing. Until then your groups are kept in this browser, should you leave the page.",
            "Judge by the names and the sentences: 'Dr. Smith' and 'John Smith' are one group only if the "
            "sentences show they are the same person.",
        ],
        "examples": [
            {"text": "1: Acme Corp. (doc A) · 2: Acme (doc B, 'Acme, the toy maker, ...') · 3: Acme (doc C, "
                     "'the Acme river')", "answer": "1 and 2 in group a; 3 alone"},
        ],
        "keys": [("j / k, ↓ ↑", "next / previous line"), ("a-z, A-Z", "put the line in that group (the cursor stays)"),
                 ("Backspace", "take it out"), ("Enter", "review the groups, then Enter sends"),
                 ("Esc", "back from the review")],
    },
}


#: the entity task's example: (mention, the types it may have, in order of preference, its group)
_EXAMPLE_TEXT = "Marie Curie moved to Paris in 1891 and won the Nobel Prize. Curie later ..."
_EXAMPLE_MENTIONS = [("Marie Curie", ("PER",), 1), ("Paris", ("GPE", "LOC"), None), ("1891", ("TIME", "DATE"), None),
                     ("the Nobel Prize", ("MISC", "AWARD"), None), ("Curie", ("PER",), 1)]


def entity_guide(types: dict[str, str]) -> dict:
    """The entity task's instructions for a schema with entity ``types`` (type -> description): the summary
    lists exactly these types with their keys (the digits, in the legend's order), and the example marks only
    what these types cover."""
    names = sorted(types)
    listed = "; ".join(f"{i + 1} {t} ({types[t]})" for i, t in enumerate(names))
    answer = []
    for mention, kinds, group in _EXAMPLE_MENTIONS:
        typ = next((t for t in kinds if t in types), None)
        if typ is None:
            answer.append(f"{mention}: not marked (no type for it)")
        else:
            answer.append(f"{mention} ({typ}{f', group {group}' if group else ''})")
    return {**INSTRUCTIONS["entities"],
            "summary": f"Mark every mention of an entity of these types, give its type and group mentions that "
                       f"refer to the same thing: {listed}. Do not mark anything else.",
            "examples": [{"text": _EXAMPLE_TEXT, "answer": "; ".join(answer)}]}
