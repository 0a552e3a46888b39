"""RANGES tables: every per-organization policy is a frozen dataclass of settings with one.

A setting's type hint says what kind of value it takes (bool; int, a whole number; float; a
`Literal` of choices; a dict from a `Literal`'s keys to numbers; `| None` where it may be
unset); `RANGES` says how far each number may go, and `HELP` (optional) what each setting does, in
words for people. `check(policy)`, called by each policy's
`__post_init__`, refuses anything else and names every bad setting, so no policy object holds
a value the platform cannot honour. The same table bounds the deployment's defaults from the
environment (`controlplane.env.env_policy`), shapes the OpenAPI schema
(`tenants.api.serializers.policy_serializer`) and the console's forms (`console.forms`).

Django-free, so that settings modules can import the policies they bound.
"""

import math
import types
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from tenants.errors import InvalidInput

Policy = TypeVar("Policy")


class PolicyError(InvalidInput):
    """Settings a policy cannot take: `details` maps each to what it may be."""

    def __init__(self, problems: dict[str, str]):
        super().__init__(" ".join(problems.values()), details=problems)


@dataclass(frozen=True)
class Setting:
    """One setting of a policy class, as its type hint and RANGES entry describe it."""

    name: str
    kind: type  # bool, int, float, str (choices) or dict (choices -> numbers)
    choices: tuple[str, ...] = ()  # a str's values, or a dict's keys
    low: float | None = None  # a number's bounds, or a dict's values'
    high: float | None = None
    nullable: bool = False
    help: str = ""  # what it does, for people: the policy's HELP entry

    def problem(self, value) -> str | None:
        """What is wrong with `value` for this setting, or None when it may take it."""
        if value is None:
            return None if self.nullable else f"{self.name} must be set."
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{self.name} must be true or false, not {value!r}."
        if self.kind is str:
            return None if value in self.choices else f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}."
        if self.kind is dict:
            if not isinstance(value, dict):
                return f"{self.name} must be an object of {', '.join(self.choices)}."
            for key, number in value.items():
                if key not in self.choices:
                    return f"{self.name}: {key!r} is not one of {', '.join(self.choices)}."
                if not self._number_within(number, float):
                    return f"{self.name}.{key} must be a number from {self.low:g} to {self.high:g}, not {number!r}."
            return None
        if not self._number_within(value, self.kind):
            what = "a whole number" if self.kind is int else "a number"
            return f"{self.name} must be {what} from {self.low:g} to {self.high:g}, not {value!r}."
        return None

    def _number_within(self, value, kind: type) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)):
            return False
        # an int is compared as it is: math.isfinite would overflow on one past a float's range
        return (isinstance(value, int) or math.isfinite(value)) and self.low <= value <= self.high


def not_a_setting(**kwargs):
    """A field that describes a policy (its version, who set it) rather than being one of its settings."""
    return field(metadata={"setting": False}, **kwargs)


@cache
def settings_of(policy_class: type) -> dict[str, Setting]:
    """Each setting of the class by name; read once per class, since every policy built (each
    gate run, each canary verdict) checks its values."""
    hints, help_texts = get_type_hints(policy_class), getattr(policy_class, "HELP", {})
    return {f.name: _setting(f.name, hints[f.name], policy_class.RANGES.get(f.name), help_texts.get(f.name, ""))
            for f in fields(policy_class) if f.metadata.get("setting", True)}


def _setting(name: str, hint, bounds: tuple[float, float] | None, help_text: str) -> Setting:
    args = get_args(hint)
    nullable = get_origin(hint) in (Union, types.UnionType) and type(None) in args
    if nullable:
        (hint,) = [arg for arg in args if arg is not type(None)]
    low, high = bounds or (None, None)
    if get_origin(hint) is Literal:
        return Setting(name, str, choices=get_args(hint), nullable=nullable, help=help_text)
    if get_origin(hint) is dict:
        keys, _ = get_args(hint)
        return Setting(name, dict, choices=get_args(keys), low=low, high=high, nullable=nullable, help=help_text)
    if hint in (int, float) and bounds is None:
        raise TypeError(f"{name}: a number needs its RANGES entry")
    return Setting(name, hint, low=low, high=high, nullable=nullable, help=help_text)


def check(policy) -> None:
    """Raise PolicyError naming every setting whose value the policy cannot take."""
    problems = {name: problem for name, setting in settings_of(type(policy)).items()
                if (problem := setting.problem(getattr(policy, name))) is not None}
    if problems:
        raise PolicyError(problems)


def known_changes(policy_class: type, changes) -> dict:
    """`changes` when it is an object of the class's settings; else InvalidInput, or PolicyError
    naming each unknown setting."""
    if not isinstance(changes, dict):
        raise InvalidInput("The body must be an object of settings.")
    known = settings_of(policy_class)
    unknown = sorted(set(changes) - set(known))
    if unknown:
        raise PolicyError({name: f"Unknown setting {name!r} (known: {', '.join(known)})." for name in unknown})
    return changes


def policy_changed(policy: Policy, changes) -> Policy:
    """The policy with `changes` (an object of settings) over it, or PolicyError naming each
    unknown or bad setting."""
    return replace(policy, **known_changes(type(policy), changes))


def policy_values(policy) -> dict:
    """The policy's settings by name, as stored and audited."""
    return {name: getattr(policy, name) for name in settings_of(type(policy))}
