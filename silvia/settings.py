"""One settings module, read from the environment (django-environ).

A fresh clone runs on the embedded SQLite database with `DJANGO_DEBUG=true`
and nothing else. With DEBUG off (the default) `DJANGO_SECRET_KEY` is
required, and every `check --deploy` item is set from the environment
(docs/deploying.md). `.env.example` lists the variables; docs/configuration.md explains them.
"""

import importlib.util
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from silvia.logging_config import build_logging
from silvia.startup import url_problem

#: The DATABASE_URL schemes this service runs on (django-environ's names for PostgreSQL, and SQLite).
DATABASE_SCHEMES = ("postgres", "postgresql", "pgsql", "psql", "sqlite")

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# No committed fallback outside DEBUG: a server that signs sessions with a key
# everyone can read must not start.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set: it is required when DJANGO_DEBUG is off. Generate one with "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(50))'` (or set DJANGO_DEBUG=true on a laptop)."
        )
    SECRET_KEY = "django-insecure-local-debug-only"  # noqa: S105 -- DEBUG only; check --deploy flags the prefix
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
# A JSON 403 under /api/, Django's page elsewhere (docs/api.md#errors).
CSRF_FAILURE_VIEW = "silvia.views.csrf_failure"

# HTTPS (each one a `check --deploy` item; docs/deploying.md "The environment" sets them all).
# Off by default so that `make run` and the tests work over plain HTTP.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
# Load balancers and Prometheus call these over plain HTTP, inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=False)
# `HTTP_X_FORWARDED_PROTO,https`: trust the proxy's header saying the request came over HTTPS.
_proxy_ssl_header = env.list("DJANGO_SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_ssl_header and len(_proxy_ssl_header) != 2:
    raise ImproperlyConfigured(
        "DJANGO_SECURE_PROXY_SSL_HEADER must be `HEADER,value`, e.g. `HTTP_X_FORWARDED_PROTO,https`."
    )
SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header[0], _proxy_ssl_header[1]) if _proxy_ssl_header else None

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
    "axes",
    "chat",
    "live",
    "pages",
    "finance",
]
# Development tools (devtools/: the recorded model and `serve_recorded_model`): installed with DEBUG on
# when the package is present. A production install leaves the folder out (docs/deploying.md).
if DEBUG and importlib.util.find_spec("devtools") is not None:
    INSTALLED_APPS.append("devtools")

