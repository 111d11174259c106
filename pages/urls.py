from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from pages import views

app_name = "pages"

urlpatterns = [
    path("", views.home, name="home"),
    path("chat/", views.session_list, name="session-list"),
    path("chat/new/", views.session_new, name="session-new"),
    # Any segment reaches the view, so a malformed id is the same 404 as a missing one.
    path("chat/answer-preview/", views.answer_preview, name="answer-preview"),
    re_path(r"^chat/(?P<session_id>[^/]+)/$", views.session_detail, name="session-detail"),
    re_path(r"^chat/(?P<session_id>[^/]+)/delete/$", views.session_delete, name="session-delete"),
    re_path(r"^chat/(?P<session_id>[^/]+)/turns/(?P<log_id>[^/]+)/$", views.turn_detail, name="turn-detail"),
    path("favicon.ico", views.favicon, name="favicon"),
    # `account_path` links have no trailing slash; one is tolerated.
    re_path(r"^accounts/(?P<segment>[^/]+)/?$", views.account_detail, name="account"),
    path("portfolio/", views.portfolio, name="portfolio"),
]

# Django's own sign-in and sign-out, named as `LOGIN_URL` and the templates expect.
auth_urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="pages/login.html", redirect_authenticated_user=True),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
