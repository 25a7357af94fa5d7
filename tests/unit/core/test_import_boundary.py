import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import reflexmem
for m in pkgutil.walk_packages(reflexmem.__path__, "reflexmem."):
    importlib.import_module(m.name)
print(",".join(x for x in ("prefect", "mlflow", "great_expectations") if x in sys.modules))
"""


def test_importing_every_core_module_loads_no_orchestration_or_tracking_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
