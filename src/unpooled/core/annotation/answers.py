"""Answer formats of the three task types, their validation, and the aggregation of document tasks.

Verification (``kind='verify'``)::

    {"relation": "holds" | "other" | "none", "other_predicate": "per:title" (only with "other"),
     "subject_ok": true, "object_ok": true, "link_ok": true | false | null}

An instance is *correct* when the predicted relation holds and both mentions are valid
entities of their types and, when the KB links them, the link is right (the paper's
code rule: predicate right *and* both entity judgements right).

Entities (``kind='entities'``)::

    {"mentions": [{"start": 0, "end": 5, "type": "PER", "cluster": 0, "link": ""}, ...]}

``cluster`` numbers the in-document coreference clusters of this answer (any integers).

Relations (``kind='relations'``)::

    {"pairs": {"0": ["ab:P17"], "1": [], ...}}

one entry per candidate pair of the task (``[]`` = no relation); ``"ab:R"`` means
mention *a* is the subject of R and *b* its object, ``"ba:R"`` the reverse.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InvalidInputError

RELATION_CHOICES = ("holds", "other", "none")


class AnswerError(InvalidInputError):
    """An answer that does not follow its task's format; ``field`` names the offending part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


def _bool_or_none(value: Any, field: str, *, allow_none: bool) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        raise AnswerError(field, f"expected true or false{' or null' if allow_none else ''}, got {value!r}")
    return value


def validate_verify(value: Any, *, predicates: Iterable[str] = ()) -> dict:
    """Check a verification answer and return its normal form (raises :class:`AnswerError`)."""
    if not isinstance(value, Mapping):
        raise AnswerError("answer", f"expected an object, got {type(value).__name__}")
    rel = value.get("relation")
    if rel not in RELATION_CHOICES:
        raise AnswerError("relation", f"expected one of {', '.join(RELATION_CHOICES)}, got {rel!r}")
    out: dict[str, Any] = {"relation": rel}
    if rel == "other":
        other = value.get("other_predicate")
        allowed = set(predicates)
        if not isinstance(other, str) or not other or (allowed and other not in allowed):
            raise AnswerError("other_predicate", f"expected a relation of the schema, got {other!r}")
        out["other_predicate"] = other
    out["subject_ok"] = _bool_or_none(value.get("subject_ok"), "subject_ok", allow_none=False)
    out["object_ok"] = _bool_or_none(value.get("object_ok"), "object_ok", allow_none=False)
    out["link_ok"] = _bool_or_none(value.get("link_ok"), "link_ok", allow_none=True)
    unknown = set(value) - {"relation", "other_predicate", "subject_ok", "object_ok", "link_ok"}
    if unknown:
        raise AnswerError(sorted(unknown)[0], "unknown field")
    return out


def verify_correct(answer: Mapping) -> bool:
    """The paper's rule: the relation holds, both mentions are valid, and no link is wrong."""
    return (answer["relation"] == "holds" and answer["subject_ok"] and answer["object_ok"]
            and answer.get("link_ok") is not False)


#: cluster numbers are any integers of this magnitude at most
MAX_CLUSTER = 2 ** 31


