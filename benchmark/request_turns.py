"""How the policy reads stored turns that only ask: the sentence-form rules alone against the
rules with the request head, on turns labelled ``states`` or ``asks`` (the blind speech corpus).

    PYTHONPATH=$PWD python benchmark/request_turns.py --data caap/benchmark/data/blind/speech/test
    PYTHONPATH=$PWD python benchmark/request_turns.py --data DIR --weights runs/request_head.npz

Two errors are counted, overall and per style: a ``states`` turn read as stating nothing (a
fact lost) and an ``asks`` turn read as stating something (a question an answer may quote back
as a fact).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def errors(rows: Sequence[dict[str, Any]], said: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per style and ``all``: ``(states turns read as stating nothing, asks turns read as
    stating something)``."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row, s in zip(rows, said, strict=True):
        for key in ("all", row.get("style") or "-"):
            counts = out[key]
            if row["label"] == "states" and not s:
                counts[0] += 1
            if row["label"] == "asks" and s:
                counts[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, action="append", help="a JSONL file or a folder")
    p.add_argument("--weights", help="request head weights (default: the shipped head)")
    args = p.parse_args(argv)
    from caap._embeddings import get_embedder
    from caap.policy._request_head import RequestHead, load_request_rows, stated_text
    from caap.policy._speech import stated_part

    files = [
        f
        for d in args.data
        for f in (sorted(Path(d).glob("*.jsonl")) if Path(d).is_dir() else [Path(d)])
    ]
    try:
        rows = [r for f in files for r in load_request_rows(f)]
    except (OSError, ValueError) as e:
        print(f"request_turns: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("request_turns: no labelled turn found", file=sys.stderr)
        return 2
    texts = [r["text"] for r in rows]
    head = RequestHead(args.weights)
    asks = head.asks(get_embedder().encode(texts), texts)
    readings = {
        "rules": [stated_part(t) for t in texts],
        "rules + head": [
            stated_text(t, float(a), head.threshold) for t, a in zip(texts, asks, strict=True)
        ],
    }
    n_states = sum(r["label"] == "states" for r in rows)
    print(f"{len(rows)} turns: {n_states} states, {len(rows) - n_states} asks")
    styles = sorted({r.get("style") or "-" for r in rows})
    for name, said in readings.items():
        e = errors(rows, said)
        per = ", ".join(f"{s} {e.get(s, (0, 0))[0]}/{e.get(s, (0, 0))[1]}" for s in styles)
        print(
            f"{name}: states read as stating nothing {e['all'][0]}, asks read as stating "
            f"{e['all'][1]} (per style, lost/kept: {per})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
