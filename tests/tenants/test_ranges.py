"""A policy's RANGES table: the one check every per-organization policy goes through."""

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_policy
from tenants.ranges import PolicyError, check, known_changes, not_a_setting, policy_changed, policy_values, settings_of


@dataclass(frozen=True)
class Sample:
    version: int = not_a_setting(default=0)
    enabled: bool = True
    count: int = 10
    share: float = 0.5
    mode: Literal["fast", "slow"] = "fast"
    weights: dict[Literal["a", "b"], float] = field(default_factory=lambda: {"a": 1.0})
    limit: int | None = None

    RANGES: ClassVar[dict[str, tuple[float, float]]] = {"count": (1, 100), "share": (0, 1), "weights": (-2, 2), "limit": (0, 5)}

    def __post_init__(self) -> None:
        check(self)


def test_the_type_hints_and_the_table_describe_each_setting():
    described = settings_of(Sample)
    assert list(described) == ["enabled", "count", "share", "mode", "weights", "limit"]  # the version is not a setting
    assert (described["count"].kind, described["count"].low, described["count"].high) == (int, 1, 100)
    assert described["mode"].choices == ("fast", "slow") and described["weights"].choices == ("a", "b")
    assert described["limit"].nullable and not described["share"].nullable


@pytest.mark.parametrize("name, value", [
    ("enabled", "yes"), ("count", 0), ("count", 2.5), ("count", True), ("share", 1.5), ("share", float("nan")),
    ("mode", "medium"), ("weights", {"c": 1.0}), ("weights", {"a": 3.0}), ("weights", [1.0]), ("share", None),
])
def test_a_value_out_of_its_kind_or_range_is_named(name, value):
    with pytest.raises(PolicyError) as refused:
        Sample(**{name: value})
    assert set(refused.value.details) == {name} and name in refused.value.message


def test_every_bad_setting_is_named_at_once():
    with pytest.raises(PolicyError) as refused:
        Sample(count=0, share=2, limit=9)
    assert set(refused.value.details) == {"count", "share", "limit"}


def test_a_change_names_unknown_settings_and_keeps_the_rest():
    changed = policy_changed(Sample(), {"count": 20, "limit": 3})
    assert policy_values(changed) == {**policy_values(Sample()), "count": 20, "limit": 3}
    with pytest.raises(PolicyError) as refused:
        known_changes(Sample, {"count": 20, "colour": "red"})
    assert set(refused.value.details) == {"colour"}
    with pytest.raises(Exception, match="object of settings"):
        known_changes(Sample, ["count"])


def test_the_environment_sets_a_deployments_defaults_within_the_table(monkeypatch):
    monkeypatch.setenv("PLATFORM_SAMPLE_COUNT", "42")
    monkeypatch.setenv("PLATFORM_SAMPLE_ENABLED", "off")
    assert env_policy(Sample, count="PLATFORM_SAMPLE_COUNT", enabled="PLATFORM_SAMPLE_ENABLED") == {
        **policy_values(Sample()), "count": 42, "enabled": False}
    for raw in ("0", "many", "2.5"):
        monkeypatch.setenv("PLATFORM_SAMPLE_COUNT", raw)
        with pytest.raises(ImproperlyConfigured, match="PLATFORM_SAMPLE_COUNT"):
            env_policy(Sample, count="PLATFORM_SAMPLE_COUNT")
