from django.urls import path

from . import mturk_page, views

app_name = "organiser"
urlpatterns = [
    path("organiser/", views.home, name="home"),
    path("organiser/annotation/", views.annotation, name="annotation"),
    path("organiser/settings/", views.settings_page, name="settings"),
    path("organiser/submissions/", views.submissions, name="submissions"),
    path("organiser/submissions/<int:pk>/retry/", views.retry, name="retry"),
    path("organiser/teams/", views.teams, name="teams"),
    path("organiser/mturk/", mturk_page.mturk, name="mturk"),
    path("organiser/teams/<int:pk>/quota/", views.team_quota, name="team_quota"),
    path("organiser/teams/<int:pk>/approve/", views.team_approve, name="team_approve"),
    path("organiser/release/", views.release, name="release"),
    path("organiser/periods/", views.periods, name="periods"),
    path("organiser/periods/open/", views.period_open, name="period_open"),
    path("organiser/periods/<int:pk>/close/", views.period_close, name="period_close"),
    path("organiser/periods/<int:pk>/release/", views.period_release, name="period_release"),
    path("organiser/reference/", views.reference_request, name="reference"),
    path("organiser/documents/", views.document_sampling, name="documents"),
    path("organiser/documents/analyse/", views.document_analysis, name="documents_analyse"),
    path("organiser/documents/sample/", views.document_sample, name="documents_sample"),
]
