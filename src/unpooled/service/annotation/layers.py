"""The annotation layers of one document, for the document view: exhaustive and verified."""

from __future__ import annotations

from unpooled.service.corpora.models import Document

from .actions import current_labels
from .models import ExhaustiveDocument, Kind, Task


def annotation_layers(doc: Document) -> dict:
    """``exhaustive``: the sample row and the aggregated mentions and relations (None if not sampled);
    ``verified``: each verification task of the document with its current label."""
    text = doc.text
    out: dict = {"exhaustive": None, "verified": []}
    ex = ExhaustiveDocument.objects.filter(document=doc).first()
    if ex is not None:
        ent = Task.objects.filter(document=doc, kind=Kind.ENTITIES, key="").first()
        rel = Task.objects.filter(document=doc, kind=Kind.RELATIONS, key="").first()
        mentions = (ent.result or {}).get("mentions", []) if ent and ent.status == Task.Status.COMPLETE else []
        relations = []
        if rel is not None and rel.status == Task.Status.COMPLETE:
            ms = rel.payload.get("mentions", [])
            for a, pred, b in rel.result.get("relations", []):
                relations.append({"subject": text[ms[a]["start"]:ms[a]["end"]], "predicate": pred,
                                  "object": text[ms[b]["start"]:ms[b]["end"]]})
        out["exhaustive"] = {
            "scheme": ex.scheme, "stage": ex.stage, "inclusion": ex.inclusion,
            "entities_status": ent.status if ent else "none", "relations_status": rel.status if rel else "waiting",
            "mentions": [{"text": text[m["start"]:m["end"]], "type": m["type"], "group": m["cluster"],
                          "link": m.get("link", "")} for m in mentions],
            "relations": relations,
        }
    tasks = list(Task.objects.filter(document=doc, kind=Kind.VERIFY, is_control=False).order_by("id"))
    if tasks:
        labels = current_labels(doc.corpus)
        for t in tasks:
            p = t.payload
            lab = labels.get(t.key)
            out["verified"].append({
                "subject": p["subject"]["text"], "predicate": p["predicate"],
                "object": p["object"].get("value") or p["object"]["text"], "status": t.status,
                "probability": lab.probability if lab else None, "correct": lab.correct if lab else None,
                "method": lab.method if lab else "", "answers": lab.n_answers if lab else t.answers.count(),
            })
    return out
