"""Small hand-made ledger streams for integration tests."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from reflexmem.synth import generate, synthetic_prices, write_stream


def small_stream(n: int = 300, seed: int = 3) -> dict[str, pl.DataFrame]:
    return generate(synthetic_prices(seed=seed), n, seed=seed)


ID_COLUMNS = (
    "decision_id",
    "preview_id",
    "execution_id",
    "fill_id",
    "position_id",
    "consumed_by_decision_id",
)


def renamed(stream: dict[str, pl.DataFrame], suffix: str) -> dict[str, pl.DataFrame]:
    """The same rows under new IDs (`suffix` appended), which sort next to the old ones."""
    return {
        kind: frame.with_columns(
            (pl.col(c) + suffix).alias(c) for c in ID_COLUMNS if c in frame.columns
        )
        for kind, frame in stream.items()
    }


def write_small(tmp: Path, n: int = 300, fmt: str = "parquet", seed: int = 3) -> list[Path]:
    return write_stream(small_stream(n, seed), tmp, fmt=fmt)


def clean_stream(n: int = 8, seed: int = 3) -> dict[str, pl.DataFrame]:
    """A stream in which every execution meets every admission condition.

    Tests plant one fault in it and show that exactly that execution is held back.
    Every position is settled with eight evaluation points.
    """
    stream = small_stream(n, seed)
    d = stream["decisions"].with_columns(
        pl.when(pl.col("role_id") == "sentiment")
        .then(pl.lit("momentum"))
        .otherwise(pl.col("role_id"))
        .alias("role_id")
    )
    p = stream["previews"].with_columns(
        (pl.col("created_at") + pl.duration(minutes=2)).alias("consumed_at"),
        pl.col("decision_id").alias("consumed_by_decision_id"),
    )
    e = (
        stream["executions"]
        .drop("symbol", "direction")
        .join(d.select("decision_id", "symbol", "direction"), on="decision_id")
        .with_columns(
            pl.col("decision_id").str.replace("^d", "p").alias("preview_id"),
            pl.lit("manual_agent").alias("origin"),
            pl.lit(False).alias("origin_verified"),
            pl.lit(None, dtype=pl.String).alias("automation_markers"),
            pl.lit("spot").alias("instrument"),
        )
        .select(stream["executions"].columns)
    )
    o = stream["outcomes"].with_columns(
        pl.lit("settled").alias("status"),
        (pl.col("opened_at") + pl.duration(days=2)).alias("settled_at"),
        (pl.col("entry_price") * 1.01).alias("exit_price"),
        pl.lit(0.01).alias("realized_return"),
        pl.lit(8).alias("evaluation_points"),
    )
    return {"decisions": d, "previews": p, "executions": e, "fills": stream["fills"], "outcomes": o}
