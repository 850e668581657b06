from django.urls import path, re_path

from . import views
from .views.docs import docs_page
from .views.entity_leaderboard import entity_leaderboard, entity_leaderboard_csv

app_name = "web"
urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.explore.favicon, name="favicon"),
    path("corpora/<slug:name>/", views.corpus_detail, name="corpus"),
    path("corpora/<slug:name>/documents/<int:pk>/", views.document_detail, name="document"),
    path("corpora/<slug:name>/leaderboard/", views.leaderboard, name="leaderboard"),
    path("corpora/<slug:name>/participate/", views.participate.participate_page, name="participate"),
    path("corpora/<slug:name>/schema/", views.participate.schema_page, name="schema"),
    path("corpora/<slug:name>/sample.jsonl", views.participate.sample_file, name="sample"),
    path("demo/status.json", views.demo.demo_status, name="demo_status"),
    path("corpora/<slug:name>/leaderboard.csv", views.leaderboard_csv, name="leaderboard_csv"),
    path("about/numbers/", views.about_numbers, name="about_numbers"),
    re_path(r"^docs/(?P<path>.*)$", docs_page, name="docs"),
    path("corpora/<slug:name>/leaderboard/entities/", entity_leaderboard, name="leaderboard_entities"),
    path("corpora/<slug:name>/leaderboard/entities.csv", entity_leaderboard_csv, name="leaderboard_entities_csv"),
    path("submissions/", views.submission_list, name="submissions"),
    path("submissions/new/", views.upload, name="upload"),
    path("submissions/uploads/", views.upload_history, name="upload_history"),
    path("submissions/uploads/<str:task_id>/", views.upload_status, name="upload_status"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission"),
    path("submissions/<int:pk>/settings/", views.submission_settings, name="submission_settings"),
    path("submissions/<int:pk>/status/", views.status, name="status"),
    path("submissions/<int:pk>/status.json", views.status_json, name="status_json"),
    path("submissions/<int:pk>/retry/", views.retry, name="retry"),
    path("submissions/<int:pk>/export.<str:fmt>", views.submission_export, name="export"),
    path("submissions/<int:pk>/sample.jsonl", views.submission.submission_sample, name="submission_sample"),
    path("submissions/<int:pk>/scores.<str:fmt>", views.submission.submission_scores, name="submission_scores"),
]
