"""The layers hold (pyproject.toml's import-linter contracts): configs < data < streaming < evaluation, training <
recognizer < serving < tasks < flows, no cycles. The real lint-imports runs on the tree, then on a copy of it with
one back-import added, which it must refuse."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("configs", "data", "streaming", "training", "evaluation", "recognizer", "serving", "tasks", "flows")
LINT = str(Path(sys.executable).parent / "lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    # the packages are read from `root` (first on the path), not from the installed checkout
    return subprocess.run([LINT, "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=600, env={"PYTHONPATH": str(root), "PATH": ""})


def test_the_tree_keeps_its_layers():
    out = _lint(REPO)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_a_back_import_breaks_the_contract(tmp_path):
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    module = tmp_path / "streaming" / "engine.py"
    module.write_text(module.read_text() + "\nfrom recognizer.spec import RecognizerSpec  # noqa: E402,F401\n")
    out = _lint(tmp_path)
    assert out.returncode != 0 and "streaming is not allowed to import recognizer" in out.stdout, out.stdout[-4000:]
