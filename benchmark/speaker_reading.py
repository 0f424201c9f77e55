"""Who is speaking: the guard's first-hand reading with and without the speaker head.

The guard lets a high-stakes commit rest only on first-hand claims (the user's own account or a
record). This measures, on the frozen test file of the blind speaker corpus
(``caap/benchmark/data/blind/speakers``: memories labelled ``user`` / ``person`` / ``record`` /
``hearsay`` by a writer who read no code), how many first-hand memories the ``learned`` layer
clears (attribution below one half) and how many other people's accounts or hearsay it wrongly
clears: without the speaker head (the cues and the facet model) and with the shipped one
(``caap/data/speaker_head.npz``, fitted on ``train.jsonl``, chosen on ``dev.jsonl`` by
``caap relations train-speaker``).

    PYTHONPATH=$PWD python benchmark/speaker_reading.py [--split test|dev|train]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from caap.conflict_graph._relations_learned import LearnedRelations
from caap.conflict_graph._speaker import FIRST_HAND, SPEAKERS, load_speaker_rows

DATA = Path("caap/benchmark/data/blind/speakers")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test", choices=("test", "dev", "train"))
    args = ap.parse_args()
    rows = load_speaker_rows(DATA / f"{args.split}.jsonl")
    texts = [r["text"] for r in rows]
    first = np.array([r["speaker"] in FIRST_HAND for r in rows])
    layer = LearnedRelations()
    head = layer.speaker
    assert head is not None, "no speaker head shipped"
    with_head = np.array([f.source_confidence < 0.5 for f in layer.facets(texts)])
    layer.speaker = None
    without = np.array([f.source_confidence < 0.5 for f in layer.facets(texts)])
    probs = head.probabilities(layer.embedder.encode(texts))
    labels = np.array([SPEAKERS.index(r["speaker"]) for r in rows])
    print(f"{len(rows)} {args.split} memories: {int(first.sum())} first-hand (user or record)")
    for name, cleared in (("without the speaker head", without), ("with it", with_head)):
        print(
            f"learned layer {name}: first-hand cleared {int((cleared & first).sum())}/"
            f"{int(first.sum())}, others' accounts wrongly cleared "
            f"{int((cleared & ~first).sum())}/{int((~first).sum())}"
        )
    print(f"speaker head four-way accuracy: {float((probs.argmax(axis=1) == labels).mean()):.2f}")


if __name__ == "__main__":
    main()
