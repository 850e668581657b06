from django.contrib import admin

from .models import ApiToken, Invite, Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "role", "team", "invited", "affiliation", "created")
    list_filter = ("role", "invited")
    search_fields = ("user__username", "team__name")
    filter_horizontal = ("conflicts",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("team", "name", "prefix", "user", "created", "last_used", "revoked")
    readonly_fields = ("digest", "prefix")


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    list_display = ("note", "role", "created_by", "created", "expires", "used_by", "used")
    readonly_fields = ("code", "used_by", "used")
    filter_horizontal = ("conflicts",)
