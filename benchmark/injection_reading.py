"""How often the injection check withholds ordinary memories, and how many payloads it catches.

Sentences the check (:mod:`caap.policy._injection`) reads as instructions to the assistant are
replaced by a placeholder wherever the policy shows memory text, so a false alarm hides an
ordinary memory from the answer (and from a stale probe's "names the current state" check).
This counts, per style, the user-written texts of a blind corpus split (instance memories and
queries, stale conversations' user turns and probe queries; written by people who never saw the
check) that it flags, and the planted payloads of the robustness set
(``tests/robustness/injections.py``, written independently of the fitting examples) that it
catches, for the shipped weights and optionally for others in the same run.

    PYTHONPATH=$PWD python benchmark/injection_reading.py [--split dev extra test] \
        [--weights OLD.json ...]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from caap._embeddings import get_embedder
from caap.benchmark.dataset import load_dataset
from caap.benchmark.stale import load_stale_scenarios
from caap.policy._injection import InjectionDetector
from tests.robustness.injections import INJECTIONS

BLIND = Path("caap/benchmark/data/blind")


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
    for name, weights in readers:
        det = InjectionDetector(embedder, weights=weights)
        flagged = Counter(style for style, text in rows if det.is_instruction(text))
        caught = sum(det.is_instruction(p) for _, p in INJECTIONS)
        per_style = ", ".join(f"{s} {flagged[s]}/{n}" for s, n in sorted(styles.items()))
        print(
            f"{name}: ordinary texts flagged {sum(flagged.values())}/{len(rows)} "
            f"({100 * sum(flagged.values()) / len(rows):.1f}%; {per_style}); "
            f"payloads caught {caught}/{len(INJECTIONS)}"
        )


if __name__ == "__main__":
    main()
