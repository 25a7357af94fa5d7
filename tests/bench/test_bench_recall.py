"""`bench recall`: its relevance labels come from the generator, and it prints its floors."""

from __future__ import annotations

import json

import polars as pl
from typer.testing import CliRunner

from apps.bench.recall import paired_difference
from apps.bench.recall_corpus import MODE_BASE, MODE_STRIDE, MODE_WORDS, case_frames, relevance_set
from apps.cli import app


def test_relevance_labels_are_exactly_the_eligible_cases_sharing_role_symbol_mode() -> None:
    frames = case_frames(20_000, seed=3)
    truth = frames["truth"]
    queries = relevance_set(truth, 50, seed=3)
    assert len(queries) == 50
    for q in queries:
        expected = truth.filter(
            pl.col("eligible"),
            pl.col("role_id") == q.role,
            pl.col("symbol") == q.symbol,
            pl.col("mode") == q.mode,
        )["case_id"]
        assert q.relevant == frozenset(expected.to_list())
        assert q.relevant, "every query is anchored on an eligible case"
        own = {f"w{MODE_BASE + q.mode * MODE_STRIDE + j}" for j in range(MODE_WORDS)}
        assert set(q.text.split()) <= own
    lessons = frames["role_cases"].join(truth, on="case_id").filter(pl.col("eligible"))
    assert lessons["lesson"].null_count() == 0
    assert (
        frames["role_cases"]
        .filter(~pl.col("case_id").is_in(lessons["case_id"].implode()))["lesson"]
        .null_count()
        == frames["role_cases"].height - lessons.height
    )


def test_bench_recall_prints_recall_floor_and_peer_figures() -> None:
    result = CliRunner().invoke(
        app,
        ["bench", "recall", "--cases", "3000", "--queries", "40", "--backend", "sqlite", "--json"],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("p50_ms", "p99_ms", "floor_p50_ms", "floor_p99_ms", "peer_p99_ms"):
        assert out[key] > 0, key
    for key in ("recall_at_5", "ndcg_at_5", "floor_ndcg_at_5", "peer_ndcg_at_5"):
        assert 0.0 <= out[key] <= 1.0, key
    assert out["queries"] == 40
    # Recall against its rivals as a paired difference over the same queries.
    for key, rival in (("ndcg_minus_floor", "floor_ndcg_at_5"), ("ndcg_minus_peer", None)):
        diff = out[key]
        assert diff["ci_low"] <= diff["mean"] <= diff["ci_high"], key
        if rival is not None:
            assert abs(diff["mean"] - (out["ndcg_at_5"] - out[rival])) < 1e-3, key
    peer_gap = out["recall_ndcg_at_5_on_peer_queries"] - out["peer_ndcg_at_5"]
    assert abs(out["ndcg_minus_peer"]["mean"] - peer_gap) < 1e-3
    # Without its post-filter the peer returns other symbols' cases.
    assert out["peer_raw_wrong_symbol_share"] > 0.5


def test_paired_difference_is_the_mean_gap_with_students_interval() -> None:
    same = paired_difference([0.5, 1.0, 0.0, 1.0], [0.5, 1.0, 0.0, 1.0])
    assert same == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    # Differences 1, 0, 0, 1: mean 0.5, sd 0.5774, t(0.975, 3) = 3.1824.
    gap = paired_difference([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert gap["mean"] == 0.5
    assert gap["ci_low"] == round(0.5 - 3.1824 * 0.57735 / 2, 4)
    assert gap["ci_high"] == round(0.5 + 3.1824 * 0.57735 / 2, 4)
