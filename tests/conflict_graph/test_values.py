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
        # Spoken four-digit amounts, and a spoken amount after thousands.
        ("the deposit was £1,380", "thirteen eighty, it's all protected"),
        ("rent is $2,350 a month", "twenty-three fifty, same as before"),
        ("rent is $2,350 a month", "rent stays two thousand three fifty for 2026"),
        # Continental and spaced grouping of thousands, with a decimal comma.
        ("child support of 1200 zł a month", "incoming 1.200,00 PLN"),
        ("child support of 1 200 zł a month", "1200 PLN monthly"),
        ("salary 2,150.00 EUR", "salario base 2.150,00 €"),
        # A half after digits; an hour on the dial said in words.
        ("one and a half tablets", "1 and a half tabs"),
        ("the race starts at 09:00", "nine o'clock gun"),
        ("standup is at 09:30", "half nine sharp, every workday"),
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
        ("the deposit was £1,380", "thirteen ninety"),
        ("child support of 1 200 zł", "1.000,00 PLN"),
        ("standup is at 09:30", "half ten sharp"),
        ("the race starts at 09:00", "ten o'clock start"),
        ("0.005% drops", "5 drops"),  # a leading zero is a decimal, not a thousands group
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


def test_grouped_digits_keep_their_separate_reading() -> None:
    # "2 500 mg tablets" is two tablets of 500 mg as often as 2,500: both readings stay.
    assert {"2", "500", "2500"} <= values("take 2 500 mg tablets")
    # "half a tablet" and "half 5 mg" are amounts, not the half hour before an hour.
    assert values("half a tablet") == frozenset()
    assert not any(v.startswith("t") for v in values("I take half 5 mg"))
