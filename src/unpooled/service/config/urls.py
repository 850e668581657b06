from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("unpooled.service.api.urls")),
    path("accounts/", include("unpooled.service.accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("unpooled.service.annotation.urls")),
    path("", include("unpooled.service.organiser.urls")),
    path("", include("unpooled.service.web.urls")),
]

# the site's own error pages (styled, with navigation); the API answers its errors as JSON (api/urls.py)
handler403 = "unpooled.service.web.views.errors.forbidden"
handler404 = "unpooled.service.web.views.errors.not_found"
handler500 = "unpooled.service.web.views.errors.server_error"
