from django.urls import path

from . import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.sign_in, name="login"),
    path("signup/", views.signup, name="signup"),
    path("invites/", views.invites, name="invites"),
    path("invites/redeem/", views.invite_redeem, name="invite_redeem"),
    path("home/", views.home, name="home"),
    path("", views.account, name="account"),
    path("tokens/", views.token_create, name="token_create"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]
