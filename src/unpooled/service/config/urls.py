from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("unpooled.service.api.urls")),
    path("accounts/", include("unpooled.service.accounts.urls")),
    # of django.contrib.auth's pages, the names the templates use (the sign-in itself is accounts:login at the
    # same address) and the signed-in user's password change; no password reset: the service sends no mail, and
    # an unthrottled reset form would mail any registered address on demand (security review N15)
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("", include("unpooled.service.annotation.urls")),
    path("", include("unpooled.service.organiser.urls")),
    path("", include("unpooled.service.web.urls")),
]

# the site's own error pages (styled, with navigation); the API answers its errors as JSON (api/urls.py)
handler403 = "unpooled.service.web.views.errors.forbidden"
handler404 = "unpooled.service.web.views.errors.not_found"
handler500 = "unpooled.service.web.views.errors.server_error"
