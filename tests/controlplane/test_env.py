import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import REQUIRED, env_bool, env_float, env_int, env_list, env_str


def test_a_missing_required_variable_names_itself(monkeypatch):
    monkeypatch.delenv("PLATFORM_X", raising=False)
    with pytest.raises(ImproperlyConfigured, match="PLATFORM_X"):
        env_str("PLATFORM_X", REQUIRED)


@pytest.mark.parametrize("read, raw", [
    (lambda: env_bool("PLATFORM_X", True), "maybe"),
    (lambda: env_int("PLATFORM_X", 1), "ten"),
    (lambda: env_int("PLATFORM_X", 1, minimum=0), "-1"),
    (lambda: env_float("PLATFORM_X", 0.5, maximum=0.99), "1"),
])
def test_a_value_that_does_not_parse_fails_loudly(monkeypatch, read, raw):
    monkeypatch.setenv("PLATFORM_X", raw)
    with pytest.raises(ImproperlyConfigured, match="PLATFORM_X"):
        read()


def test_values_parse(monkeypatch):
    monkeypatch.setenv("PLATFORM_B", "off")
    monkeypatch.setenv("PLATFORM_I", "12")
    monkeypatch.setenv("PLATFORM_L", "a, b,,c")
    assert (env_bool("PLATFORM_B", True), env_int("PLATFORM_I", 0), env_list("PLATFORM_L", [])) == (False, 12, ["a", "b", "c"])


def test_production_settings_refuse_to_load_without_their_secrets(monkeypatch):
    import importlib
    import sys

    monkeypatch.delenv("DATABASE_URL", raising=False)
    sys.modules.pop("controlplane.settings.production", None)
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL|CELERY_BROKER_URL"):
        importlib.import_module("controlplane.settings.production")
