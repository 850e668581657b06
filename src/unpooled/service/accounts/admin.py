from django.contrib import admin

from .models import ApiToken, Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "role", "team", "affiliation", "created")
    list_filter = ("role",)
    search_fields = ("user__username", "team__name")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("team", "name", "prefix", "user", "created", "last_used", "revoked")
    readonly_fields = ("digest", "prefix")
