"""What the background service loads before its worker polls: every module of its start-up
path, and none of the libraries only some sessions use (the Docker SDK for sandboxes, Pillow
for images, PyYAML for agent files). Each of them was a slice of every cold start."""

from __future__ import annotations

import os
import subprocess
import sys

LOADED_ON_DEMAND = ("docker", "requests", "PIL", "yaml")

PROBE = (
    "import sys\n"
    "import tempi.workers.service, tempi.workers.worker, tempi.workers.codec, tempi.workers.telemetry\n"
    "import tempi.workers.provider_preload, tempi.workers.activity_tracker, tempi.workers.temporal_client\n"
    "import tempi.activities.sandbox_activities\n"
    f"print(sorted(m for m in sys.modules if m.split('.')[0] in {LOADED_ON_DEMAND!r}))\n"
)


def test_the_service_start_loads_no_library_of_a_feature_it_may_never_use() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPI_")}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_sandbox_name_loads_the_docker_sdk_when_asked_for() -> None:
    probe = (
        "import sys\n"
        "from tempi.activities.sandbox import SESSION_LABEL, open_backend\n"
        "print(callable(open_backend), bool(SESSION_LABEL), 'docker' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True True True"
