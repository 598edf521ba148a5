"""A private Hermod for a benchmark: `hermod run --port 0` from this work tree with a given
configuration and store, its AMQP port read from the readiness line, stopped with SIGTERM."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from q1 import stop_process, wait_for_line  # noqa: E402


class HermodProc:
    """`with HermodProc(config, store) as b: b.port, b.pid`. `store`: "memory", "sqlite" (a file
    in a temp dir) or a store URL; `pythonpath` is put before the work tree (the uvloop trial)."""

    def __init__(self, config: str = "", store: str = "memory", pythonpath: str | None = None,
                 log_level: str = "warning"):
        self.workdir = Path(tempfile.mkdtemp(prefix="hermod-bench-"))
        (self.workdir / "hermod.toml").write_text(config)
        if store == "sqlite":
            store = f"sqlite:///{self.workdir / 'hermod.db'}"
        self.store = store
        paths = [p for p in (pythonpath, str(ROOT)) if p]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
        self.proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", store,
                                      "--config", str(self.workdir / "hermod.toml"), "--log-level", log_level],
                                     cwd=self.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            m = wait_for_line(self.proc, r"hermod listening on amqp://[^ ]*:(\d+)", 60)
        except BaseException:
            self.stop()
            raise
        self.port, self.pid = int(m.group(1)), self.proc.pid
        self.url = f"amqp://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "HermodProc":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
