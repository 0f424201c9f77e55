"""Values written in a canonical form, whatever way the text writes them.

Two memories state one value in different forms all the time: ``£475.00`` and "four
seventy-five", ``14:45`` and "quarter to three", "the tenth" and ``10 Jan``, ``5 mg`` and
"five-milligram". The relation models compare the *values* two texts carry (do they share
one? state the same ones? none in common?), so the values are read here into one form:

* numbers in digits (``475``, ``475.00``, ``0,5``) and in English number words ("four hundred
  and seventy-five", "two and a half", "a dozen"), ordinals included ("tenth", ``10th``);
* a word number followed by a tens word ("four seventy-five", "one-eighty") is also read as
  the spoken form of a three-digit value (475, 180) and of a clock time (4:75 is not one, 2:45
  is), since speech writes prices and times that way;
* clock times on a 12-hour dial (``14:45``, "2.45pm", "quarter to three", "half past six",
  "6 pm", "noon"), written ``t2:45`` so they never equal a plain number; ``14.45`` with no
  clock mark is read both as a time and as an amount.

* an hour said as a time ("at seven", "seven o'clock", "nine in the evening", British "half
  five" for 5:30, "twenty-to-eight") is also read as the clock time it names, beside the plain
  number;
* a word number followed by a tens word also covers four digits ("fourteen fifty", 1450);
* an amount with a metric unit of mass, volume or length (``0.15 mg``, "150 micrograms",
  ``1.5 litres``, ``1500 ml``) is also read as that quantity in the base unit (``q0.00015g``,
  ``q1.5l``), beside the plain number, so a prefix change does not read as another value.

This is the grammar of English numerals and clock readings and of the metric prefixes, not a
list of any text's wording; units of different systems (psi and bar, miles and kilometres) are
not converted, since their conversions round. The output feeds surface features that a trained
model weighs; nothing decides on it alone.
"""

from __future__ import annotations

import functools
import itertools
import re

__all__ = ["CARDINALS", "values"]

