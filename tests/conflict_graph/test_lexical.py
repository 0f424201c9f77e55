"""Word overlap for budgeted recall: terms and TF-IDF rows over a pool of texts."""

from __future__ import annotations

import numpy as np

from caap.conflict_graph._lexical import STOP_WORDS, terms, tfidf


def test_terms_lower_case_drop_stop_words_and_meet_across_suffixes() -> None:
    got = terms("I was Drinking with the Walkers, and she drinks tea daily!")
    assert "was" in STOP_WORDS and "was" not in got and "the" not in got
    assert got == ("drink", "walker", "drink", "tea", "daily")
    assert terms("charts") == terms("chart") == ("chart",)
    # Short words and punctuation are not terms; numbers are.
    assert terms("ok, a 150 mg pen") == ("150", "pen")


def test_tfidf_rows_are_unit_and_a_shared_rare_word_counts_more_than_a_common_one() -> None:
    texts = [
        "Lily loves the chore chart on the fridge",
        "The chore chart was abandoned in May",
        "Lily starts swim lessons on Saturday",
        "Lily read Matilda at bedtime",
    ]
    rows = tfidf(texts)
    assert rows.shape[0] == 4
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    sim = rows @ rows.T
    # "chore chart" (in two texts) ties the first two more than "Lily" (in three) ties 1 and 3.
    assert sim[0, 1] > sim[0, 2] > 0
    assert sim[1, 2] == 0


def test_tfidf_of_texts_without_terms_is_zero() -> None:
    rows = tfidf(["ok thanks", "yes"])
    assert rows.shape[0] == 2 and not rows.any()
    assert tfidf([]).shape[0] == 0


def test_shared_only_rows_give_the_same_cosines_between_different_texts() -> None:
    texts = [
        "Lily loves the chore chart on the fridge",
        "The chore chart was abandoned in May",
        "Lily starts swim lessons on Saturday",
        "Theo builds Lego towers",
    ]
    full, shared = tfidf(texts), tfidf(texts, shared_only=True)
    assert shared.shape[1] < full.shape[1]
    off = ~np.eye(len(texts), dtype=bool)
    assert np.allclose((full @ full.T)[off], (shared @ shared.T)[off], atol=1e-6)
    # The text sharing no term keeps no column: its row is zero.
    assert not shared[3].any()
