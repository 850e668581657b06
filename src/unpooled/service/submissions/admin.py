from django.contrib import admin

from .models import Submission, Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "created")
    search_fields = ("name",)


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "run_id", "corpus", "format", "status", "created")
    list_filter = ("corpus", "status", "format")
    search_fields = ("run_id", "team__name", "file_sha256")
    list_select_related = ("team", "corpus")
    readonly_fields = ("file_sha256", "file_size", "counts", "warnings", "created", "updated")
