from django import forms
from django.core import validators

from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.actions import LINK_MAX
from unpooled.service.submissions.models import Submission


class UploadForm(forms.Form):
    corpus = forms.ModelChoiceField(queryset=Corpus.objects.all(), to_field_name="name", empty_label=None)
    team = forms.CharField(max_length=100, required=False,
                           help_text="organisers only: the team this run is for (default: yours)")
    run = forms.CharField(max_length=200, required=False, help_text="default: the run id line of a TAC file")
    format = forms.ChoiceField(choices=[("", "detect"), ("tac", "TAC KBP Cold Start"), ("jsonl", "JSONL")],
                               required=False)
    visibility = forms.ChoiceField(choices=Submission.Visibility.choices, initial=Submission.Visibility.PUBLIC)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2, "cols": 60}), required=False)
    file = forms.FileField(help_text="plain or gzip-compressed")

    def clean_corpus(self):
        """A corpus whose evaluation period closed takes no submission: said at once, before the file is stored and
        validated (UX review #9: the refusal came after the upload)."""
        from unpooled.service.corpora.periods import PeriodError, period_for_upload

        corpus = self.cleaned_data["corpus"]
        try:
            period_for_upload(corpus)
        except PeriodError as exc:
            raise forms.ValidationError(str(exc)) from None
        return corpus

    def clean_run(self):
        from unpooled.service.submissions.names import name_problem

        run = (self.cleaned_data.get("run") or "").strip()
        why = name_problem(run, "run") if run else None
        if why:
            raise forms.ValidationError(why.removeprefix("run: "))
        return run

    def clean_description(self):
        return _plain_description(self.cleaned_data.get("description"))


def _plain_description(text) -> str:
    """A description readers see as written (no control, invisible or direction-changing character)."""
    from unpooled.service.submissions.names import description_problem

    text = (text or "").strip()
    why = description_problem(text)
    if why:
        raise forms.ValidationError(why.removeprefix("description: "))
    return text


class SubmissionSettingsForm(forms.ModelForm):
    """What the submitting team may change on its submission's page."""

    link = forms.URLField(max_length=LINK_MAX, required=False, assume_scheme="https",
                          validators=[validators.URLValidator(schemes=["http", "https"])],
                          help_text="the method's paper or code (http or https)")
    description = forms.CharField(max_length=2000, required=False,
                                  widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                                  help_text="the method in a sentence or two (shown on the leaderboard)")

    class Meta:
        model = Submission
        fields = ["visibility", "description", "link"]

    def clean_link(self):
        from unpooled.service.submissions.actions import link_problem

        from django.utils.encoding import iri_to_uri

        link = iri_to_uri((self.cleaned_data.get("link") or "").strip())  # a pasted address with accents: encoded
        why = link_problem(link)
        if why:
            raise forms.ValidationError(why)
        return link.strip()

    def clean_description(self):
        return _plain_description(self.cleaned_data.get("description"))
