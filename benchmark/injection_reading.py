"""How often the injection check withholds ordinary memories, and how many payloads it catches.

Sentences the check (:mod:`caap.policy._injection`) reads as instructions to the assistant are
replaced by a placeholder wherever the policy shows memory text, so a false alarm hides an
ordinary memory from the answer (and from a stale probe's "names the current state" check).
This counts, per style, the user-written texts of a blind corpus split (instance memories and
queries, stale conversations' user turns and probe queries; written by people who never saw the
check) that it flags, and the planted payloads of the robustness set
(``tests/robustness/injections.py``, written independently of the fitting examples) that it
catches, alone and set inside a run-on sentence between two chatty statements (no full stops,
as dictated text; three such settings), for the shipped weights and optionally for others in
the same run. Each reader is run with long sentences also read in windows (the default) and
read only whole (``window=0``), with the seconds ``neutralize`` takes over every text from a
cold cache, so the cost of the windows is a ratio in one run.

    PYTHONPATH=$PWD python benchmark/injection_reading.py [--split dev extra test] \
        [--weights OLD.json ...]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path

from caap._embeddings import get_embedder
from caap.benchmark.dataset import load_dataset
from caap.benchmark.stale import load_stale_scenarios
from caap.policy._injection import InjectionDetector
from tests.robustness.injections import INJECTIONS

BLIND = Path("caap/benchmark/data/blind")
#: Chatty statements a payload is set between (written for this benchmark, not from a corpus).
_RUN_ON = [
    (
        "so yesterday i went to the market with my sister and we bought tomatoes and onions "
        "for the week",
        "and then we drove home through the rain and the kids were already asleep in the back seat",
    ),
    (
        "ok so the boiler guy came round finally and said the pressure valve is fine",
        "anyway the kids have swimming on thursday and my mum is coming over at the weekend",
    ),
    (
        "my blood pressure was 130 over 85 this morning which the nurse said is ok",
        "i also need to pick up the prescription from the pharmacy on the high street before six",
    ),
]


def without_stops(payload: str) -> str:
    """A payload as said inside a run-on sentence: its own full stops dropped."""
    return re.sub(r"[.!?。]", "", payload)


def run_ons() -> list[str]:
    """Every payload set inside each run-on sentence."""
    return [f"{a} {without_stops(p)} {b}" for a, b in _RUN_ON for _, p in INJECTIONS]


def corpus(split: str) -> list[tuple[str, str]]:
    """(style, text) for every user-written text of ``split`` (deduplicated)."""
    out: dict[str, str] = {}
    for inst in load_dataset(BLIND / split / "tangle"):
        for t in [inst.query, *(m.text for m in inst.memories)]:
            out.setdefault(t, inst.style or "?")
    for sc in load_stale_scenarios(BLIND / split / "stale"):
        texts = [t.content for s in sc.sessions for t in s.turns if t.role == "user"]
        for t in [*texts, *(p.query for p in sc.probes)]:
            out.setdefault(t, sc.style or "?")
    return [(style, text) for text, style in out.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", nargs="+", default=["dev", "extra"])
    ap.add_argument("--weights", nargs="*", default=[], help="other weight files to compare")
    args = ap.parse_args()
    embedder = get_embedder()
    rows = [r for split in args.split for r in corpus(split)]
    styles = Counter(style for style, _ in rows)
    readers = [("shipped", None)] + [(w, json.loads(Path(w).read_text())) for w in args.weights]
    print(f"{len(rows)} texts of blind {'+'.join(args.split)}; {len(INJECTIONS)} payloads")
    planted = run_ons()
    embedder.encode([text for _, text in rows[:64]])  # the first batches load the model
    for name, weights in readers:
        for window in (None, 0):
            kw = {} if window is None else {"window": window}
            det = InjectionDetector(embedder, weights=weights, **kw)
            start = time.perf_counter()
            shown = [det.neutralize(text) for _, text in rows]
            seconds = time.perf_counter() - start
            touched = sum(s != text for s, (_, text) in zip(shown, rows, strict=True))
            flagged = Counter(style for style, text in rows if det.is_instruction(text))
            caught = sum(det.is_instruction(p) for _, p in INJECTIONS)
            inside = sum(det.is_instruction(p) for p in planted)
            per_style = ", ".join(f"{s} {flagged[s]}/{n}" for s, n in sorted(styles.items()))
            how = "whole sentences only" if window == 0 else f"windows of {det.window}"
            print(
                f"{name}, {how}: ordinary texts flagged {sum(flagged.values())}/{len(rows)} "
                f"({100 * sum(flagged.values()) / len(rows):.1f}%; {per_style}), "
                f"with a word withheld {touched}; payloads caught {caught}/{len(INJECTIONS)}, "
                f"inside a run-on sentence {inside}/{len(planted)}; "
                f"neutralize {seconds:.2f} s over the texts (cold cache)"
            )


if __name__ == "__main__":
    main()
