from django.apps import AppConfig


class OrganiserConfig(AppConfig):
    name = "unpooled.service.organiser"
    label = "organiser"
    verbose_name = "Organiser console"