def validate_entities(value: Any, *, text_length: int, types: Iterable[str], max_mentions: int | None = None,
                      max_link: int | None = None) -> dict:
    """Check an entity answer: spans inside the text, known types, no duplicate or crossing spans; at most
    ``max_mentions`` mentions and links of at most ``max_link`` characters (when given)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("mentions"), list):
        raise AnswerError("mentions", "expected an object with a list 'mentions'")
    if max_mentions is not None and len(value["mentions"]) > max_mentions:
        raise AnswerError("mentions", f"{len(value['mentions']):,} mentions; at most {max_mentions} in a document "
                                      f"of {text_length:,} characters")
    allowed = set(types)
    out = []
    seen: set[tuple[int, int]] = set()
    for i, m in enumerate(value["mentions"]):
        where = f"mentions[{i}]"
        if not isinstance(m, Mapping):
            raise AnswerError(where, "expected an object")
        start, end = m.get("start"), m.get("end")
        if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) or isinstance(end, bool):
            raise AnswerError(f"{where}.start", "start and end must be integers")
        if not 0 <= start < end <= text_length:
            raise AnswerError(f"{where}.end", f"span {start}-{end} is not inside the document (length {text_length})")
        if (start, end) in seen:
            raise AnswerError(where, f"span {start}-{end} is marked twice")
        seen.add((start, end))
        typ = m.get("type")
        if typ not in allowed:
            raise AnswerError(f"{where}.type", f"expected one of {', '.join(sorted(allowed))}, got {typ!r}")
        cluster = m.get("cluster", i)
        if not isinstance(cluster, int) or isinstance(cluster, bool) or abs(cluster) > MAX_CLUSTER:
            raise AnswerError(f"{where}.cluster", f"expected an integer of at most {MAX_CLUSTER} in magnitude, "
                                                  f"got {str(cluster)[:40]!r}")
        link = m.get("link") or ""
        if not isinstance(link, str):
            raise AnswerError(f"{where}.link", f"expected a string, got {str(link)[:40]!r}")
        if max_link is not None and len(link) > max_link:
            raise AnswerError(f"{where}.link", f"{len(link):,} characters; at most {max_link}")
        out.append({"start": start, "end": end, "type": typ, "cluster": cluster, "link": link})
    spans = sorted(seen)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise AnswerError("mentions", f"spans {s1}-{e1} and {s2}-{e2} overlap (nested spans are not annotated)")
    out.sort(key=lambda m: (m["start"], m["end"]))
    return {"mentions": out}


def validate_relations(value: Any, *, n_pairs: int, predicates: Iterable[str]) -> dict:
    """Check a relation answer: one entry per candidate pair, each a list of ``ab:R`` / ``ba:R``."""
    if not isinstance(value, Mapping) or not isinstance(value.get("pairs"), Mapping):
        raise AnswerError("pairs", "expected an object with an object 'pairs'")
    allowed = set(predicates)
    pairs = value["pairs"]
    expected = {str(i) for i in range(n_pairs)}
    missing = sorted(expected - set(map(str, pairs)), key=int)
    if missing:
        raise AnswerError(f"pairs[{missing[0]}]", f"no answer for pair {missing[0]} ({len(missing)} pairs unanswered)")
    out: dict[str, list[str]] = {}
    for k, labels in pairs.items():
        if str(k) not in expected:
            raise AnswerError(f"pairs[{k}]", f"the task has pairs 0-{n_pairs - 1}")
        if not isinstance(labels, list):
            raise AnswerError(f"pairs[{k}]", "expected a list of relations ([] for none)")
        if allowed and len(labels) > 2 * len(allowed):
            raise AnswerError(f"pairs[{k}]", f"{len(labels):,} relations; at most {2 * len(allowed)} (each relation "
                                             "of the schema in both directions)")
        clean = []
        for lab in labels:
            if not isinstance(lab, str) or lab[:3] not in ("ab:", "ba:") or lab[3:] not in allowed:
                raise AnswerError(f"pairs[{k}]", f"expected 'ab:R' or 'ba:R' with R a relation of the schema, got {lab!r}")
            clean.append(lab)
        out[str(k)] = sorted(set(clean))
    return {"pairs": out}


def quorum(n_answers: int) -> int:
    """Votes needed for a strict majority of ``n_answers``."""
    return n_answers // 2 + 1


def aggregate_mentions(answers: Sequence[Mapping]) -> list[dict]:
    """Span-level majority over entity answers, with majority-linked coreference clusters.

    A span is kept when a strict majority of the answers marked it; its type is the most
    frequent type given to it (ties: alphabetical).  Two kept mentions share a cluster when
    a strict majority of the answers that marked both put them in one cluster (transitively closed): an
    answer that missed one of the two says nothing about the pair (counting it against them split 22% of
    the true pairs at accuracy 0.75, ``unpooled simulate entities``).
    Returns mentions sorted by position with ``cluster`` = index of the cluster's first mention.
    """
    n = len(answers)
    if n == 0:
        return []
    need = quorum(n)
    span_votes: Counter = Counter()
    type_votes: dict[tuple[int, int], Counter] = defaultdict(Counter)
    link_votes: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for a in answers:
        for m in a["mentions"]:
            sp = (m["start"], m["end"])
            span_votes[sp] += 1
            type_votes[sp][m["type"]] += 1
            link_votes[sp][m.get("link") or ""] += 1
    kept = sorted(sp for sp, c in span_votes.items() if c >= need)
    index = {sp: i for i, sp in enumerate(kept)}
    together: Counter = Counter()
    marked: list[set[int]] = []
    for a in answers:
        by_cluster: dict[int, list[int]] = defaultdict(list)
        for m in a["mentions"]:
            i = index.get((m["start"], m["end"]))
            if i is not None:
                by_cluster[m["cluster"]].append(i)
        marked.append({i for members in by_cluster.values() for i in members})
        for members in by_cluster.values():
            members.sort()
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    together[(members[x], members[y])] += 1
    parent = list(range(len(kept)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for (i, j), c in together.items():
        # a majority of the answers that marked both (an answer that missed one says nothing of the pair)
        if c >= quorum(sum(1 for mk in marked if i in mk and j in mk)):
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    out = []
    for i, sp in enumerate(kept):
        typ = sorted(type_votes[sp].items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        link, votes = sorted(link_votes[sp].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        out.append({"start": sp[0], "end": sp[1], "type": typ, "cluster": find(i),
                    "link": link if votes >= need else ""})
    return out


def candidate_pairs(mentions: Sequence[Mapping], sentence_starts: Sequence[int], sentence_ends: Sequence[int],
                    *, compatible=None, protocol: str = "sentence") -> list[tuple[int, int]]:
    """Unordered pairs of mentions of different clusters the exhaustive relations task asks about.

    ``protocol='sentence'`` (the recall protocol, :mod:`unpooled.core.estimators.exhaustive`): one pair per
    (sentence, cluster pair) within one sentence, the first mentions of the two clusters in that sentence.
    ``'document'``: one pair per cluster pair of the whole document, wherever their mentions lie (the first
    mention of each cluster), so that cross-sentence facts are annotated too.  ``compatible(type_a, type_b)``
    (optional) drops pairs no relation of the schema allows in either direction.

    >>> ms = [{"start": 0, "end": 1, "cluster": 0, "type": "PER"}, {"start": 10, "end": 11, "cluster": 1, "type": "ORG"}]
    >>> candidate_pairs(ms, [0, 5], [4, 12]), candidate_pairs(ms, [0, 5], [4, 12], protocol="document")
    ([], [(0, 1)])
    """
    from bisect import bisect_right

    from ..errors import check_choice
    from ..estimators.exhaustive import RECALL_PROTOCOLS

    check_choice("protocol", protocol, RECALL_PROTOCOLS)
    if protocol == "document":
        first: dict = {}
        for i, m in enumerate(mentions):
            first.setdefault(m["cluster"], i)
        reps = sorted(first.values())
        return [(a, b) for x, a in enumerate(reps) for b in reps[x + 1:]
                if compatible is None or compatible(mentions[a]["type"], mentions[b]["type"])]
    by_sentence: dict[int, list[int]] = defaultdict(list)
    for i, m in enumerate(mentions):
        s = bisect_right(sentence_starts, m["start"]) - 1
        if s >= 0 and m["end"] <= sentence_ends[s]:
            by_sentence[s].append(i)
    pairs: list[tuple[int, int]] = []
    for s in sorted(by_sentence):
        first: dict[int, int] = {}
        for i in by_sentence[s]:
            first.setdefault(mentions[i]["cluster"], i)
        reps = sorted(first.values())
        for x in range(len(reps)):
            for y in range(x + 1, len(reps)):
                a, b = reps[x], reps[y]
                if compatible is None or compatible(mentions[a]["type"], mentions[b]["type"]):
                    pairs.append((a, b))
    return pairs


def aggregate_relations(answers: Sequence[Mapping], n_pairs: int) -> dict[str, list[str]]:
    """Per pair, the relation labels a strict majority of the answers gave."""
    need = quorum(len(answers))
    out: dict[str, list[str]] = {}
    for p in range(n_pairs):
        votes = Counter(lab for a in answers for lab in a["pairs"].get(str(p), []))
        out[str(p)] = sorted(lab for lab, c in votes.items() if c >= need)
    return out


def relation_triples(mentions: Sequence[Mapping], pairs: Sequence[Sequence[int]],
                     labels: Mapping[str, Sequence[str]]) -> list[tuple[int, str, int]]:
    """Expand aggregated pair labels into (subject mention, predicate, object mention) triples."""
    out = []
    for p, (a, b) in enumerate(pairs):
        for lab in labels.get(str(p), []):
            direction, pred = lab[:2], lab[3:]
            out.append((a, pred, b) if direction == "ab" else (b, pred, a))
    return out
