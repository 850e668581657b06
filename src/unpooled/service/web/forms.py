from django import forms

from unpooled.service.corpora.models import Corpus
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
