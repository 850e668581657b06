"""Console forms: they parse the request; the rules live in :mod:`.console` (``check_settings``)."""

from __future__ import annotations

from django import forms

from unpooled.service.accounts.actions import MAX_QUOTA
from unpooled.service.annotation.models import AnnotationSettings
from unpooled.service.corpora.models import Corpus

from . import console


class SettingsForm(forms.ModelForm):
    """A corpus's annotation settings; every problem is shown at its field."""

    class Meta:
        model = AnnotationSettings
        fields = list(console.SETTINGS_FIELDS)
        # words an organiser reads, not the field names ("Reward verify cents": UX review 2026-11-26 §3)
        labels = {
            "backend": "Who answers the tasks",
            "answers_per_item": "Answers per item",
            "answers_weak_relation": "Answers per item of a weakly judged relation",
            "relation_groups": "Relations judged alike",
            "lease_seconds": "Time to answer a task (seconds)",
            "reward_verify_cents": "Pay per verification answer (cents)",
            "reward_entities_cents": "Pay per entity-marking answer (cents)",
            "reward_relations_cents": "Pay per relation-marking answer (cents)",
            "reward_clusters_cents": "Pay per clustering answer (cents)",
            "budget_cents": "Budget for the whole corpus (cents)",
            "submission_budget_cents": "Budget per submission (cents)",
            "control_share": "Share of gold control items",
            "block_below_accuracy": "Block an annotator below this control accuracy",
            "block_min_controls": "Controls answered before an annotator can be blocked",
            "aggregation": "How answers become a label",
            "target_halfwidth": "Precision interval to aim for (± half-width)",
            "min_draws": "Fewest draws per level",
            "max_draws": "Most draws per level",
            "exhaustive_documents": "Documents annotated in full (for recall)",
            "levels": "Levels a submission is scored at",
            "open_signup": "Open to annotators without an invite",
            "gold_public": "Gold layer visible to everyone",
            "recall_protocol": "Which facts recall counts",
        }
        help_texts = {
            "answers_per_item": "independent answers per item (tasks created from now on)",
            "answers_weak_relation": "answers per verification item of a relation the crowd judges weakly (see "
                                     "'The crowd by relation' on the annotation page; 0: answers per item)",
            "relation_groups": "relations the crowd judges alike, one group a line: 'hard: P108, P463' (a group "
                               "shares one set of annotator error rates: rare relations borrow each other's "
                               "answers; empty: every relation has its own)",
            "lease_seconds": "how long an annotator holds a task",
            "reward_verify_cents": "per answer, in cents",
            "reward_entities_cents": "per answer, in cents",
            "reward_relations_cents": "per answer, in cents",
            "reward_clusters_cents": "per answer to the cross-document clustering task, in cents",
            "budget_cents": "cap for the whole corpus, in cents (empty: no cap)",
            "submission_budget_cents": "default cap per submission, in cents (empty: no cap)",
            "block_below_accuracy": "block an annotator whose gold-control accuracy is below this "
                                    "(with 95% confidence), or below the other annotators' accuracy on "
                                    "the same relations' controls less 0.1 when that is lower",
            "block_min_controls": "fewest controls before blocking",
            "open_signup": "annotators who signed up without an organiser's invite may annotate this corpus "
                           "(and the sign-up page takes them)",
            "recall_protocol": "within-sentence: the annotators mark relations between mentions of one sentence, "
                               "and a system's cross-sentence facts count for precision only; document-level: "
                               "every pair of the document's entity clusters is asked, and recall counts every "
                               "fact (DocRED-style corpora; needs the corpus's entity clusters). Changing it asks "
                               "the sampled documents again under the new protocol and re-scores recall; each "
                               "score says which protocol it follows",
            "gold_public": "everyone sees the gold layer (document pages, the schema's examples, the sample file); "
                           "off: organisers only, so that annotators cannot look up the gold controls' answers "
                           "(leave it on for a corpus whose gold is published anyway)",
        }

    def __init__(self, *args, corpus: Corpus, **kwargs) -> None:
        from unpooled.service.crowd.mturk import MTurkConfig

        self.corpus = corpus
        super().__init__(*args, **kwargs)
        # which Mechanical Turk this server posts to, where it is chosen (UNPOOLED_MTURK_PRODUCTION)
        self.fields["backend"].help_text = (
            "Mechanical Turk here is the sandbox: test workers, no money paid" if MTurkConfig.from_env().sandbox
            else "Mechanical Turk here is PRODUCTION: real workers, paid real money from the AWS account")

    def clean(self):
        data = super().clean()
        # the rules need typed values: a field that did not parse is checked with its stored value,
        # and keeps only its parse error
        bad = set(self.errors)
        values = {f: getattr(self.instance, f) if f in bad else data.get(f) for f in console.SETTINGS_FIELDS}
        try:
            clean = console.check_settings(self.corpus, values)
        except console.SettingsError as exc:
            for field, msg in exc.errors.items():
                if field not in bad:
                    self.add_error(field if field in self.fields else None, msg)
        else:
            if not bad:
                data.update(clean)
        return data


class QuotaForm(forms.Form):
    per_day = forms.IntegerField(min_value=0, max_value=MAX_QUOTA, required=False, label="per day",
                                 widget=forms.NumberInput(attrs={"size": 5, "style": "width:6em"}))
    total = forms.IntegerField(min_value=0, max_value=MAX_QUOTA, required=False, label="in total",
                               widget=forms.NumberInput(attrs={"size": 5, "style": "width:6em"}))
