"""One top-level package: the distribution installs `hermod` (plus the `pyspark_hermod` entry
module) and nothing else, and no code imports the repository folders by their bare names."""
from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("broker", "store", "migrations", "pipeline")


def test_no_module_imports_a_bare_repository_folder():
    offenders = []
    for folder in (*FOLDERS, "tests", "benchmarks", "hermod"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_symlink() or "node_modules" in path.parts or (folder == "hermod" and path.parent != ROOT / "hermod"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                              if n.split(".")[0] in FOLDERS]
    assert offenders == []


def test_the_broker_loads_without_any_bare_top_level_module():
    code = ("import sys, hermod.broker.app, hermod.broker.cli, hermod.store, hermod.broker.spark, pyspark_hermod;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))" % (FOLDERS,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_wheel_holds_one_package_with_its_data_files(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("hermod_broker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"hermod", "pyspark_hermod.py"}
    for needed in ("hermod/broker/selector/grammar.lark", "hermod/migrations/env.py",
                   "hermod/migrations/script.py.mako", "hermod/migrations/versions/0001_initial.py",
                   "hermod/store/schema.py", "hermod/pipeline/analyse.py", "hermod/__main__.py"):
        assert needed in names
    assert not [n for n in names if n.startswith("hermod/tests") or "/__pycache__/" in n]
