from django.apps import AppConfig


class CorporaConfig(AppConfig):
    name = "unpooled.service.corpora"
    label = "corpora"
    verbose_name = "Corpora and relation schemas"
    default_auto_field = "django.db.models.BigAutoField"
