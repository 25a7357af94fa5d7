"""Recall's text score: BM25 term frequency over lesson and decision text, no batch IDF."""

from __future__ import annotations

from typing import Any

from reflexmem.recall.fts import text_scores


def _row(lesson: str | None, text: str, symbol: str = "SPY") -> dict[str, Any]:
    return {"lesson": lesson, "decision_text": text, "symbol": symbol, "scenario": None}


def test_repeated_terms_count_and_saturate_and_no_term_scores_zero() -> None:
    rows = [
        _row("gap fade failed", "gap fade setup"),  # both terms twice
        _row("gap risk ignored", "breakout setup"),  # one term once
        _row("late entry", "breakout setup"),  # none
        _row(None, "gap fade gap fade gap fade"),  # no lesson; terms three times each
    ]
    twice, once, none, thrice = text_scores(rows, ["gap", "fade"])
    assert none == 0.0
    assert twice > once > 0
    assert thrice > twice  # more occurrences still count, with diminishing returns
    assert thrice - twice < twice - once


def test_a_longer_row_with_the_same_matches_ranks_lower() -> None:
    short = _row("gap fade", "setup")
    long = _row("gap fade", "setup with many other words about the market that day")
    assert text_scores([short, long], ["gap", "fade"])[0] > text_scores([short, long], ["gap"])[1]
    first, second = text_scores([short, long], ["gap", "fade"])
    assert first > second > 0


def test_the_score_of_a_row_does_not_depend_on_rare_or_common_terms_in_the_batch() -> None:
    """No IDF over the batch: a term every candidate shares weighs like a rare one."""
    target = _row("gap fade", "setup")
    alone = text_scores([target], ["gap", "fade"])[0]
    same_length = _row("gap risk", "setup")  # shares "gap" with the target, not "fade"
    crowd = text_scores([target] + [same_length] * 20, ["gap", "fade"])[0]
    assert abs(alone - crowd) < 1e-12
    assert text_scores([], ["gap"]) == []
    assert text_scores([target], []) == [0.0]
