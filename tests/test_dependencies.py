"""Every third-party package the code imports is declared in pyproject.toml (issue 65).

The imports are read from the source (``ast``: module-level and function-level alike) and mapped to their
distributions by ``importlib.metadata.packages_distributions``. Product code (everything but ``tests/`` and
``benchmarks/``) must name a main dependency, or an optional extra other than ``dev`` (lhotse recipes, MFA, the
peers), since a user installs the product without the dev extra; tests and benchmarks may also use ``dev``.
A package that arrives only as another's dependency is not declared: it can vanish with that package's next release.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib

from conftest import REPO

# the repository's own packages and the modules of its script folders (tests and benchmarks import each other)
LOCAL = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")} | {
    p.stem for folder in ("tests", "benchmarks") for p in (REPO / folder).glob("*.py")}
DEV_ONLY = ("tests", "benchmarks")


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str], set[str]]:
    """(main, optional extras but dev, dev) distribution names."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    main = {_name(r) for r in project["dependencies"]}
    optional = {_name(r) for name, reqs in extras.items() if name != "dev" for r in reqs}
    return main, optional, {_name(r) for r in extras.get("dev", [])}


def _imports() -> dict[str, set[str]]:
    """Top-level module name -> the files importing it, over the repository's Python (not .venv)."""
    found: dict[str, set[str]] = {}
    for path in REPO.rglob("*.py"):
        rel = path.relative_to(REPO)
        if rel.parts[0].startswith(".") or rel.parts[0] in {"outputs", "mlruns", "build"}:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in LOCAL and top != "__future__":
                    found.setdefault(top, set()).add(str(rel))
    return found


def test_every_import_is_a_declared_distribution():
    main, optional, dev = _declared()
    dists = md.packages_distributions()
    problems = []
    for module, files in sorted(_imports().items()):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [])}
        if not names:
            problems.append(f"{module}: no installed distribution provides it ({sorted(files)[:3]})")
            continue
        product = sorted(f for f in files if not f.startswith(DEV_ONLY))
        allowed = main | optional if product else main | optional | dev
        if not names & allowed:
            problems.append(f"{module} ({'/'.join(sorted(names))}) is not declared"
                            f"{' outside the dev extra' if names & dev else ''}: {(product or sorted(files))[:3]}")
    assert not problems, "\n".join(problems)


def test_the_check_sees_imports_and_declarations():
    """The test above can fail: it sees this repository's own imports and its pyproject's names."""
    main, _, dev = _declared()
    imports = _imports()
    assert {"torch", "whisper", "prefect", "ray", "mlflow"} <= set(imports)
    assert {"torch", "openai-whisper", "prefect"} <= main and "pytest" in dev
    assert "os" not in imports and "streaming" not in imports  # stdlib and local packages are not third-party
