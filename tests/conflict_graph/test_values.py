"""Values read into one form: the surface signal that two memories state the same value."""

from __future__ import annotations

import pytest

from caap.conflict_graph._values import values


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The tenancy agreement sets my share at £475.00 a month.", "four seventy-five each"),
        ("Pickup is 14:45.", "quarter to three at the gate"),
        ("Pickup is 2:45 pm.", "dismissal at 14.45"),
        ("Fees are due by 10 Jan.", "the tenth of January"),
        ("two and a half milligrams", "2.5 mg once a day"),
        ("four hundred and seventy-five pounds", "£475"),
        ("every other Friday at 6 pm", "Fridays, 18:00"),
        ("one thousand two hundred euros", "1,200 EUR"),
    ],
)
def test_one_value_written_two_ways_reads_the_same(a: str, b: str) -> None:
    assert values(a) & values(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The tenancy agreement sets my share at £475 a month.", "four ninety-five each"),
        ("Pickup is 14:45.", "half past three at the gate"),
        ("5 mg each morning", "ten milligrams each morning"),
        ("1.5 litres a day", "1500 ml a day"),  # units are not converted
    ],
)
def test_different_values_share_none(a: str, b: str) -> None:
    assert values(a) and values(b)
    assert not values(a) & values(b)


def test_clock_times_never_equal_plain_numbers_and_dates_are_not_values() -> None:
    assert values("at 3:00") == {"t3:00"}
    assert "3" not in values("at 3:00")
    # An ISO date says when something was said, not what was stated.
    assert values("2024-09-01: the van is 4 m tall") == {"4"}
    assert values("I went there with someone") == frozenset()
