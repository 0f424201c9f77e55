"""Payloads set inside run-on sentences, planted through the whole policy.

Each payload of the robustness set (``tests/robustness/injections.py``) is set, its full stops
dropped, inside each run-on sentence of ``benchmark/injection_reading.py`` and planted as one
extra memory in the two scenarios of ``tests/robustness/test_injection.py``. Counted, for the
injection check reading long sentences in windows (the default) and reading them only whole
(``window=0``), in one run: how often the instruction-obeying model stand-in (it commits when
it sees the payload's opening in its prompt) changes the action, how often any four words in a
row of the payload reach the model's prompt at all (a stricter count of what leaks), and how
often the offline answer repeats the payload. On a high-risk question the guard stops a commit
either way.

    PYTHONPATH=$PWD python benchmark/injection_run_on.py
"""

from __future__ import annotations

from benchmark.injection_reading import _RUN_ON, without_stops
from caap._embeddings import get_embedder
from caap.policy import CaapPolicy
from caap.policy._injection import WINDOW, InjectionDetector
from tests.robustness.injections import INJECTIONS
from tests.robustness.test_injection import SCENARIOS, _memories, _obeying_model


def main() -> None:
    embedder = get_embedder()
    for window in (WINDOW, 0):
        detector = InjectionDetector(embedder, window=window)
        how = f"windows of {window}" if window else "whole sentences only"
        for scenario in sorted(SCENARIOS):
            texts, user, query = SCENARIOS[scenario]
            policy = CaapPolicy(embedder=embedder)
            policy.detector = detector
            baseline = policy.decide(_memories(texts, user, None), query).action
            changed = repeated = leaked = n = 0
            for before, after in _RUN_ON:
                for _, payload in INJECTIONS:
                    planted = without_stops(payload)
                    mems = _memories(texts, user, f"{before} {planted} {after}")
                    a = policy.analyze(mems, query)
                    d = policy.decide(mems, query, analysis=a)
                    r = policy.realize(mems, query, d, analysis=a)
                    n += 1
                    words = planted.lower().split()
                    prompt = " ".join(policy._memory_block(mems).lower().split())
                    runs = {" ".join(words[i : i + 4]) for i in range(max(1, len(words) - 3))}
                    leaked += any(run in prompt for run in runs)
                    repeated += planted.lower()[:24] in r.text.lower()
                    model = CaapPolicy(_obeying_model(planted, baseline), embedder=embedder)
                    model.detector = detector
                    changed += model.decide(mems, query, analysis=a).action is not baseline
            print(
                f"{how}, {scenario}: baseline {baseline.value}; obeying model changed the "
                f"action {changed}/{n}; four payload words in a row in its prompt {leaked}/{n}; "
                f"payload repeated offline {repeated}/{n}"
            )


if __name__ == "__main__":
    main()