MIDDLEWARE = [
    # First: a control character in a path, query, header or cookie never reaches anything else.
    "silvia.middleware.reject_control_characters",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Refuses a locked-out sign-in (django-axes: docs/deploying.md#sign-in-throttling); after authentication.
    "axes.middleware.AxesMiddleware",
    # Last: the chain runs sync, in one thread hop under ASGI (silvia/middleware.py says why).
    "silvia.middleware.sync_chain",
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

# SQLite under var/ unless DATABASE_URL says otherwise (postgres://user@host:5432/db). A URL without a
# scheme we serve is refused here, named without its password (silvia/startup.py), not a KeyError below.
(BASE_DIR / "var").mkdir(exist_ok=True)
_database_url_problem = url_problem(
    "DATABASE_URL", env.str("DATABASE_URL", default="sqlite://"), DATABASE_SCHEMES, "postgres://user@host:5432/name"
)
if _database_url_problem:
    raise ImproperlyConfigured(_database_url_problem)
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")}
# A relative SQLite path (`sqlite:///var/db.sqlite3`) is relative to the
# project, not to wherever a command happens to run.
if DATABASES["default"]["ENGINE"].endswith("sqlite3") and DATABASES["default"]["NAME"] not in ("", ":memory:"):
    DATABASES["default"]["NAME"] = str(BASE_DIR / DATABASES["default"]["NAME"])
# Connections (docs/deploying.md#database-connections): on PostgreSQL, Django's psycopg-pool pool, the one
# way for the stream process (ASGI: each request has a thread of its own, so persistent connections would
# not carry over) and as cheap for gunicorn's threads. DATABASE_POOL=false turns it off (`?conn_max_age=N`
# in DATABASE_URL then applies). A connection is checked when a request takes it, so one the server closed
# is replaced, not reported as an error: by Django (CONN_HEALTH_CHECKS) without the pool, by the backend
# (silvia/postgresql/base.py) with it, which also drops every idle one at the first that failed.
# A read replica (docs/deploying.md#a-read-replica): a PostgreSQL streaming replica of DATABASE_URL. The API's,
# the pages' and the admin's GETs read the chat and finance tables there, each user's own writes included
# (chat.replica); everything else stays on the primary. Unset: one database.
_replica_url = env.str("DATABASE_REPLICA_URL", default="")
if _replica_url:
    _replica_problem = url_problem(
        "DATABASE_REPLICA_URL", _replica_url, DATABASE_SCHEMES[:-1], "postgres://user@replica:5432/name"
    )
    if _replica_problem:
        raise ImproperlyConfigured(_replica_problem)
    if not DATABASES["default"]["ENGINE"].endswith("postgresql"):
        raise ImproperlyConfigured("DATABASE_REPLICA_URL needs DATABASE_URL on PostgreSQL (a replica of it)")
    # Tests read the replica as the test database itself (Django's TEST MIRROR).
    DATABASES["replica"] = {**env.db_url_config(_replica_url), "TEST": {"MIRROR": "default"}}
    DATABASE_ROUTERS = ["chat.replica.ReplicaRouter"]
    MIDDLEWARE.insert(MIDDLEWARE.index("silvia.middleware.sync_chain"), "chat.replica.replica_reads")
for _database in DATABASES.values():
    _database["CONN_HEALTH_CHECKS"] = True
    if _database["ENGINE"].endswith("postgresql") and env.bool("DATABASE_POOL", default=True):
        # Django's backend, naming a database it cannot reach in one line and checking pooled connections.
        _database["ENGINE"] = "silvia.postgresql"
        _database["CONN_HEALTH_CHECKS"] = False  # the pool's own check backs off 1, 2, 4 s... per dead one
        _database["CONN_MAX_AGE"] = 0
        _database.setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
            "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
            "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
        }
    if _database["ENGINE"].endswith("postgresql") and env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
        # Parameters sent apart from the statement, and a statement run more than five times on a connection
        # prepared there (psycopg's automatic preparation): PostgreSQL parses and plans a turn's repeated statements
        # once per connection (docs/deploying.md#prepared-statements). Off for a pooler that cannot keep them.
        _database.setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Sign-in that resists guessing (docs/deploying.md#sign-in-throttling): django-axes counts failed sign-ins at
# /login/ and /admin/login/ (any `authenticate()` with a request) in the database, per account and per address
# separately; past LOGIN_FAILURE_LIMIT either is refused (429) for LOGIN_COOLOFF_MINUTES, the right password
# included. A success resets the account's count. The API's token auth never calls authenticate(): DRF's
# throttles stay its own. Behind a proxy, name the header it sets (LOGIN_CLIENT_IP_HEADERS) and how many proxies
# (LOGIN_PROXY_COUNT); by default only the connection's own address counts (a header could be forged).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("LOGIN_COOLOFF_MINUTES", default=15.0) / 60  # hours, as django-axes reads a number
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no start-up line (a command's stderr stays its own); lockouts are still logged
AXES_LOCKOUT_TEMPLATE = "pages/locked_out.html"
AXES_DISABLE_ACCESS_LOG = True  # no row per successful sign-in; failures are counted in axes_accessattempt
AXES_IPWARE_META_PRECEDENCE_ORDER = tuple(env.list("LOGIN_CLIENT_IP_HEADERS", default=["REMOTE_ADDR"]))
AXES_IPWARE_PROXY_COUNT = env.int("LOGIN_PROXY_COUNT", default=None)

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
# `manage.py collectstatic` writes here; whitenoise serves it (hashed, compressed) with DEBUG off.
STATIC_ROOT = BASE_DIR / env.str("DJANGO_STATIC_ROOT", default="var/static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Pages (docs/pages.md): Django's sign-in, then the sessions page.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:session-list"
LOGOUT_REDIRECT_URL = "login"
WHITENOISE_USE_FINDERS = True
(BASE_DIR / "var" / "static").mkdir(exist_ok=True)

REST_FRAMEWORK = {
    # Token first so that an unauthenticated request gets 401 with
    # `WWW-Authenticate: Token` (docs/api.md), not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chat.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON, form and multipart parsers, with a too-deep JSON body a 400 (chat/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "chat.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # A database that cannot answer (down, or its pool exhausted) is a JSON 503, not a 500.
    "EXCEPTION_HANDLER": "chat.api.exceptions.exception_handler",
    # The turn POST's throttle (scope `live_turns`, docs/live.md#admission): a rate per user.
    "DEFAULT_THROTTLE_RATES": {"live_turns": env.str("LIVE_TURN_THROTTLE_RATE", default="30/minute")},
}

# DRF's throttles count in the cache. The default (local memory) counts per
# process; a shared cache (`CACHE_URL=redis://…` with redis-py, or
# `dbcache://silvia_cache` after `manage.py createcachetable`) counts across processes.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}

SPECTACULAR_SETTINGS = {
    "TITLE": "silvia-citations",
    "DESCRIPTION": "Chat sessions of the finance assistant, each citation with its typed target.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Every operation answers 401 without credentials: documented once, for all (chat/api/schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "chat.api.schema.document_401"],
}

# Limits of a turn record (docs/running.md "Importing turns"): refusals name the limit.
TURN_MAX_TEXT_CHARS = env.int("TURN_MAX_TEXT_CHARS", default=1_000_000)  # user_message or answer, characters
TURN_MAX_TOOL_ROWS = env.int("TURN_MAX_TOOL_ROWS", default=200_000)  # rows of one execute_sql output
IMPORT_MAX_RECORD_BYTES = env.int("IMPORT_MAX_RECORD_BYTES", default=64 * 1024 * 1024)  # one record in a file
IMPORT_BATCH_SIZE = env.int("IMPORT_BATCH_SIZE", default=500)  # records per transaction
# Part of every session ETag: change it after a backfill so clients fetch again.
API_ETAG_SALT = env.str("API_ETAG_SALT", default="")

# Root of the library corpus (docs/citable.md#the-library-corpus).
# Relative to the project when relative.
CITATION_CORPUS_ROOT = BASE_DIR / env.str("CITATION_CORPUS_ROOT", default="examples/corpus")

# Every handler carries the privacy filter (docs/privacy.md, silvia/logging_config.py).
LOG_LEVEL = env.str("DJANGO_LOG_LEVEL", default="INFO")
ACCESS_LOG = env.bool("DJANGO_ACCESS_LOG", default=True)
LOGGING = build_logging(LOG_LEVEL, access_log=ACCESS_LOG)

# Operations (docs/metrics.md, docs/deploying.md#health-and-readiness).
# /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`; unset, it is a 404.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# What /readyz checks: {name: dotted path of a callable that raises when its part is unreachable}
# (silvia/readiness.py): the database, the job engine's broker (docs/job-engine.md), the SQL tool's role.
READINESS_CHECKS = {
    "database": "silvia.readiness.database",
    "job_engine": "silvia.readiness.job_engine",
    # The role may switch to the SQL tool's reader (docs/deploying.md#the-runtime-role).
    "sql_tool": "silvia.readiness.sql_tool",
}

# Tools a live turn can use (docs/tools.md, docs/sandbox.md: every variable there); one not configured is not offered.
EXA_API_KEY = env.str("EXA_API_KEY", default="")
EXA_BASE_URL = env.str("EXA_BASE_URL", default="https://api.exa.ai")
SEARCH_WEB_TIMEOUT_SECONDS = env.float("SEARCH_WEB_TIMEOUT_SECONDS", default=15.0)
SEARCH_WEB_MAX_RESULTS = env.int("SEARCH_WEB_MAX_RESULTS", default=5)
EXECUTE_PYTHON_ENABLED = env.bool("EXECUTE_PYTHON_ENABLED", default=False)
EXECUTE_PYTHON_TIMEOUT_SECONDS = env.float("EXECUTE_PYTHON_TIMEOUT_SECONDS", default=10.0)
EXECUTE_PYTHON_CPU_SECONDS = env.int("EXECUTE_PYTHON_CPU_SECONDS", default=5)
EXECUTE_PYTHON_MEMORY_MB = env.int("EXECUTE_PYTHON_MEMORY_MB", default=512)
EXECUTE_PYTHON_MAX_PROCESSES = env.int("EXECUTE_PYTHON_MAX_PROCESSES", default=16)
EXECUTE_PYTHON_DISK_MB = env.int("EXECUTE_PYTHON_DISK_MB", default=64)
EXECUTE_PYTHON_OUTPUT_BYTES = env.int("EXECUTE_PYTHON_OUTPUT_BYTES", default=65_536)
EXECUTE_PYTHON_BWRAP = env.str("EXECUTE_PYTHON_BWRAP", default="bwrap")
EXECUTE_PYTHON_INTERPRETER = env.str("EXECUTE_PYTHON_INTERPRETER", default="")
EXECUTE_PYTHON_SANDBOX_UID = env.int("EXECUTE_PYTHON_SANDBOX_UID", default=65534)
FINNHUB_API_KEY = env.str("FINNHUB_API_KEY", default="")
EGRESS_UPSTREAM_OVERRIDES = env.str("EGRESS_UPSTREAM_OVERRIDES", default="")

# The execute_sql tool (finance/sql_tool.py; docs/sql-tool.md).
FINANCE_SQL_TIMEOUT_MS = env.int("FINANCE_SQL_TIMEOUT_MS", default=5000)
FINANCE_SQL_MAX_ROWS = env.int("FINANCE_SQL_MAX_ROWS", default=1000)
FINANCE_SQL_MAX_CHARS = env.int("FINANCE_SQL_MAX_CHARS", default=1_000_000)
FINANCE_SQL_MAX_VALUE_CHARS = env.int("FINANCE_SQL_MAX_VALUE_CHARS", default=65_536)
FINANCE_SQL_READER_ROLE = env.str("FINANCE_SQL_READER_ROLE", default="")
FINANCE_SQL_VIEW_OWNER_ROLE = env.str("FINANCE_SQL_VIEW_OWNER_ROLE", default="")

# Live turns (docs/live.md, docs/configuration.md). The SDK reads no other
# variable: these are passed to it explicitly. ANTHROPIC_BASE_URL points the
# SDK at the recorded model (`python manage.py serve_recorded_model`, devtools/).
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="") or None
ANTHROPIC_MODEL = env.str("ANTHROPIC_MODEL", default="claude-sonnet-5")
ANTHROPIC_MAX_TOKENS = env.int("ANTHROPIC_MAX_TOKENS", default=4096)
ANTHROPIC_TIMEOUT_SECONDS = env.float("ANTHROPIC_TIMEOUT_SECONDS", default=60.0)
ANTHROPIC_MAX_RETRIES = env.int("ANTHROPIC_MAX_RETRIES", default=2)
LIVE_TURN_MAX_STEPS = env.int("LIVE_TURN_MAX_STEPS", default=8)
# A model step whose stream ends before message_stop is asked again this many times, then the turn fails
# (model_stream_cut; docs/live.md#failures).
LIVE_TURN_CUT_STREAM_RETRIES = env.int("LIVE_TURN_CUT_STREAM_RETRIES", default=2)
LIVE_TURN_MESSAGE_MAX_CHARS = env.int("LIVE_TURN_MESSAGE_MAX_CHARS", default=20000)
LIVE_TOOL_TIMEOUT_SECONDS = env.float("LIVE_TOOL_TIMEOUT_SECONDS", default=30.0)
LIVE_TURN_FLUSH_SECONDS = env.float("LIVE_TURN_FLUSH_SECONDS", default=0.05)
# Under load a batch covers more time: a process writes at most this many batches a second in all, each turn's
# interval growing up to the max (live/writer.py, docs/live.md#batches-under-load).
LIVE_TURN_BATCHES_PER_SECOND = env.float("LIVE_TURN_BATCHES_PER_SECOND", default=100.0)
LIVE_TURN_FLUSH_MAX_SECONDS = env.float("LIVE_TURN_FLUSH_MAX_SECONDS", default=0.25)
LIVE_TURN_POLL_SECONDS = env.float("LIVE_TURN_POLL_SECONDS", default=0.2)
LIVE_TURN_KEEPALIVE_SECONDS = env.float("LIVE_TURN_KEEPALIVE_SECONDS", default=15.0)
# A worker reads this often whether the turns it runs were stopped (live/stops.py, docs/live.md#stopping-a-turn).
LIVE_TURN_STOP_POLL_SECONDS = env.float("LIVE_TURN_STOP_POLL_SECONDS", default=0.5)
# Admission (docs/live.md#admission): queued or running turns per user (429 past it), turns
# waiting for a worker (503 past it), and the Retry-After both answers carry.
LIVE_TURN_MAX_PER_USER = env.int("LIVE_TURN_MAX_PER_USER", default=3)
LIVE_TURN_MAX_QUEUED = env.int("LIVE_TURN_MAX_QUEUED", default=200)
LIVE_TURN_RETRY_AFTER_SECONDS = env.int("LIVE_TURN_RETRY_AFTER_SECONDS", default=5)
# How many times a worker may take a turn again after the one running it stopped; then it fails.
LIVE_TURN_MAX_RESUMES = env.int("LIVE_TURN_MAX_RESUMES", default=3)
# Stuck turns (docs/job-engine.md#stuck-turns): queued this long, or running with no write this long
# (longer than a model request's timeout and retries, or a tool's), a turn is ended; its start is
# retried this many times while the database refuses it.
LIVE_TURN_QUEUED_TIMEOUT_SECONDS = env.int("LIVE_TURN_QUEUED_TIMEOUT_SECONDS", default=600)
LIVE_TURN_STALLED_SECONDS = env.int("LIVE_TURN_STALLED_SECONDS", default=900)
LIVE_TURN_START_RETRIES = env.int("LIVE_TURN_START_RETRIES", default=5)
# The engine's own sweep (live.sweeps, a timer in every worker: docs/job-engine.md#the-workers-sweep): this
# often it sends again the queued turns whose task never reached the broker (after this long) and ends the
# turns past their bounds; it queues the retention pass this often.
LIVE_TURN_SWEEP_SECONDS = env.float("LIVE_TURN_SWEEP_SECONDS", default=2.0)
LIVE_TURN_RESEND_AFTER_SECONDS = env.float("LIVE_TURN_RESEND_AFTER_SECONDS", default=5.0)
RETENTION_PASS_SECONDS = env.float("RETENTION_PASS_SECONDS", default=3600.0)
# Test only (docs/job-engine.md#the-workers-sweep): a POST waits this long between its turn's commit and the
# send of its task, so a test can kill the process there. Never set it on a server.
LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS = env.float("LIVE_TURN_TEST_PAUSE_BEFORE_SEND_SECONDS", default=0.0)
# Admissions one process runs at once (their database work); a POST waits this long for a slot (on the event
# loop under ASGI: live.admission), then 503 with Retry-After. Short: a burst is answered at once.
LIVE_TURN_ADMISSIONS_AT_ONCE = env.int("LIVE_TURN_ADMISSIONS_AT_ONCE", default=4)
LIVE_TURN_ADMISSION_WAIT_SECONDS = env.float("LIVE_TURN_ADMISSION_WAIT_SECONDS", default=1.0)
# The stream process's event-log reads (live.stream): this many threads of their own, each borrowing a pooled
# connection per read; a read that fails is tried again this many times (backing off) before the stream ends
# and its client reconnects (docs/deploying.md#database-connections: the pool holds both these and admissions).
LIVE_SSE_READ_THREADS = env.int("LIVE_SSE_READ_THREADS", default=4)
LIVE_SSE_READ_RETRIES = env.int("LIVE_SSE_READ_RETRIES", default=5)
# The `retry:` each event stream starts with: how long an EventSource waits before it reconnects.
LIVE_SSE_RETRY_MS = env.int("LIVE_SSE_RETRY_MS", default=3000)
# Event streams (reconnects, GET .../events/) one user may have open in one process; past it 429.
LIVE_SSE_MAX_STREAMS_PER_USER = env.int("LIVE_SSE_MAX_STREAMS_PER_USER", default=20)
# The stream process opens a plain stream (a token, a queued or running turn, Last-Event-ID) without Django's
# request (live.direct; docs/live.md#direct-opens); false sends every open through Django.
LIVE_SSE_DIRECT_OPENS = env.bool("LIVE_SSE_DIRECT_OPENS", default=True)
# Extra tool factories, dotted paths of callables returning a ToolExecutor or None (tools.registry).
LIVE_TOOL_FACTORIES = env.list("LIVE_TOOL_FACTORIES", default=[])

# Retention (docs/privacy.md#retention, silvia/retention.py): a finished turn's event log and checkpoint are
# kept this long after it ends (a reconnect then gets 410); chat logs older than CHAT_LOG_MAX_AGE_DAYS are
# removed (unset: kept for ever); each pass deletes in batches of RETENTION_BATCH_SIZE rows, one transaction each.
LIVE_TURN_EVENTS_KEEP_SECONDS = env.int("LIVE_TURN_EVENTS_KEEP_SECONDS", default=86_400)
CHAT_LOG_MAX_AGE_DAYS = env.int("CHAT_LOG_MAX_AGE_DAYS", default=None)
RETENTION_BATCH_SIZE = env.int("RETENTION_BATCH_SIZE", default=1000)

# SQLite serves live turns from several threads (and processes in tests):
# WAL lets readers run beside the writer (synchronous=NORMAL: a commit does
# not wait for the disk; a crashed process loses nothing, a power cut may
# lose the last commits), IMMEDIATE transactions take the
# write lock up front instead of failing to upgrade, and a writer waits up to
# 20 s for the lock. The test database is a file so server processes started
# by the tests share it.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
    DATABASES["default"].setdefault("TEST", {}).setdefault("NAME", str(BASE_DIR / "var" / "test_db.sqlite3"))

# The job engine: Celery (docs/job-engine.md). With no broker URL, the embedded default: kombu's
# SQLAlchemy transport on a SQLite file under var/broker/, for `make run` (silvia/embedded_broker.py).
CELERY_BROKER_DIR = BASE_DIR / env.str("CELERY_BROKER_DIR", default="var/broker")
CELERY_BROKER_EMBEDDED = not env.str("CELERY_BROKER_URL", default="")
if CELERY_BROKER_EMBEDDED:
    if "?" in str(CELERY_BROKER_DIR.resolve()):  # SQLAlchemy would read the rest of the URL as its query
        raise ImproperlyConfigured(f"CELERY_BROKER_DIR {str(CELERY_BROKER_DIR)!r}: a path with '?' cannot be used")
    CELERY_BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = f"sqlite:///{CELERY_BROKER_DIR.resolve() / 'broker.sqlite3'}"
    CELERY_BROKER_TRANSPORT = "silvia.embedded_broker:Transport"
    # Passed to SQLAlchemy's create_engine: a writer waits up to 30 s for SQLite's lock (its default is 5 s, and a
    # worker whose poll timed out would count its connection lost and take back the turns it runs).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
else:
    CELERY_BROKER_URL = env.str("CELERY_BROKER_URL")
    # Its scheme is checked against kombu's transports when a web or worker process starts (silvia/celery.py).
    _broker_url_problem = url_problem("CELERY_BROKER_URL", CELERY_BROKER_URL, (), "amqp://user@host:5672/vhost")
    if _broker_url_problem:
        raise ImproperlyConfigured(_broker_url_problem)
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="silvia-live-turns")
# Acknowledged when its turn ends (a dead worker's messages go to another at once); one turn per thread.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Threads: a turn mostly waits on the model (docs/deploying.md#database-connections gives the budget).
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=20)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# No results are kept, so the (disabled) backend is one object for the process: Celery otherwise makes one per
# thread, and the stream process answers each POST on a thread of its own (asgiref's), which built a backend
# for every turn it queued (7% of a POST's CPU, py-spy; docs/job-engine.md).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Task modules outside the apps' tasks.py: the retention pass (silvia/retention.py), run by the periodic timer.
CELERY_IMPORTS = ["silvia.retention"]
