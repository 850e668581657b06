"""The annotation layers of one document, for the document view: exhaustive and verified."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q

from unpooled.service.accounts.actions import is_organiser, team_of, visible_submissions
from unpooled.service.corpora.models import Document, Period
from unpooled.service.corpora.names import relation_label, relation_names

from .models import ExhaustiveDocument, Kind, Label, Task, TaskRequest


def exhaustive_visible(corpus, viewer=None) -> bool:
    """Whether ``viewer`` may see the corpus's recall sample (which documents were sampled for exhaustive
    annotation, and their annotation): organisers always, everybody else once a period's annotated data has been
    released.  Before that a team could copy the sampled documents' true relations into a run and raise its
    estimated recall (security review N13)."""
    return is_organiser(viewer) or Period.objects.filter(corpus=corpus, released__isnull=False).exists()


def gold_visible(corpus, viewer=None) -> bool:
    """Whether ``viewer`` may see the corpus's gold layer: organisers always, everybody else unless the organisers
    made it private (:attr:`~.models.AnnotationSettings.gold_public`): the gold controls are drawn from it, and an
    annotator who can read it answers them perfectly, so that they never block anyone."""
    from .models import settings_for

    return is_organiser(viewer) or settings_for(corpus).gold_public


def annotation_layers(doc: Document, viewer=None) -> dict:
    """``exhaustive``: the sample row and the aggregated mentions and relations (None if not sampled, or if
    ``viewer`` may not see the recall sample yet: ``exhaustive_hidden``, :func:`exhaustive_visible`);
    ``verified``: each verification task of the document with its current label, among those a submission
    that ``viewer`` may see asked for (public ones, their team's, every one for organisers; anonymous
    without ``viewer``).  A task only private submissions of other teams asked for is not shown, nor its
    label: which instances a private submission sampled, and how they were judged, is that team's.  A task still
    taking answers is listed to organisers and the asking team only: its label (reopened for more, as a weak
    relation's items are) would be read before answering, and an annotator who found the claim before them listed
    knew it was no gold control."""
    text = doc.text
    names = relation_names(doc.corpus)
    hidden = not exhaustive_visible(doc.corpus, viewer)
    out: dict = {"exhaustive": None, "verified": [], "relation_names": names, "exhaustive_hidden": hidden}
    ex = None if hidden else ExhaustiveDocument.objects.filter(document=doc).first()
    if ex is not None:
        ent = Task.objects.filter(document=doc, kind=Kind.ENTITIES, key="").first()
        rel = Task.objects.filter(document=doc, kind=Kind.RELATIONS, key="").first()
        mentions = (ent.result or {}).get("mentions", []) if ent and ent.status == Task.Status.COMPLETE else []
        relations = []
        if rel is not None and rel.status == Task.Status.COMPLETE:
            ms = rel.payload.get("mentions", [])
            for a, pred, b in rel.result.get("relations", []):
                relations.append({"subject": text[ms[a]["start"]:ms[a]["end"]], "predicate": pred,
                                  "relation_name": names.get(pred, ""), "object": text[ms[b]["start"]:ms[b]["end"]]})
        out["exhaustive"] = {
            "scheme": ex.scheme, "stage": ex.stage, "inclusion": ex.inclusion,
            "entities_status": ent.status if ent else "none", "relations_status": rel.status if rel else "waiting",
            "mentions": [{"text": text[m["start"]:m["end"]], "type": m["type"], "group": m["cluster"],
                          "link": m.get("link", "")} for m in mentions],
            "relations": relations,
        }
    asked = TaskRequest.objects.filter(task=OuterRef("pk"), submission__in=visible_submissions(viewer).values("pk"))
    tasks = Task.objects.filter(document=doc, kind=Kind.VERIFY, is_control=False).filter(Exists(asked))
    organiser = is_organiser(viewer)
    if not organiser:  # an item awaiting its label: the asking team's (listed to all, the claim beside an annotator's
        # showed it was an item, not a gold control); team_of is None for annotators and anonymous viewers
        own = TaskRequest.objects.filter(task=OuterRef("pk"), submission__team=team_of(viewer))
        tasks = tasks.filter(~Q(status=Task.Status.OPEN) | Exists(own))
    tasks = list(tasks.order_by("id"))
    out["exhaustive_spans"] = []
    if ex is not None and out["exhaustive"]["mentions"]:
        out["exhaustive_spans"] = [(m["start"], m["end"], f"{m['type']} · group {m['cluster']}") for m in mentions]
    out["verified_spans"] = []
    if tasks:
        labels: dict[str, Label] = {}
        for lab in Label.objects.filter(corpus_id=doc.corpus_id, key_hash__in=[t.key_hash for t in tasks]).order_by("id"):
            labels[lab.key] = lab  # newest wins
        for t in tasks:
            p = t.payload
            lab = labels.get(t.key) if organiser or t.status != Task.Status.OPEN else None
            out["verified"].append({
                "subject": p["subject"]["text"], "predicate": p["predicate"],
                "relation_name": names.get(p["predicate"], ""),
                "object": p["object"].get("value") or p["object"]["text"], "status": t.status,
                "probability": lab.probability if lab else None, "correct": lab.correct if lab else None,
                "method": lab.method if lab else "", "answers": lab.n_answers if lab else t.answers.count(),
            })
            state = "open" if lab is None else "ok" if lab.correct else "bad"
            for arg in ("subject", "object"):
                a = p.get(arg) or {}
                if a.get("start") is not None and a.get("end") is not None:
                    out["verified_spans"].append((a["start"], a["end"], f"{arg} of {relation_label(p['predicate'], names)}: {state}", state))
    return out


def layered_sentences(text: str, sentences, layers: dict[str, list[tuple]]) -> list[tuple[int, list[dict]]]:
    """Each sentence ``(index, start, end)`` cut into segments at every span boundary of every layer.

    ``layers`` maps a layer name to spans ``(start, end, title[, variant])``; a segment lists the layers
    (``name`` or ``name-variant``) covering it and their titles, so that the page can show or hide each
    layer with CSS alone, overlaps included.
    """
    out = []
    for idx, s0, s1 in sentences:
        spans = [(max(a[0], s0), min(a[1], s1), name + (f"-{a[3]}" if len(a) > 3 else ""), a[2])
                 for name, items in layers.items() for a in items if a[0] < s1 and a[1] > s0]
        cuts = sorted({s0, s1, *(x for sp in spans for x in sp[:2])})
        segs = []
        for a, b in zip(cuts, cuts[1:]):
            cover = [sp for sp in spans if sp[0] <= a and sp[1] >= b]
            segs.append({"text": text[a:b], "classes": " ".join(sorted({c for _, _, c, _ in cover})),
                         "title": "; ".join(dict.fromkeys(t for *_, t in cover))})
        out.append((idx, segs))
    return out
