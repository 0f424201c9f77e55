"""Train the learned relation layer; the same as ``caap relations train``.

Shipped weights (blind train split; settings on the blind dev split when present)::

    PYTHONPATH=. python scripts/train_relations.py \\
        --data caap/benchmark/data/blind/train --dev caap/benchmark/data/blind/dev \\
        --out caap/data/relations_learned.npz --seed 0

Never pass the blind test split.
"""

from __future__ import annotations

import sys

from caap.cli import main

if __name__ == "__main__":
    if any("blind/test" in a for a in sys.argv[1:]):
        sys.exit("refusing to train on the blind test split")
    sys.exit(main(["relations", "train", *sys.argv[1:]]))
