"""One settings module, read from the environment (django-environ).

Every setting has a safe local default, so a fresh clone runs on the embedded
SQLite database with no configuration. `.env.example` lists the variables.
"""
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-local-only-key-change-me-in-production")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "silvia.middleware.RejectNulInQueryString",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "silvia.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "silvia.wsgi.application"
ASGI_APPLICATION = "silvia.asgi.application"

# SQLite under var/ unless DATABASE_URL says otherwise (postgres://user@host:5432/db).
(BASE_DIR / "var").mkdir(exist_ok=True)
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")}
# A relative SQLite path (`sqlite:///var/db.sqlite3`) is relative to the
# project, not to wherever a command happens to run.
if DATABASES["default"]["ENGINE"].endswith("sqlite3") and DATABASES["default"]["NAME"] not in ("", ":memory:"):
    DATABASES["default"]["NAME"] = str(BASE_DIR / DATABASES["default"]["NAME"])
# Connections (README "Configuration"). The production server is uvicorn
# (ASGI), where Django's persistent connections (CONN_MAX_AGE) do not carry
# from one request to the next: each request would open its own (about 7 ms
# on PostgreSQL). So on PostgreSQL a psycopg-pool pool is the default
# (DATABASE_POOL=false turns it off, and `?conn_max_age=N` in DATABASE_URL
# then applies, for WSGI servers); Django refuses both at once.
if DATABASES["default"]["ENGINE"].endswith("postgresql") and env.bool("DATABASE_POOL", default=True):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"

REST_FRAMEWORK = {
    # Token first so that an unauthenticated request gets 401 with
    # `WWW-Authenticate: Token` (SPEC section 10), not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chat.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "silvia-citations",
    "DESCRIPTION": "Chat sessions of the finance assistant, each citation with its typed target.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# Limits of a turn record (README "Importing turns"): refusals name the limit.
TURN_MAX_TEXT_CHARS = env.int("TURN_MAX_TEXT_CHARS", default=1_000_000)  # user_message or answer, characters
TURN_MAX_TOOL_ROWS = env.int("TURN_MAX_TOOL_ROWS", default=200_000)  # rows of one execute_sql output
IMPORT_MAX_RECORD_BYTES = env.int("IMPORT_MAX_RECORD_BYTES", default=64 * 1024 * 1024)  # one record in a file
IMPORT_BATCH_SIZE = env.int("IMPORT_BATCH_SIZE", default=500)  # records per transaction
# Part of every session ETag: change it after a backfill so clients fetch again.
API_ETAG_SALT = env.str("API_ETAG_SALT", default="")

# Root of the library corpus (SPEC section 8).
# Relative to the project when relative.
CITATION_CORPUS_ROOT = BASE_DIR / env.str("CITATION_CORPUS_ROOT", default="examples/corpus")

# One console handler. Django's own loggers do not also propagate to the root
# (that printed each line twice), and the access log drops query strings,
# which can hold an account id typed into the admin search (SPEC section 9).
LOG_LEVEL = env.str("DJANGO_LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_query": {"()": "silvia.log_filters.RedactQueryString"}},
    "formatters": {
        "django.server": {"()": "django.utils.log.ServerFormatter", "format": "[{server_time}] {message}", "style": "{"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server", "filters": ["redact_query"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
}
