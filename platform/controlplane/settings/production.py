"""Production settings: PostgreSQL, a real broker and secrets, all from the environment.

Importing this module fails with the missing variable's name unless each is set, so a
misconfigured deployment never silently falls back to the embedded default.
"""

from controlplane.env import env_bool, env_int, env_str

for _required in ("DJANGO_SECRET_KEY", "PLATFORM_MASTER_KEYS", "DATABASE_URL", "CELERY_BROKER_URL", "PLATFORM_VLLM_URLS",
                  "PLATFORM_VLLM_API_KEY"):
    env_str(_required)

from controlplane.settings.base import *  # noqa: E402,F403

DEBUG = False
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# TLS usually ends at a load balancer; these are for when this process sees HTTPS itself.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SSL_REDIRECT", False)
# HSTS goes out on HTTPS responses only (as the proxy header says they are): a year by default.
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 365 * 24 * 3600, minimum=0)
