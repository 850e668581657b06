"""The console's Mechanical Turk page (UX review 2026-11-26 #10): what ``unpooled annotate mturk …`` shows on the
command line, on the web, per corpus: sandbox or production, whether AWS credentials were found (where from, never
what they are), the public URL HITs point to, the HITs published, the answers collected and confirmed, the
assignments approved and rejected; on request, Amazon's balance and a reconciliation of the HIT rows with Amazon.

Publishing and collecting run by themselves (the task worker, every minute, on a corpus whose backend is MTurk);
this page changes nothing at Amazon but the HIT rows a reconciliation adopts."""

from __future__ import annotations

import logging
import os

from django.db.models import Count, Q
from django.shortcuts import render

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Answer, Backend, Hit, Task
from unpooled.service.crowd.base import WHO
from unpooled.service.crowd.mturk_sync import held_back, held_back_sentence, requested

from .views import console_context, organiser_required

log = logging.getLogger(__name__)

#: how boto3 names where it found credentials, in words (nothing of the credentials themselves)
CREDENTIAL_SOURCES = {"env": "environment variables (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
                      "shared-credentials-file": "the shared credentials file (~/.aws/credentials)",
                      "config-file": "the AWS config file (~/.aws/config)", "iam-role": "the machine's IAM role",
                      "assume-role": "an assumed role", "container-role": "the container's role",
                      "sso": "AWS single sign-on", "custom-process": "a credential process"}


def credentials_source() -> str | None:
    """Where boto3's default chain finds AWS credentials, in words, or None when it finds none.  Nothing of the
    credentials is kept or shown: the keys stay in boto3's objects."""
    import boto3

    found = boto3.session.Session().get_credentials()
    if found is None:
        return None
    return CREDENTIAL_SOURCES.get(found.method, found.method)


def make_backend():
    """The MTurk adapter the CLI uses (:meth:`~unpooled.service.crowd.mturk.MTurkBackend.from_env`); the tests put a
    Stubber's client here."""
    from unpooled.service.crowd.mturk import MTurkBackend

    return MTurkBackend.from_env()


def counts(corpus) -> dict:
    """The corpus's HITs, what they asked of Amazon and its MTurk answers, from the database."""
    hits = Hit.objects.filter(task__corpus=corpus)
    by = hits.aggregate(rows=Count("id"), published=Count("id", filter=~Q(hit_id="")),
                        expired=Count("id", filter=Q(status__in=("expired", "settled"))))
    approved = rejected = 0
    for a, r, before in hits.values_list("approved", "rejected", "earlier"):
        approved += len(a or []) + sum(len(e["approved"]) for e in before or [])
        rejected += len(r or []) + sum(len(e["rejected"]) for e in before or [])
    answers = Answer.objects.filter(task__corpus=corpus, annotator__backend=Backend.MTURK).aggregate(
        n=Count("id"), quarantined=Count("id", filter=Q(quarantined=True)), workers=Count("annotator", distinct=True))
    unpublished = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, hit__isnull=True).count()
    return {**by, **requested(corpus), "unposted": by["rows"] - by["published"],
            "live": by["published"] - by["expired"],
            "approved": approved, "rejected": rejected, "answers": answers["n"],
            "quarantined": answers["quarantined"], "confirmed": answers["n"] - answers["quarantined"],
            "workers": answers["workers"], "unpublished": unpublished,
            "held_back": held_back_sentence(held_back(corpus))}


def rewards(corpus) -> list[tuple[str, int, int]]:
    """What a HIT of each task kind pays an assignment now, by the corpus's settings (what publishing asks of
    Amazon): ``(kind's name, reward, Amazon's fee)`` in cents."""
    from unpooled.core.annotation.mturk_fees import fee_cents
    from unpooled.service.annotation.models import Kind

    st = settings_for(corpus)
    return [(label, st.reward_cents(k), fee_cents(st.reward_cents(k), st.answers_per_item)) for k, label in Kind.choices]


def _ask_amazon(action: str, corpus) -> dict:
    """Run ``balance`` or ``reconcile`` against Amazon; the result, or the error in words."""
    from botocore.exceptions import BotoCoreError

    from unpooled.service.crowd.mturk import MTurkError, trouble
    from unpooled.service.crowd.mturk_sync import reconcile_corpus

    try:
        backend = make_backend()
        if action == "balance":
            return {"balance": backend.balance()}
        rep = reconcile_corpus(corpus, backend)
        return {"reconciled": {"adopted": len(rep["adopted"]), "orphans": len(rep["orphans"]),
                               "missing": len(rep["missing"]), "confirmed": rep["confirmed"]}}
    except (MTurkError, BotoCoreError) as exc:  # Amazon's words go to the log, a fixed sentence to the page
        log.warning("mturk page, %s of corpus %s: %s", action, corpus.name, exc)
        return {"error": trouble(exc)}


@organiser_required
def mturk(request):
    """GET: the state of the corpus's Mechanical Turk work; POST ``action=balance|reconcile``: ask Amazon too."""
    from unpooled.service.crowd.mturk import MTurkConfig

    ctx = console_context(request, "mturk")
    corpus = ctx["corpus"]
    config = MTurkConfig.from_env()
    ctx.update(config=config, credentials=credentials_source(), public_url=os.environ.get("UNPOOLED_PUBLIC_URL", ""))
    status = 200
    if corpus is not None:
        backend = settings_for(corpus).backend
        ctx.update(counts=counts(corpus), backend=backend, backend_label=WHO.get(backend, backend), mturk=Backend.MTURK,
                   rewards=rewards(corpus))
        if request.method == "POST":
            action = request.POST.get("action")
            if action not in ("balance", "reconcile"):
                status = 400
                ctx["asked"] = {"error": f"action: expected balance or reconcile, got {action!r}"}
            else:
                ctx["asked"] = _ask_amazon(action, corpus)
                if action == "reconcile":
                    ctx["counts"] = counts(corpus)
    return render(request, "organiser/mturk.html", ctx, status=status)
