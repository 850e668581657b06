from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "unpooled.service.annotation"
    label = "annotation"
    verbose_name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"
