"""The demo loop's figures: rates with Wilson intervals, and the table it prints."""

import pytest

from demo.loop import format_rates
from demo.traffic import OrgTraffic, wilson_interval


@pytest.mark.parametrize(("successes", "trials", "low", "high"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (14, 400, 0.0210, 0.0578),
])
def test_wilson_intervals_match_the_textbook_values(successes, trials, low, high):
    assert wilson_interval(successes, trials) == pytest.approx((low, high), abs=5e-4)


def test_no_trials_says_nothing_about_the_rate():
    assert wilson_interval(0, 0) == (0.0, 1.0)


def traffic(persisted: int, served: int) -> OrgTraffic:
    return OrgTraffic(org="acme", persona="typed_snake", served=served, by_model={"demo-base": served},
                      events={"edit_persisted": persisted}, failures={}, latencies_ms=[], tasks=0, task_outcomes=[])


def test_the_table_has_a_row_per_organization_and_a_column_per_round():
    table = format_rates(["base model", "cycle 1"], {"acme": [traffic(14, 400), traffic(60, 400)]})
    header, row = table.splitlines()[1:]
    assert header.split() == ["organization", "base", "model", "cycle", "1"]
    assert row.split() == ["acme", "0.035", "[0.021,", "0.058]", "0.150", "[0.118,", "0.188]"]