#: Cardinal number words below twenty.
CARDINALS = {
    "zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
    "fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
    "nineteenth": 19, "twentieth": 20, "thirtieth": 30,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORDS = set(CARDINALS) | set(_TENS) | set(_ORDINALS) | set(_SCALES)

_TOKEN = re.compile(
    r"(?P<date>\b\d{4}-\d{1,2}-\d{1,2}\b)"
    r"|(?P<clock>\b\d{1,2}[:.h]\d{2}(?!\d)\s*(?:[ap]\.?m\b\.?)?)"
    r"|(?P<ampm>\b\d{1,2}\s*[ap]\.?m\b\.?)"
    r"|(?P<num>\d+(?:[.,]\d+)*)(?:st|nd|rd|th)?"
    r"|(?P<word>[a-z]+)",
    re.I,
)


def _fmt(x: float) -> str:
    return f"{x:g}"


def _clock(h: int, m: int) -> str | None:
    if not (0 <= h <= 24 and 0 <= m < 60):
        return None
    return f"t{h % 12}:{m:02d}"


def _digits(tok: str) -> float | None:
    """``475``, ``475.00``, ``1,500`` (thousands), ``0,5`` (decimal comma)."""
    if "," in tok and "." not in tok:
        head, _, tail = tok.rpartition(",")
        tok = tok.replace(",", "") if len(tail) == 3 and head else tok.replace(",", ".")
    else:
        tok = tok.replace(",", "")
    try:
        return float(tok)
    except ValueError:
        return None


def _read_words(words: list[str]) -> tuple[list[float], list[str]]:
    """Values of one run of number words, and clock times it may speak.

    ``["four", "hundred", "and", "seventy", "five"]`` -> 475; ``["four", "seventy",
    "five"]`` -> 4, 75 and the spoken 475 (and no time: 75 is not minutes);
    ``["two", "forty", "five"]`` -> 2, 45, 245 and ``t2:45``.
    """
    # Split into cardinal groups: a new group starts where a unit follows a unit / tens.
    groups: list[float] = []
    total, current, last = 0.0, 0.0, ""
    fraction = 0.0
    for w in words:
        if w in ("and", "a"):
            continue
        if w in CARDINALS or (w in _ORDINALS and _ORDINALS[w] < 20):
            v = CARDINALS.get(w, _ORDINALS.get(w, 0))
            if last in ("unit", "tens_unit") or (last == "tens" and v >= 10):
                groups.append(total + current)
                total, current = 0.0, 0.0
            current += v
            last = "tens_unit" if last == "tens" else "unit"
        elif w in _TENS or w in _ORDINALS:
            v = _TENS.get(w, _ORDINALS.get(w, 0))
            if last in ("tens", "tens_unit") or (last == "unit" and current >= 1):
                groups.append(total + current)
                total, current = 0.0, 0.0
            current += v
            last = "tens"
        elif w in _SCALES:
            scale = _SCALES[w]
            current = (current or 1) * scale
            if scale > 100:
                total, current = total + current, 0.0
            last = "scale"
        elif w == "half" and (last in ("unit", "tens", "tens_unit", "scale")):
            fraction = 0.5
    groups.append(total + current + fraction)
    out = list(groups)
    times: list[str] = []
    # The spoken form: "four seventy-five" (475), "one-eighty" (180), "two forty-five" (2:45).
    for a, b in itertools.pairwise(groups):
        if 1 <= a <= 99 and a == int(a) and 10 <= b <= 99 and b == int(b):
            out.append(a * 100 + b)
            t = _clock(int(a), int(b)) if b < 60 and a <= 12 else None
            if t:
                times.append(t)
    return out, times


def _spoken_clock(prev: str, word: str, rest: str) -> str | None:
    """ "quarter to three", "half past six", "twenty past four": ``prev`` the word before
    ``word`` (``to`` / ``past``), ``rest`` the text after it."""
    minutes = {"quarter": 15, "half": 30}.get(prev)
    if minutes is None and prev in _NUMBER_WORDS:
        nums, _ = _read_words([prev])
        minutes = int(nums[0]) if nums and 0 < nums[0] < 60 else None
    nxt = re.match(r"[\s-]*([a-z]+|\d{1,2})\b", rest)
    if minutes is None or nxt is None:
        return None
    hw = nxt.group(1)
    h = int(hw) if hw.isdigit() else CARDINALS.get(hw)
    if h is None or not 1 <= h <= 12:
        return None
    return _clock((h - 1) % 12 or 12, 60 - minutes) if word == "to" else _clock(h, minutes)


#: Metric units of mass (grams), volume (litres) and length (metres), each as (dimension,
#: factor to the base unit).
_UNITS = {
    "mg": ("g", 1e-3), "milligram": ("g", 1e-3), "milligrams": ("g", 1e-3),
    "mcg": ("g", 1e-6), "µg": ("g", 1e-6), "ug": ("g", 1e-6), "microgram": ("g", 1e-6),
    "micrograms": ("g", 1e-6), "g": ("g", 1.0), "gram": ("g", 1.0), "grams": ("g", 1.0),
    "kg": ("g", 1e3), "kilo": ("g", 1e3), "kilos": ("g", 1e3), "kilogram": ("g", 1e3),
    "kilograms": ("g", 1e3),
    "ml": ("l", 1e-3), "millilitre": ("l", 1e-3), "millilitres": ("l", 1e-3),
    "milliliter": ("l", 1e-3), "milliliters": ("l", 1e-3), "cl": ("l", 1e-2),
    "l": ("l", 1.0), "litre": ("l", 1.0), "litres": ("l", 1.0), "liter": ("l", 1.0),
    "liters": ("l", 1.0),
    "mm": ("m", 1e-3), "millimetre": ("m", 1e-3), "millimetres": ("m", 1e-3),
    "millimeter": ("m", 1e-3), "millimeters": ("m", 1e-3), "cm": ("m", 1e-2),
    "centimetre": ("m", 1e-2), "centimetres": ("m", 1e-2), "centimeter": ("m", 1e-2),
    "centimeters": ("m", 1e-2), "m": ("m", 1.0), "metre": ("m", 1.0), "metres": ("m", 1.0),
    "meter": ("m", 1.0), "meters": ("m", 1.0), "km": ("m", 1e3), "kilometre": ("m", 1e3),
    "kilometres": ("m", 1e3), "kilometer": ("m", 1e3), "kilometers": ("m", 1e3),
}  # fmt: skip
_UNIT_AFTER = re.compile(r"\s*-?\s*(µg|[a-z]+)\b")
#: An hour number is read as a clock time after one of these words or before one of the
#: phrases that follow.
_HOUR_BEFORE = frozenset({"at", "by", "around", "until", "till", "from"})
_HOUR_AFTER = re.compile(
    r"\s*(?:o'?clock\b|o’clock\b|in the (?:morning|afternoon|evening)\b|at night\b|tonight\b)"
)


def _quantity(value: float, rest: str) -> str | None:
    """``value`` in its metric base unit when ``rest`` (the text after it) starts with a
    metric unit: ``q0.00015g`` for 0.15 mg."""
    m = _UNIT_AFTER.match(rest)
    unit = _UNITS.get(m.group(1)) if m else None
    if unit is None:
        return None
    dim, factor = unit
    return f"q{value * factor:.6g}{dim}"


def _hour(value: float, before: str, rest: str) -> str | None:
    """The clock time an hour number names when the words around it say it is one ("at
    seven", "seven o'clock", "nine in the evening"); ``before`` is the word before it."""
    if value != int(value) or not 1 <= value <= 12:
        return None
    if before in _HOUR_BEFORE or _HOUR_AFTER.match(rest):
        return _clock(int(value), 0)
    return None


@functools.lru_cache(maxsize=65536)
def values(text: str) -> frozenset[str]:
    """The values ``text`` states, each in one canonical form (see the module doc); cached,
    since a memory is compared with many others."""
    out: set[str] = set()
    low = text.lower()
    run: list[str] = []
    prev = ""
    run_before = ""  # the word before the current run of number words
    run_end = 0

    def flush() -> None:
        if any(w not in ("and", "a") for w in run):
            nums, times = _read_words(run)
            out.update(_fmt(n) for n in nums)
            out.update(times)
            rest = low[run_end:]
            last = nums[-1]
            if (q := _quantity(last, rest)) is not None:
                out.add(q)
            if len(nums) == 1:
                if run_before == "half" and (t := _clock(int(last), 30)) and last == int(last):
                    out.add(t)  # British "half five": 5:30
                elif (t := _hour(last, run_before, rest)) is not None:
                    out.add(t)
        run.clear()

    for m in _TOKEN.finditer(low):
        kind = m.lastgroup
        if kind != "word":
            flush()
        if kind == "clock":
            raw = m.group("clock").strip()
            h, mm = re.split(r"[:.h]", re.sub(r"\s*[ap]\.?m\.?$", "", raw))[:2]
            t = _clock(int(h), int(mm))
            if t and (":" in raw or "h" in raw or raw.endswith(("m", "m."))):
                out.add(t)
            else:  # "14.45" may be a time or an amount, "4.00" too: read it as both
                if t:
                    out.add(t)
                if (d := _digits(raw)) is not None:
                    out.add(_fmt(d))
                    if (q := _quantity(d, low[m.end() :])) is not None:
                        out.add(q)
        elif kind == "ampm":
            h = int(re.findall(r"\d+", m.group("ampm"))[0])
            out.add(_fmt(h))
            if (t := _clock(h, 0)) is not None:
                out.add(t)
        elif kind == "num":
            if (d := _digits(m.group("num"))) is not None:
                out.add(_fmt(d))
                rest = low[m.end() :]
                if (q := _quantity(d, rest)) is not None:
                    out.add(q)
                if (t := _hour(d, prev, rest)) is not None:
                    out.add(t)
        elif kind == "word":
            w = m.group("word")
            if w in _NUMBER_WORDS or (run and w in ("and", "a", "half")):
                if not run:
                    run_before = prev
                run.append(w)
                run_end = m.end()
            else:
                flush()
                if w in ("noon", "midday", "midnight"):
                    out.add("t0:00")
                elif w == "dozen":
                    out.add("12")
            if w in ("to", "past") and (t := _spoken_clock(prev, w, low[m.end() :])):
                out.add(t)
        prev = m.group("word") if kind == "word" else ""
    flush()
    return frozenset(out)
