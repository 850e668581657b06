from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "unpooled.service.accounts"
    label = "accounts"
    verbose_name = "Accounts, roles and API tokens"
    default_auto_field = "django.db.models.BigAutoField"
