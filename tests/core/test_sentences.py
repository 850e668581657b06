"""The rule-based sentence splitter: rules by example, properties, throughput."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.corpus import split_sentences
from unpooled.core.corpus.sentences import ABBREVIATIONS, split_markup_sentences

TAG = re.compile(r"<[^<>]*>")


def texts_of(text: str, spans) -> list[str]:
    return [text[s:e] for s, e in spans]


def split(text: str) -> list[str]:
    return texts_of(text, split_sentences(text))


# ---------------------------------------------------------------------------
# rules by example
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Mr. Smith went to Washington. He stayed.", ["Mr. Smith went to Washington.", "He stayed."]),
    ("It rained! Did it? Yes.", ["It rained!", "Did it?", "Yes."]),
    ("Wait... Then go.", ["Wait...", "Then go."]),
    ('He said "Go." Then he left.', ['He said "Go."', "Then he left."]),
    ("He left (for good.) Then?", ["He left (for good.)", "Then?"]),
    ('She stopped. "Why?" he asked.', ["She stopped.", '"Why?" he asked.']),
    ("It fell. (Nobody saw.)", ["It fell.", "(Nobody saw.)"]),
    ("Scores rose in 1990. 1991 was worse.", ["Scores rose in 1990.", "1991 was worse."]),
    ("It ended. and then more.", ["It ended. and then more."]),  # lower case: no split
    ("Version 2.0 is out.Next", ["Version 2.0 is out.Next"]),  # no whitespace: no split
    ("The U.S. Army won. J. R. R. Tolkien wrote.", ["The U.S. Army won.", "J. R. R. Tolkien wrote."]),
    ("Acme Inc. Reported gains. Smith & Co. Ltd. Fell.", ["Acme Inc. Reported gains.", "Smith & Co. Ltd. Fell."]),
    ("See e.g. Smith, i.e. Jones vs. Brown.", ["See e.g. Smith, i.e. Jones vs. Brown."]),
    ("On Jan. 5 and Sept. 9 Gen. Lee and Sen. Roe met Dr. Who at St. Paul and No. 10.",
     ["On Jan. 5 and Sept. 9 Gen. Lee and Sen. Roe met Dr. Who at St. Paul and No. 10."]),
    ("ST. LOUIS (AP) -- It snowed. Roads closed.", ["ST. LOUIS (AP) -- It snowed.", "Roads closed."]),
    ("Prof. Ann Lee, Ph.D. Spoke. Then left.", ["Prof. Ann Lee, Ph.D. Spoke.", "Then left."]),
    ("He met Zoë. Émile came too.", ["He met Zoë.", "Émile came too."]),  # non-ASCII capital
    ("He met Zoë. émile came too.", ["He met Zoë. émile came too."]),
    ("He met Zoë. «Hi» he said.", ["He met Zoë.", "«Hi» he said."]),
    ("Title line\n\nBody text here", ["Title line", "Body text here"]),  # blank line always splits
    ("One line\nnext line", ["One line\nnext line"]),  # a single newline does not
    ("A\r\n\r\nB\n \t\nC", ["A", "B", "C"]),  # blank lines may hold spaces, CRLF counts
    ("  \n padded sentence.  \n ", ["padded sentence."]),
    ("", []),
    (" \n\n \t ", []),
])
def test_rules(text, expected):
    assert split(text) == expected


def test_offsets_are_absolute_and_end_exclusive():
    text = "Mr. Smith went to Washington. He stayed."
    assert split_sentences(text) == [(0, 29), (30, 40)]
    # a sub-range keeps offsets into the whole text
    assert split_sentences(text, 4, 40) == [(4, 29), (30, 40)]
    assert split_sentences(text, 30) == [(30, 40)]
    assert split_sentences(text, 0, 9) == [(0, 9)]
    assert split_sentences(text, 35, 5) == []
    assert split_sentences(text, -3, 10_000) == split_sentences(text)


def test_abbreviation_list_covers_the_brief():
    for a in "Mr. Mrs. Dr. St. Jr. Inc. Corp. Co. Ltd. vs. Gen. Sen. Rep. Gov. Prof. No. Jan. Feb. Sept. Dec.".split():
        assert a in ABBREVIATIONS
        assert len(split_sentences(f"Before {a} After")) == 1, a


def test_markup_examples():
    raw = "<DOC><P>It rained. We left.</P><P>Home</P></DOC>"
    assert texts_of(raw, split_markup_sentences(raw)) == ["It rained.", "We left.", "Home"]
    # a tag ends a sentence even mid-sentence; entities stay raw; a lone "<" is text
    raw = '<P>Smith &amp; Sons <b>made</b> 3 < 4 widgets.\n\nNext para</P>'
    assert texts_of(raw, split_markup_sentences(raw)) == ["Smith &amp; Sons", "made", "3 < 4 widgets.", "Next para"]
    raw = "<doc id='x'>\n<headline>\nA title\n</headline>\n<post author=\"a\">\nHi there. Bye.\n</post>\n</doc>"
    assert texts_of(raw, split_markup_sentences(raw)) == ["A title", "Hi there.", "Bye."]
    assert split_markup_sentences("<DOC></DOC>") == []
    assert split_markup_sentences("") == []


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------

PIECES = [
    "a", "b", "Z", "É", "é", "1", "7", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\xa0", ".", "!", "?", "...",
    '"', "'", "(", ")", "[", "]", "«", "»", "“", "”", "Mr.", "U.S.", "e.g.", "J.", "Inc.", "ST.", "The", "word",
]
MARKUP = PIECES + ["<", ">", "<P>", "</P>", "<DOC id=\"d\">", "</DOC>", "&amp;", "<a\nb>", "<>"]

plain_texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join) | st.text(max_size=80)
markup_texts = st.lists(st.sampled_from(MARKUP), max_size=60).map("".join) | st.text(
    st.sampled_from("ab A.!?<>/ \n\"'"), max_size=80)


def check_spans(text: str, spans, lo: int = 0, hi: int | None = None) -> None:
    hi = len(text) if hi is None else hi
    prev = lo
    for s, e in spans:
        assert lo <= prev <= s < e <= hi, (spans, lo, hi)
        assert not text[s].isspace() and not text[e - 1].isspace(), (text[s:e],)
        prev = e


def covered(spans, n: int) -> list[bool]:
    flags = [False] * n
    for s, e in spans:
        for i in range(s, e):
            flags[i] = True
    return flags


@settings(max_examples=400, deadline=None)
@given(plain_texts)
def test_plain_properties(text):
    spans = split_sentences(text)
    check_spans(text, spans)
    # every non-space character is in a sentence
    flags = covered(spans, len(text))
    assert all(flags[i] or text[i].isspace() for i in range(len(text)))
    # a sentence re-split alone is itself
    for s, e in spans:
        assert split_sentences(text, s, e) == [(s, e)]


@settings(max_examples=300, deadline=None)
@given(plain_texts, st.integers(0, 80), st.integers(0, 80))
def test_plain_subrange_equals_slice(text, a, b):
    a, b = min(a, len(text)), min(max(a, b), len(text))
    spans = split_sentences(text, a, b)
    check_spans(text, spans, a, b)
    assert spans == [(s + a, e + a) for s, e in split_sentences(text[a:b])]


@settings(max_examples=400, deadline=None)
@given(markup_texts)
def test_markup_properties(raw):
    spans = split_markup_sentences(raw)
    check_spans(raw, spans)
    tags = [(m.start(), m.end()) for m in TAG.finditer(raw)]
    in_tag = covered(tags, len(raw))
    for s, e in spans:
        assert TAG.search(raw[s:e]) is None
        assert not any(in_tag[s:e]), (raw[s:e], tags)
    # every non-space character outside tags is in a sentence
    flags = covered(spans, len(raw))
    assert all(flags[i] or in_tag[i] or raw[i].isspace() for i in range(len(raw)))
    # without markup the two splitters agree
    if "<" not in raw:
        assert spans == split_sentences(raw)


@settings(max_examples=200, deadline=None)
@given(markup_texts, st.integers(0, 80), st.integers(0, 80))
def test_markup_subrange_equals_slice(raw, a, b):
    a, b = min(a, len(raw)), min(max(a, b), len(raw))
    assert split_markup_sentences(raw, a, b) == [(s + a, e + a) for s, e in split_markup_sentences(raw[a:b])]


# ---------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------

PARAGRAPH = (
    'Mr. John Smith, 54, joined Acme Corp. in Jan. 2009 as chief executive. He replaced Dr. Ann Lee, who '
    'retired after 12 years! Was it planned? "Nobody knew," said Gen. Roe of the U.S. Army. Shares of the '
    "company, based in St. Louis, rose 3.5 percent on Tuesday (the most since 2008.) Analysts, e.g. those at "
    "Smith & Co. Ltd., expect more. The board meets again on Sept. 9 to vote on No. 4 of the plan.\n\n"
)


def test_large_inputs_split_completely():
    """About 2 MB of text and of markup split into every sentence (speed: ``unpooled bench core``)."""
    text = PARAGRAPH * 4000
    assert len(split_sentences(text)) == 7 * 4000
    raw = "".join(f'<DOC id="D{i}">\n<HEADLINE>\nNews {i}\n</HEADLINE>\n<TEXT>\n<P>\n{PARAGRAPH}</P>\n</TEXT>\n</DOC>\n'
                  for i in range(40))
    assert len(split_markup_sentences(raw)) >= 7 * 40
