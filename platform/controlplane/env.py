"""Read settings from the environment, failing loudly on values that do not parse.

A typo in production configuration must stop the process at start-up with the variable's
name in the message, not surface hours later as a strange default.
"""

import json
import os

from django.core.exceptions import ImproperlyConfigured

from tenants.ranges import policy_values, settings_of

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
REQUIRED = object()


def env_str(name: str, default=REQUIRED) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is REQUIRED:
            raise ImproperlyConfigured(f"Set the environment variable {name}.")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false).")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum, maximum)


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum)


def _env_number(name: str, default, parse, kind: str, minimum, maximum):
    value = os.environ.get(name, "").strip()
    if value == "":
        return default
    try:
        number = parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not {kind}.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below its minimum of {minimum}.")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above its maximum of {maximum}.")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "").strip()
    if value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_json_object(name: str, default: dict) -> dict:
    value = os.environ.get(name, "").strip()
    if value == "":
        return default
    try:
        parsed = json.loads(value)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, not {type(parsed).__name__}.")
    return parsed


def env_policy(policy_class: type, **variables: str) -> dict:
    """Every setting of a per-organization policy (tenants.ranges) as this deployment's default:
    the policy's own, or the value of the environment variable named for it, held to the
    policy's RANGES table."""
    known, values = settings_of(policy_class), {}
    for name, variable in variables.items():
        raw = os.environ.get(variable, "").strip()
        if raw == "":
            continue
        setting = known[name]
        try:
            value = env_bool(variable, False) if setting.kind is bool else setting.kind(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{variable}={raw!r} is not {'a whole number' if setting.kind is int else 'a number'}.") from None
        if (problem := setting.problem(value)) is not None:
            raise ImproperlyConfigured(f"{variable}={raw!r}: {problem}")
        values[name] = value
    return policy_values(policy_class(**values))
