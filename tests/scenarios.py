"""Shared memory sets used by several tests (written for these tests)."""

DRINKING = [
    "Ethan has a couple of beers on Friday nights when he has nothing scheduled the next day.",
    "Ethan skips alcohol entirely when he has an early shift the following morning.",
    "Ethan limits himself to one glass of wine when the next day only has afternoon meetings.",
    "Ethan drinks heavily at weddings when he has taken the next day off.",
]
BUDGET = [
    "In January 2025 Ethan logged every expense in a detailed spreadsheet for three weeks.",
    "In February 2025 Ethan stopped the spreadsheet and only checked his weekly bank balance.",
    "In April 2025 Ethan went back to logging every purchase in his spreadsheet for two weeks.",
]
MEDICATION = [
    "Maya's clinic record lists ibuprofen as contraindicated for her.",
    "Maya's father says the pediatrician approved ibuprofen for her fevers last year.",
]
UNRELATED = [
    "Ethan plays bass guitar in a band on Sunday afternoons.",
    "Ethan's favourite film is an old samurai movie.",
]
