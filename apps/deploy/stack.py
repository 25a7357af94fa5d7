"""`reflexmem stack up|down|status`: the production topology on this machine, by one command.

`up` starts, each in its own process group with its log under `REFLEX_HOME/stack/logs`:

* a Prefect server (`prefect server start`) on loopback at a free port, with its own
  `PREFECT_HOME` under `REFLEX_HOME/stack/prefect` and analytics off;
* an MLflow tracking server (`mlflow server`) at a free port, its backend store a
  PostgreSQL database (`reflex_mlflow`, created if missing on
  `REFLEX_STACK_POSTGRES_URL`) and its artifacts under a configurable folder;
* a process work pool and one worker (`prefect worker start --type process`);

and uses the PostgreSQL ledger (`REFLEX_DATABASE_URL` when it is PostgreSQL, else a
`reflex_ledger` database it creates, never migrates: `reflexmem db upgrade` is the one
command that migrates). With a migrated ledger it deploys every flow to the pool
(`apps.deploy.deployments.deploy_to_pool`). What it chose (URLs, ports, PIDs with their
command lines) goes to `REFLEX_HOME/stack/state.json`, written after each start, so
`down` stops exactly the processes `up` started (by recorded PID and command line, the
whole process group, whatever the clock did), even after a failed `up`, and nothing
else; it then checks that their ports are closed and keeps the state, saying what it
could not stop, if anything survived. The Prefect server is told its own API URL for
its UI. `stack_live.status` reads the ledger's migration and the deployments live.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa

from apps.deploy.processes import (
    STARTUP_TIMEOUT_S,
    StackError,
    free_port,
    is_ours,
    listening,
    start_process,
    stop_process,
    tool,
    wait_for,
    wait_http,
)
from reflexmem.settings import Settings

POOL = "reflex-pool"
MLFLOW_DB = "reflex_mlflow"
LEDGER_DB = "reflex_ledger"


def stack_dir(settings: Settings) -> Path:
    """Where the stack keeps its state, logs, Prefect home and MLflow artifacts."""
    return (settings.home / "stack").resolve()


def state_path(settings: Settings) -> Path:
    """The state file `up` writes and `down`/`status` read."""
    return stack_dir(settings) / "state.json"


def read_state(settings: Settings | None = None) -> dict[str, Any] | None:
    """The recorded stack, or None when none was started under this home."""
    path = state_path(settings or Settings())
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def prefect_api_url(settings: Settings | None = None) -> str | None:
    """The Prefect API URL of the stack started under this home (None if not recorded).

    For the doctor's schedule health: it reads the state file only, never starts anything.
    """
    state = read_state(settings)
    if state is None:
        return None
    url = state.get("prefect", {}).get("api_url")
    return str(url) if url else None


def _write_state(settings: Settings, state: dict[str, Any]) -> None:
    path = state_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(path)


def ensure_database(admin_url: str, name: str) -> str:
    """Create database `name` on the server of `admin_url` if missing; return its URL."""
    from adapters.db import make_engine

    admin = make_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).first()
            if exists is None:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def mlflow_store_uri(url: str) -> str:
    """The SQLAlchemy URI MLflow's server uses for a PostgreSQL URL (psycopg 3 driver)."""
    parsed = sa.make_url(url).set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


CLIENT_VARIABLES = frozenset(
    {
        "PREFECT_API_URL",
        "PREFECT_API_KEY",
        "PREFECT_HOME",
        "PREFECT_PROFILE",
        "PREFECT_PROFILES_PATH",
    }
)
"""Variables of the calling shell that would point the stack's processes elsewhere."""


