from django import forms
from django.contrib.auth.password_validation import validate_password

from .models import Role


class SignUpForm(forms.Form):
    username = forms.RegexField(regex=r"^[\w.@+-]{2,150}$", max_length=150,
                                help_text="letters, digits and @/./+/-/_",
                                error_messages={"invalid": "use 2–150 letters, digits and @/./+/-/_"})
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, min_length=8, help_text="at least 8 characters")
    role = forms.ChoiceField(choices=[(Role.SUBMITTER, "submitter: I submit knowledge bases for a team"),
                                      (Role.ANNOTATOR, "annotator: I annotate")], initial=Role.SUBMITTER,
                             widget=forms.RadioSelect)
    team = forms.CharField(max_length=100, required=False, help_text="submitters: a new team, or the one you join")
    invite_code = forms.CharField(max_length=20, required=False, help_text="to join an existing team")
    affiliation = forms.CharField(max_length=200, required=False)

    def clean_password(self):
        pw = self.cleaned_data["password"]
        validate_password(pw)
        return pw

    def clean(self):
        data = super().clean()
        if data.get("role") == Role.SUBMITTER and not (data.get("team") or "").strip():
            self.add_error("team", "a submitter belongs to a team: name a new one, or an existing one with its invite code")
        return data


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="cli", help_text="what the token is for")
