from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "unpooled.service.web"
    label = "web"
    verbose_name = "Web pages"
