"""Argument types for the command lines: a bad number stops at parse time with one line that
says what was expected, before any model is loaded."""

from __future__ import annotations

import argparse

__all__ = ["fraction", "non_negative", "positive", "positive_float"]


def non_negative(text: str) -> int:
    """An integer ``>= 0``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def positive(text: str) -> int:
    """An integer ``>= 1``."""
    value = non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number ``> 0``."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def fraction(text: str) -> float:
    """A number in ``(0, 1]``."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value}")
    return value
