"""Shared fixtures: ledgers on SQLite and PostgreSQL, one Prefect harness, MLflow stores.

PostgreSQL: each test session creates one scratch database on the local server (or
`REFLEX_TEST_POSTGRES_URL`) and drops it at the end; each test gets an empty schema via
TRUNCATE. In CI (`CI=true`) an unreachable server fails the run instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from reflexmem.ael.splits import DFULL_TRAIN_END, DFULL_VAL_END, ChronoSplits, split_by_dates
from reflexmem.ledger.models import Base
from reflexmem.prices.panel import PricePanel, load_dfull

PG_ADMIN_URL = os.environ.get(
    "REFLEX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI", "").lower() == "true"


def _pg_admin() -> sa.Engine | None:
    engine = make_engine(PG_ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with engine.connect():
            return engine
    except sa.exc.OperationalError as exc:
        if IN_CI:
            raise RuntimeError(f"CI needs PostgreSQL at {PG_ADMIN_URL}: {exc}") from exc
        return None


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A scratch PostgreSQL database for this test session, migrated to head."""
    admin = _pg_admin()
    if admin is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    name = f"reflex_test_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _truncate(engine: sa.Engine) -> None:
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
        else:
            for name in tables:
                conn.execute(sa.text(f"DELETE FROM {name}"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """An empty, migrated ledger on each backend."""
    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
        migrate.upgrade(eng)
    else:
        eng = make_engine(request.getfixturevalue("pg_url"))
        _truncate(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One ephemeral Prefect API for the whole session (it takes 10-20 s to start)."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store migrated once; tests copy it instead of migrating again."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.sqlite"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{path}")
    client.search_experiments()
    return path


@pytest.fixture
def mlflow_uri(mlflow_template: Path, tmp_path: Path) -> Iterator[str]:
    """A private MLflow tracking URI (a copy of the pre-migrated template)."""
    import mlflow

    path = tmp_path / "mlflow.sqlite"
    shutil.copy(mlflow_template, path)
    uri = f"sqlite:///{path}"
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(previous)


@pytest.fixture(scope="session")
def dfull() -> PricePanel:
    """The vendored D-full hourly panel."""
    return load_dfull()


@pytest.fixture(scope="session")
def dfull_splits(dfull: PricePanel) -> ChronoSplits:
    """The protocol's 128 / 40 / 40-bar splits by calendar date."""
    return split_by_dates(dfull.local_dates, DFULL_TRAIN_END, DFULL_VAL_END)
