from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "unpooled.service.annotation"
    label = "annotation"
    verbose_name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from unpooled.service.accounts import actions as accounts

        from .models import AnnotationSettings

        def any_open() -> bool:
            return AnnotationSettings.objects.filter(open_signup=True).exists()

        # accounts (below this app) asks whether annotators may sign up without an invite
        if not any(getattr(f, "__qualname__", "") == any_open.__qualname__ for f in accounts.open_signup_checks):
            accounts.open_signup_checks.append(any_open)
