from django import forms
from django.contrib.auth.password_validation import validate_password

from unpooled.service.submissions.models import Team

from .actions import PASSWORD_MAX
from .models import Role


class SignUpForm(forms.Form):
    username = forms.RegexField(regex=r"^[\w.@+-]{2,150}$", max_length=150,
                                help_text="letters, digits and @/./+/-/_",
                                error_messages={"invalid": "use 2–150 letters, digits and @/./+/-/_"})
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, min_length=8, max_length=PASSWORD_MAX,
                               help_text="at least 8 characters, not a common password, not all digits")
    role = forms.ChoiceField(choices=[(Role.SUBMITTER, "submitter: I submit knowledge bases for a team"),
                                      (Role.ANNOTATOR, "annotator: I annotate")], initial=Role.SUBMITTER,
                             widget=forms.RadioSelect)
    team = forms.CharField(max_length=100, required=False, help_text="submitters: a new team, or the one you join")
    invite_code = forms.CharField(max_length=64, required=False,
                                  help_text="submitters: to join an existing team; annotators: an organiser's invite")
    affiliation = forms.CharField(max_length=200, required=False)
    ties = forms.CharField(max_length=2000, required=False, label="Your teams",
                           help_text="annotators: the teams you belong to or work with (a colleague's, a former "
                                     "employer's), separated by commas, or none; you will never judge their output")

    def clean_password(self):
        pw = self.cleaned_data["password"]
        from django.contrib.auth.models import User

        # the validators compare the password with the user name and e-mail given in the same form
        validate_password(pw, User(username=self.data.get("username", ""), email=self.data.get("email", "")))
        return pw

    def clean(self):
        data = super().clean()
        if data.get("role") == Role.SUBMITTER and not (data.get("team") or "").strip():
            self.add_error("team", "a submitter belongs to a team: name a new one, or an existing one with its invite code")
        return data


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="cli", help_text="what the token is for")


class InviteForm(forms.Form):
    note = forms.CharField(max_length=200, required=False, help_text="who it is for (organisers see it)")
    conflicts = forms.ModelMultipleChoiceField(queryset=Team.objects.order_by("name"), required=False,
                                               help_text="teams whose instances the invitee must never label")
    days = forms.IntegerField(min_value=1, max_value=365, initial=14, help_text="valid this many days")


class RedeemForm(forms.Form):
    invite_code = forms.CharField(max_length=64, help_text="an organiser's invite code")
    ties = forms.CharField(max_length=2000, required=False, label="Your teams",
                           help_text="the teams you belong to or work with, separated by commas, or none")
