"""How L0, L1 and L2 skills decide, vectorized over a frame of observations.

One implementation serves the router (a frame of one routed observation) and the
shadow primitives (replay, shadow comparison, evaluation over many), so what a skill
was evaluated with is what decides live. Every procedure returns, per `_row`, a
`choice` (null when the skill has no answer) and a `confidence` in [0, 1]:

* `rules` (L0, verified rules): the first rule whose conditions all hold decides with
  confidence 1; no rule holding means "not mine", never a guess.
* `scores` (L1, bounded choice): boolean features times per-option weights plus a bias,
  a softmax over the fixed options at `temperature`; confidence is the top probability.
* `examples` (L2, skilled procedure): the k labelled examples most similar to the input
  (Jaccard over lower-cased word tokens of `text_fields`) vote with their similarity;
  confidence is the winner's share of the vote, zero when no example reaches
  `min_similarity`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from reflexmem.reflex.conditions import (
    ROW,
    compile_all,
    condition_fields,
    ensure_fields,
    observations_frame,
)
from reflexmem.reflex.skills import SkillSpec

TOKEN = r"[a-z0-9]+"
CHUNK_ROWS = 20_000
"""Rows per block of the similarity matrix: memory stays bounded as the input grows."""
DEFAULT_K = 3
DEFAULT_MIN_SIMILARITY = 0.1
DEFAULT_TEMPERATURE = 1.0


def procedure_fields(spec: SkillSpec) -> set[str]:
    """Observation fields the skill's procedure, trigger and rejection conditions read."""
    proc = spec.procedure
    fields = condition_fields(spec.trigger) | condition_fields(spec.rejection_conditions)
    if proc["kind"] == "rules":
        for rule in proc["rules"]:
            fields |= condition_fields(rule["when"])
    elif proc["kind"] == "scores":
        fields |= condition_fields(proc["features"].values())
    else:
        fields |= set(proc["text_fields"])
    return fields


