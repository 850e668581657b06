from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("unpooled.service.annotation.urls")),
    path("", include("unpooled.service.web.urls")),
]