def prefect_env(prefect_home: Path, api_url: str | None = None) -> dict[str, str]:
    """The environment of the stack's Prefect processes: own home, analytics off."""
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
    env.update(
        {
            "PREFECT_HOME": str(prefect_home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": env.get("REFLEX_STACK_UI", "true"),
        }
    )
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def stack_settings(settings: Settings, state: dict[str, Any]) -> Settings:
    """The settings every stack process and deployment uses: the stack's ledger and MLflow."""
    return settings.model_copy(
        update={
            "database_url": state["ledger"]["url"],
            "mlflow_tracking_uri": state["mlflow"]["url"],
            "artifact_root": Path(state["mlflow"]["artifact_root"]),
            "mlflow_ui_url": state["mlflow"]["url"],
        }
    ).pinned()


def ledger_current(url: str) -> bool:
    """Whether the ledger at `url` is at the code's migration head."""
    from adapters import migrate
    from adapters.db import make_engine

    engine = make_engine(url)
    try:
        migrate.require_current(engine)
        return True
    except Exception:
        return False
    finally:
        engine.dispose()


def up(
    settings: Settings,
    *,
    artifact_root: Path | None = None,
    mlflow_db: str = MLFLOW_DB,
    pool: str = POOL,
    deploy: bool = True,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> dict[str, Any]:
    """Start the stack (see the module docstring); returns the state it recorded."""
    existing = read_state(settings)
    if existing is not None and any(is_ours(e) for e in _processes(existing).values()):
        raise StackError(f"a stack is already up under {stack_dir(settings)}: `stack down` first")
    root = stack_dir(settings)
    logs, prefect_home = root / "logs", root / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    artifacts = (artifact_root or settings.artifact_root or root / "mlartifacts").resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    ledger = (
        settings.resolved_database_url
        if settings.backend == "postgresql"
        else ensure_database(settings.stack_postgres_url, LEDGER_DB)
    )
    state: dict[str, Any] = {"home": str(settings.home.resolve()), "ledger": {"url": ledger}}
    try:
        _start_prefect(settings, state, prefect_home, logs, timeout_s)
        _start_mlflow(settings, state, mlflow_db, artifacts, logs, timeout_s)
        _start_worker(settings, state, prefect_home, logs, pool, timeout_s)
        state["ledger"]["migrated"] = ledger_current(ledger)
        if deploy and state["ledger"]["migrated"]:
            state["deployments"] = deploy_stack(settings, state)
        _write_state(settings, state)
    except BaseException:
        down(settings)
        raise
    return state


def _start_prefect(
    settings: Settings, state: dict[str, Any], home: Path, logs: Path, timeout_s: float
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [tool("prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    # the UI asks its browser to call this URL (its default, port 4200, is not ours)
    env = {**prefect_env(home), "PREFECT_UI_API_URL": f"{url}/api"}
    entry = start_process("prefect-server", cmd, env, logs)
    state["prefect"] = {**entry, "url": url, "api_url": f"{url}/api", "home": str(home)}
    _write_state(settings, state)
    state["prefect"]["startup_s"] = round(wait_http(f"{url}/api/health", entry, timeout_s), 1)


def _start_mlflow(
    settings: Settings,
    state: dict[str, Any],
    database: str,
    artifacts: Path,
    logs: Path,
    timeout_s: float,
) -> None:
    store = mlflow_store_uri(ensure_database(settings.stack_postgres_url, database))
    port = free_port()
    cmd = [
        tool("mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        store,
        "--artifacts-destination",
        str(artifacts),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    entry = start_process("mlflow-server", cmd, env, logs)
    url = f"http://127.0.0.1:{port}"
    state["mlflow"] = {
        **entry,
        "url": url,
        "database": database,
        "artifact_root": str(artifacts),
    }
    _write_state(settings, state)
    state["mlflow"]["startup_s"] = round(wait_http(f"{url}/health", entry, timeout_s), 1)


def _start_worker(
    settings: Settings,
    state: dict[str, Any],
    home: Path,
    logs: Path,
    pool: str,
    timeout_s: float,
) -> None:
    from apps.deploy.deployments import run_env

    api = state["prefect"]["api_url"]
    _ensure_pool(api, pool)
    env = {**prefect_env(home, api), **run_env(stack_settings(settings, state))}
    env.setdefault(
        "PREFECT_WORKER_QUERY_SECONDS", os.environ.get("PREFECT_WORKER_QUERY_SECONDS", "5")
    )
    name = f"reflex-worker-{socket.gethostname()}-1"
    cmd = [tool("prefect"), "worker", "start", "--pool", pool, "--type", "process", "--name", name]
    entry = start_process("worker-1", cmd, env, logs)
    state["workers"] = [{**entry, "pool": pool, "name": name}]
    _write_state(settings, state)
    wait_for(
        lambda: not is_ours(entry) or _worker_online(api, pool, name),
        f"worker {name} did not report to {pool}",
        timeout_s,
    )
    if not is_ours(entry):
        raise StackError(f"worker exited during start-up; see {entry['log']}")


def _api(api: str) -> Any:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    return temporary_settings({PREFECT_API_URL: api})


def _ensure_pool(api: str, pool: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists

    with _api(api), get_client(sync_client=True) as client, suppress(ObjectAlreadyExists):
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))


def _worker_online(api: str, pool: str, name: str) -> bool:
    from prefect.client.orchestration import get_client

    try:
        with _api(api), get_client(sync_client=True) as client:
            workers = client.read_workers_for_work_pool(pool)
    except Exception:
        return False
    return any(w.name == name and str(w.status).upper().endswith("ONLINE") for w in workers)


def deploy_stack(
    settings: Settings,
    state: dict[str, Any],
    names: list[str] | None = None,
    interval_s: float | None = None,
) -> dict[str, str]:
    """Deploy the flows to the stack's pool, with the stack's ledger and MLflow bound.

    `interval_s` replaces the cron schedules (the topology test runs every few seconds).
    """
    from apps.deploy.deployments import deploy_to_pool

    pool = state["workers"][0]["pool"]
    with _api(state["prefect"]["api_url"]):
        return deploy_to_pool(stack_settings(settings, state), pool, names, interval_s)


def _processes(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {
        k: state[k] for k in ("prefect", "mlflow") if k in state and "pid" in state[k]
    }
    for i, w in enumerate(state.get("workers", []), start=1):
        found[f"worker-{i}"] = w
    return found


def down(settings: Settings) -> dict[str, str]:
    """Stop the processes the recorded stack started (workers first), then check its ports.

    The state is forgotten only when everything is stopped and no recorded port still
    listens; otherwise it stays, and the result says what could not be stopped.
    """
    state = read_state(settings)
    if state is None:
        return {}
    procs = _processes(state)
    order = sorted(procs, key=lambda k: (not k.startswith("worker"), k != "mlflow"))
    result = {name: stop_process(procs[name]) for name in order}
    for name, entry in procs.items():
        port = urlsplit(str(entry.get("url", ""))).port
        if port is not None and listening(port):
            result[name] += f"; port {port} still listening"
    if all(v in ("stopped", "killed", "not running") for v in result.values()):
        state_path(settings).unlink(missing_ok=True)
    return result


def shell_env(settings: Settings) -> dict[str, str]:
    """`export` lines' values for a shell to use the stack (`reflexmem stack env`)."""
    state = read_state(settings)
    if state is None:
        raise StackError("no stack is recorded: `reflexmem stack up` first")
    pinned = stack_settings(settings, state)
    return {
        "PREFECT_API_URL": state["prefect"]["api_url"],
        "REFLEX_DATABASE_URL": pinned.resolved_database_url,
        "REFLEX_MLFLOW_TRACKING_URI": pinned.resolved_tracking_uri,
        "REFLEX_ARTIFACT_ROOT": str(pinned.resolved_artifact_root),
        "REFLEX_MLFLOW_UI_URL": state["mlflow"]["url"],
    }