def _empty(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(
        pl.col(ROW),
        pl.lit(None, dtype=pl.String).alias("choice"),
        pl.lit(0.0).alias("confidence"),
    )


def _rules(proc: Mapping[str, Any], frame: pl.DataFrame) -> pl.DataFrame:
    rules = proc["rules"]
    chain: Any = pl.when(compile_all(rules[0]["when"])).then(pl.lit(rules[0]["choose"]))
    for rule in rules[1:]:
        chain = chain.when(compile_all(rule["when"])).then(pl.lit(rule["choose"]))
    choice = chain.otherwise(pl.lit(None, dtype=pl.String)).alias("choice")
    out = frame.select(pl.col(ROW), choice)
    return out.with_columns(
        pl.when(pl.col("choice").is_not_null()).then(1.0).otherwise(0.0).alias("confidence")
    )


def _scores(proc: Mapping[str, Any], options: Sequence[str], frame: pl.DataFrame) -> pl.DataFrame:
    names = sorted(proc["features"])
    feats = frame.select(
        compile_all([proc["features"][n]]).cast(pl.Float64).alias(n) for n in names
    ).to_numpy()
    weights = np.array(
        [[float(proc["weights"].get(o, {}).get(n, 0.0)) for o in options] for n in names]
    )
    bias = np.array([float(proc["weights"].get(o, {}).get("bias", 0.0)) for o in options])
    logits = (feats @ weights + bias) / float(proc.get("temperature", DEFAULT_TEMPERATURE))
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    best = probs.argmax(axis=1)
    return pl.DataFrame(
        {
            ROW: frame[ROW],
            "choice": np.asarray(options, dtype=object)[best].astype(str),
            "confidence": probs[np.arange(len(best)), best],
        },
        schema={ROW: pl.Int64, "choice": pl.String, "confidence": pl.Float64},
    )


def _tokens(frame: pl.DataFrame, fields: Sequence[str], key: str = ROW) -> pl.DataFrame:
    """Distinct (key, token) pairs of the text fields."""
    text = pl.concat_str([pl.col(f).fill_null("") for f in fields], separator=" ")
    return (
        frame.select(pl.col(key), text.str.to_lowercase().str.extract_all(TOKEN).alias("token"))
        .explode("token")
        .drop_nulls("token")
        .unique()
    )


def _examples(proc: Mapping[str, Any], options: Sequence[str], frame: pl.DataFrame) -> pl.DataFrame:
    fields = list(proc["text_fields"])
    k = int(proc.get("k", DEFAULT_K))
    floor = float(proc.get("min_similarity", DEFAULT_MIN_SIMILARITY))
    examples = proc["examples"]
    ex_frame = observations_frame([e["input"] for e in examples], fields)
    ex_tokens = _tokens(ex_frame, fields)
    vocab = ex_tokens.select(pl.col("token").unique().sort()).with_row_index("tid")
    ex_pairs = ex_tokens.join(vocab, on="token").select(ROW, "tid").to_numpy()
    m, v = len(examples), vocab.height
    ex_matrix = np.zeros((m, v), dtype=np.float32)
    ex_matrix[ex_pairs[:, 0], ex_pairs[:, 1]] = 1.0
    ex_sizes = ex_matrix.sum(axis=1)
    labels = np.array([options.index(e["expected"]) for e in examples])
    out_choice: list[np.ndarray[Any, Any]] = []
    out_conf: list[np.ndarray[Any, Any]] = []
    rows = frame[ROW].to_numpy()
    for start in range(0, frame.height, CHUNK_ROWS):
        chunk = frame.slice(start, CHUNK_ROWS).with_row_index("_pos")
        tokens = _tokens(chunk, fields, "_pos")
        sizes = np.zeros(chunk.height)
        counted = tokens.group_by("_pos").len()
        sizes[counted["_pos"].to_numpy()] = counted["len"].to_numpy()
        pairs = tokens.join(vocab, on="token").select("_pos", "tid").to_numpy()
        matrix = np.zeros((chunk.height, v), dtype=np.float32)
        if len(pairs):
            matrix[pairs[:, 0], pairs[:, 1]] = 1.0
        inter = matrix @ ex_matrix.T
        union = sizes[:, None] + ex_sizes[None, :] - inter
        sim = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        top = np.argsort(-sim, axis=1, kind="stable")[:, : min(k, m)]
        top_sim = np.take_along_axis(sim, top, axis=1)
        top_sim = np.where(top_sim >= floor, top_sim, 0.0)
        votes = np.zeros((chunk.height, len(options)))
        np.add.at(votes, (np.arange(chunk.height)[:, None], labels[top]), top_sim)
        total = votes.sum(axis=1)
        best = votes.argmax(axis=1)
        conf = np.divide(votes.max(axis=1), total, out=np.zeros_like(total), where=total > 0)
        choice = np.asarray(options, dtype=object)[best]
        choice[total <= 0] = None
        out_choice.append(choice)
        out_conf.append(conf)
    return pl.DataFrame(
        {
            ROW: rows,
            "choice": np.concatenate(out_choice) if out_choice else [],
            "confidence": np.concatenate(out_conf) if out_conf else [],
        },
        schema={ROW: pl.Int64, "choice": pl.String, "confidence": pl.Float64},
    )


def decide_frame(spec: SkillSpec, frame: pl.DataFrame) -> pl.DataFrame:
    """`_row`, `choice`, `confidence` and `refused` (a rejection condition held) per row.

    Rows whose trigger does not hold or that a rejection condition refuses get no choice
    and confidence 0, so they escalate.
    """
    frame = ensure_fields(frame, procedure_fields(spec))
    if frame.height == 0:
        return _empty(frame).with_columns(pl.lit(False).alias("refused"))
    proc = spec.procedure
    if proc["kind"] == "rules":
        decided = _rules(proc, frame)
    elif proc["kind"] == "scores":
        decided = _scores(proc, spec.options, frame)
    else:
        decided = _examples(proc, spec.options, frame)
    gate = frame.select(
        pl.col(ROW),
        compile_all(spec.trigger).alias("triggered"),
        (
            pl.any_horizontal([compile_all([c]) for c in spec.rejection_conditions])
            if spec.rejection_conditions
            else pl.lit(False)
        ).alias("refused"),
    )
    usable = pl.col("triggered") & ~pl.col("refused")
    return decided.join(gate, on=ROW, how="left", maintain_order="left").select(
        pl.col(ROW),
        pl.when(usable).then(pl.col("choice")).otherwise(None).alias("choice"),
        pl.when(usable).then(pl.col("confidence")).otherwise(0.0).alias("confidence"),
        pl.col("refused"),
    )


def decide_one(spec: SkillSpec, observation: Mapping[str, Any]) -> tuple[str | None, float, bool]:
    """(choice, confidence, refused) for one observation: `decide_frame` on one row."""
    frame = observations_frame([observation], procedure_fields(spec))
    row = decide_frame(spec, frame).row(0, named=True)
    return row["choice"], float(row["confidence"]), bool(row["refused"])
