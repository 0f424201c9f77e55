"""The user's name written as "you" in answers, and only where it names the user."""

from __future__ import annotations

import pytest

from caap.policy._analysis import second_person


@pytest.mark.parametrize(
    ("clause", "subject", "expected"),
    [
        # a two-token name is one "you", however it is joined
        ("Mei Lin explained the plan.", {"Mei", "Lin"}, "you explained the plan."),
        ("Mei-Lin set the reminder.", {"Mei", "Lin"}, "you set the reminder."),
        ("Mei Lin's lease says two months.", {"Mei", "Lin"}, "your lease says two months."),
        # a plain name still becomes "you", with the verb agreeing
        ("Then Rahul goes home.", {"Rahul"}, "Then you go home."),
        ("Priya and Rahul go.", {"Rahul"}, "Priya and you go."),
        # a lower-case part or an honorific joined by a hyphen is part of the name
        (
            "Foreman Kim told Min-jun the bays were ready.",
            {"Min", "Park"},
            "Foreman Kim told you the bays were ready.",
        ),
        ("The bluefin comes from Tanaka-san.", {"Tanaka"}, "The bluefin comes from you."),
        # the verb agrees across a frequency adverb
        ("Rahul never goes in alone.", {"Rahul"}, "you never go in alone."),
        # the user's own words: object and possessive pronouns too
        (
            "The scooter gets me from my flat to Umeda.",
            set(),
            "The scooter gets you from your flat to Umeda.",
        ),
        ("That bike is mine.", set(), "That bike is yours."),
        # chat writes the pronoun in lower case; "i.e." is not one
        (
            "on solo weeks i basically live on salad kits, i.e. tiny orders",
            set(),
            "on solo weeks you basically live on salad kits, i.e. tiny orders",
        ),
        (
            "i'm hopeless at refilling and i'll forget",
            set(),
            "you're hopeless at refilling and you'll forget",
        ),
    ],
)
def test_the_users_name_becomes_you(clause: str, subject: set[str], expected: str) -> None:
    assert second_person(clause, subject) == expected


@pytest.mark.parametrize(
    ("clause", "subject"),
    [
        # after an article a capitalised word names a place or a thing
        ("The meeting is at the Botanic Garden lecture hall.", {"Garden", "Beatriz"}),
        ("Lunch moved to the Kastella taverna.", {"Kastella"}),
        ("The electrician's licence was issued in Victoria.", {"Victoria"}),
        # part of a longer proper name, before or after
        ("The reminder said to meet at Botanic Garden.", {"Garden"}),
        ("The transfer went through Al Ansari Exchange.", {"Ansari"}),
        ("Rahul Sharma signed the form.", {"Rahul"}),
    ],
)
def test_a_name_that_is_not_the_user_is_left_as_written(clause: str, subject: set[str]) -> None:
    out = second_person(clause, subject)
    assert "you" not in out.lower()
    assert out == clause


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("Her father told her, years ago, about it.", "your father told you, years ago, about it."),
        ("The nurse asked her to fast.", "The nurse asked you to fast."),
        ("The nurse picked her up at six.", "The nurse picked you up at six."),
        ("Her in-laws came over.", "your in-laws came over."),
        ("She lent her car to Sam.", "you lent your car to Sam."),
    ],
)
def test_her_as_an_object_is_you_and_as_a_possessive_your(clause: str, expected: str) -> None:
    assert second_person(clause, set()) == expected


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        # someone else's dose, told in the user's words, stays theirs
        (
            "My mum is on warfarin and she takes 5mg every evening.",
            "your mum is on warfarin and she takes 5mg every evening.",
        ),
        (
            "I paid Declan for the fortnight. He's had the Monday slot since the 8th.",
            "you paid Declan for the fortnight. He's had the Monday slot since the 8th.",
        ),
        # chat's lower-case "i" is the user's own words too
        (
            "i think she's outgrown her ballet shoes",
            "you think she's outgrown her ballet shoes",
        ),
        ("Nadia showed me her bruise.", "Nadia showed you her bruise."),
    ],
)
def test_he_and_she_in_the_users_own_words_are_someone_else(clause: str, expected: str) -> None:
    assert second_person(clause, set()) == expected
