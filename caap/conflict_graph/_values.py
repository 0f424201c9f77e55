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

This is the grammar of English numerals and clock readings, not a list of any text's wording;
units are not converted (``1.5 litres`` and ``1500 ml`` share no value). The output feeds
surface features that a trained model weighs; nothing decides on it alone.
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
        if 1 <= a <= 12 and a == int(a) and 10 <= b <= 99 and b == int(b):
            out.append(a * 100 + b)
            t = _clock(int(a), int(b)) if b < 60 else None
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
    nxt = re.match(r"\s*([a-z]+|\d{1,2})\b", rest)
    if minutes is None or nxt is None:
        return None
    hw = nxt.group(1)
    h = int(hw) if hw.isdigit() else CARDINALS.get(hw)
    if h is None or not 1 <= h <= 12:
        return None
    return _clock((h - 1) % 12 or 12, 60 - minutes) if word == "to" else _clock(h, minutes)


@functools.lru_cache(maxsize=65536)
def values(text: str) -> frozenset[str]:
    """The values ``text`` states, each in one canonical form (see the module doc); cached,
    since a memory is compared with many others."""
    out: set[str] = set()
    low = text.lower()
    run: list[str] = []
    prev = ""

    def flush() -> None:
        if any(w not in ("and", "a") for w in run):
            nums, times = _read_words(run)
            out.update(_fmt(n) for n in nums)
            out.update(times)
        run.clear()

    for m in _TOKEN.finditer(low):
        kind = m.lastgroup
        if kind != "word":
            flush()
            prev = ""
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
        elif kind == "ampm":
            h = int(re.findall(r"\d+", m.group("ampm"))[0])
            out.add(_fmt(h))
            if (t := _clock(h, 0)) is not None:
                out.add(t)
        elif kind == "num":
            if (d := _digits(m.group("num"))) is not None:
                out.add(_fmt(d))
        elif kind == "word":
            w = m.group("word")
            if w in _NUMBER_WORDS or (run and w in ("and", "a", "half")):
                run.append(w)
            else:
                flush()
                if w in ("noon", "midday", "midnight"):
                    out.add("t0:00")
                elif w == "dozen":
                    out.add("12")
            if w in ("to", "past") and (t := _spoken_clock(prev, w, low[m.end() :])):
                out.add(t)
            prev = w
    flush()
    return frozenset(out)
