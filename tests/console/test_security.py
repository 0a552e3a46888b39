"""The console's security headers and cookies, and its vendored files' checksums."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import console

VENDOR = Path(console.__file__).parent / "static" / "console" / "vendor"


def test_pages_forbid_inline_scripts_framing_and_other_origins(acme_admin):
    response = acme_admin.client.get("/console/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert response["X-Frame-Options"] == "DENY" and response["X-Content-Type-Options"] == "nosniff"


def test_no_template_has_an_inline_script_or_handler():
    templates = Path(console.__file__).parent / "templates"
    for template in templates.rglob("*.html"):
        html = template.read_text()
        assert "<script>" not in html and " onclick=" not in html and " onchange=" not in html, template
        assert "http://" not in html and "https://" not in html, f"{template} loads from elsewhere"


def test_production_sets_secure_cookies_and_hsts():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings.production", "DJANGO_SECRET_KEY": "x" * 50,
           "PLATFORM_MASTER_KEYS": "k:" + "a" * 44, "DATABASE_URL": "postgres://u:p@h/db", "CELERY_BROKER_URL": "redis://h",
           "PLATFORM_VLLM_URLS": "http://h:8000", "PLATFORM_VLLM_API_KEY": "k"}
    code = ("from django.conf import settings as s; "
            "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS >= 31536000, s.SESSION_COOKIE_HTTPONLY)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True", "True"]


def test_vendored_files_match_their_checksums():
    listed = dict(line.split()[::-1] for line in (VENDOR / "SHA256SUMS").read_text().splitlines())
    assert listed, "nothing listed"
    for name, digest in listed.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    shipped = {p.name for p in VENDOR.iterdir() if p.suffix in (".js", ".css")}
    assert shipped == set(listed), "every vendored script and stylesheet is listed, and only those"


def test_the_static_files_are_served_by_the_web_server(client):
    response = client.get("/static/console/vendor/htmx-2.0.11.min.js")
    assert response.status_code == 200
