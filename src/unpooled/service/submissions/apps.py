from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "unpooled.service.submissions"
    label = "submissions"
    verbose_name = "Teams and submissions"
    default_auto_field = "django.db.models.BigAutoField"
