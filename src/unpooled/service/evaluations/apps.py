from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "unpooled.service.evaluations"
    label = "evaluations"
    verbose_name = "evaluations"
    default_auto_field = "django.db.models.BigAutoField"
