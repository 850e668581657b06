"""Hypothesis strategies: small corpora with valid TAC KBs over them, and corruptions of those KBs."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from unpooled.core.corpus.model import Document
from unpooled.core.schema import builtin_schema

SCHEMA = builtin_schema("tac-kbp")
ENTITY_TYPES = ("PER", "ORG", "GPE")

# names: any printable text without tabs/newlines, quotes and backslashes included
name_chars = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\t\n\r\x0b\x0c\x85")
names = st.text(name_chars, min_size=1, max_size=12).map(str.strip).filter(lambda s: s != "")
doc_ids = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,15}", fullmatch=True)
fillers = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=10)
confidences = st.one_of(st.none(), st.floats(min_value=0.001, max_value=1.0, allow_nan=False).map(lambda x: round(x, 3)))


def _relations_for(subj_type: str, obj_type: str) -> list[str]:
    """Entity-valued, list-valued predicates (canonical or inverse) whose types fit.

    Single-valued slots are left out: two sentences could give one subject two
    values, which is valid but draws a UP215 warning.
    """
    return sorted(r.name for r in SCHEMA.relations.values()
                  if not r.string_valued and subj_type in r.subject_types and obj_type in r.object_types
                  and not SCHEMA.relations[SCHEMA.canonical_of(r.name)[0]].single_valued)


STRING_RELATIONS = {t: sorted(r.name for r in SCHEMA.relations.values()
                              if r.string_valued and t in r.subject_types and r.cardinality == "list")
                    for t in ENTITY_TYPES}


@dataclass
class World:
    documents: list[Document]
    kb_text: str
    n_relation_lines: int

    def corpus(self):
        from unpooled.core.kb import InMemoryCorpus

        return InMemoryCorpus(self.documents)


@st.composite
def worlds(draw, max_docs: int = 3, max_sentences: int = 4) -> World:
    n_ent = draw(st.integers(2, 6))
    ent_names = draw(st.lists(names, min_size=n_ent, max_size=n_ent, unique=True))
    ent_types = draw(st.lists(st.sampled_from(ENTITY_TYPES), min_size=n_ent, max_size=n_ent))
    ids = [f":E{i}" for i in range(n_ent)]
    ids_docs = draw(st.lists(doc_ids, min_size=1, max_size=max_docs, unique=True))
    docs = []
    lines = ["hypothesis_run"] + [f"{ids[i]}\ttype\t{ent_types[i]}" for i in range(n_ent)]
    relation_lines = []
    mentioned: set[int] = set()
    for doc_id in ids_docs:
        text = ""
        sents = []
        canon_done: set[int] = set()
        for _ in range(draw(st.integers(1, max_sentences))):
            a, b = draw(st.lists(st.integers(0, n_ent - 1), min_size=2, max_size=2, unique=True))
            word = draw(fillers)
            start = len(text)
            pa = start
            text += ent_names[a]
            mid = f" met {word} and "
            text += mid
            pb = len(text)
            text += ent_names[b]
            text += " ."
            end = len(text)
            sents.append((start, end))
            text += " "
            for e, p in ((a, pa), (b, pb)):
                kind = "canonical_mention" if e not in canon_done else draw(st.sampled_from(
                    ["mention", "nominal_mention", "pronominal_mention"]))
                canon_done.add(e)
                mentioned.add(e)
                lines.append(f'{ids[e]}\t{kind}\t{_quote(ent_names[e])}\t{doc_id}:{p}-{p + len(ent_names[e]) - 1}')
                if kind == "canonical_mention":
                    lines.append(f'{ids[e]}\tmention\t{_quote(ent_names[e])}\t{doc_id}:{p}-{p + len(ent_names[e]) - 1}')
            just = f"{doc_id}:{start}-{end - 1}"
            preds = _relations_for(ent_types[a], ent_types[b])
            if preds and draw(st.booleans()):
                pred = draw(st.sampled_from(preds))
                conf = draw(confidences)
                relation_lines.append(f"{ids[a]}\t{pred}\t{ids[b]}\t{just}" + (f"\t{conf}" if conf else ""))
                rel = SCHEMA.relations[pred]
                if draw(st.booleans()):  # also state it from the other side, as Cold Start KBs do
                    if rel.symmetric:
                        relation_lines.append(f"{ids[b]}\t{pred}\t{ids[a]}\t{just}")
                    else:
                        canonical, _ = SCHEMA.canonical_of(pred)
                        inv = SCHEMA.inverse_for(canonical, ent_types[b]) if rel.canonical else SCHEMA.relations[canonical]
                        if inv is not None and ent_types[a] in inv.object_types and ent_types[b] in inv.subject_types:
                            relation_lines.append(f"{ids[b]}\t{inv.name}\t{ids[a]}\t{just}")
            spreds = STRING_RELATIONS[ent_types[a]]
            if spreds and draw(st.booleans()):
                pred = draw(st.sampled_from(spreds))
                fpos = start + len(ent_names[a]) + len(" met ")
                relation_lines.append(
                    f'{ids[a]}\t{pred}\t"{word}"\t{doc_id}:{fpos}-{fpos + len(word) - 1},{just}'
                )
        docs.append(Document(doc_id, text.rstrip(" "), title=doc_id, sentences=sents))
    # entities never mentioned would draw a warning: give them no type line
    lines = [l for l in lines if not (l.endswith(tuple(f"\ttype\t{t}" for t in ENTITY_TYPES))
                                      and int(l.split("\t")[0][2:]) not in mentioned)]
    relation_lines = list(dict.fromkeys(relation_lines))
    return World(docs, "\n".join(lines + relation_lines) + "\n", len(relation_lines))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


BREAKING = ("tabs_to_spaces", "unknown_doc", "offset_out_of_range", "unknown_predicate", "bad_utf8",
            "truncate", "bad_entity_id")


def corrupt_line(line: str, how: str) -> str | bytes:
    """A corruption of one KB line (index >= 1) that always makes it invalid."""
    f = line.split("\t")
    if how == "tabs_to_spaces":
        return line.replace("\t", " ")
    if how == "unknown_doc":
        if f[1] == "type":
            return f"{f[0]}\ttype\tNOT_A_TYPE"
        f[3] = ",".join("NO_SUCH_DOC:" + p.rsplit(":", 1)[1] for p in f[3].split(","))
        return "\t".join(f)
    if how == "offset_out_of_range":
        if f[1] == "type":
            return f"{f[0]}\ttype\tNOT_A_TYPE"
        doc, span = f[3].split(",")[0].rsplit(":", 1)
        f[3] = f"{doc}:{span.split('-')[0]}-{10**7}"
        return "\t".join(f)
    if how == "unknown_predicate":
        f[1] = "per:no_such_slot"
        return "\t".join(f)
    if how == "bad_utf8":
        return line.encode("utf-8") + b"\xff\xfe"
    if how == "truncate":
        return f[0]
    if how == "bad_entity_id":
        return f[0].lstrip(":") + "\t" + "\t".join(f[1:])
    raise ValueError(how)
