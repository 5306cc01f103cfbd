"""The README is for users (issue 65): short, no lab notebook, and every command it shows exists.

Each ``whisperline`` command named in the README (its CLI table and code blocks) is run with ``--help`` through the
real CLI app, so a renamed or removed command fails here instead of in a newcomer's shell; every relative link
resolves, and the decision index links every record.
"""

from __future__ import annotations

import re

import pytest
from conftest import REPO

README = REPO / "README.md"
MAX_LINES = 300
# a commit hash: 7-40 hex characters with at least one digit and one letter, standing alone
HASH = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _commands() -> set[tuple[str, ...]]:
    """(group, subcommand) paths of every ``whisperline`` command the README shows."""
    from flows.cli import app
    from typer.main import get_group

    group = get_group(app)
    text = README.read_text()
    found: set[tuple[str, ...]] = set()
    rows = re.findall(r"^\| `([a-z-]+(?: [a-z-]+)?)[ `]", text, flags=re.M)  # the CLI table's first column
    code = re.findall(r"```.*?```", text, flags=re.S) + re.findall(r"`[^`\n]+`", text)  # blocks, inline spans
    shown = [m for block in code for m in re.findall(r"whisperline ([a-z-]+(?: [a-z-]+)?)", block)]
    for words in rows + shown:
        parts = tuple(words.split())
        if parts[0] not in group.commands:
            found.add(parts)  # an unknown command: --help will fail below
            continue
        cmd = group.commands[parts[0]]
        sub = getattr(cmd, "commands", None)
        found.add(parts[:2] if sub and len(parts) > 1 else parts[:1])  # a group's unknown subcommand fails too
    return found


def test_the_readme_is_short_and_carries_one_dated_line():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, len(lines)
    dated = [line for line in lines if HASH.search(line) or DATE.search(line)]
    assert len(dated) == 1 and dated[0].startswith("Scored "), dated  # the results table's one date + commit line


@pytest.mark.parametrize("command", sorted(_commands()), ids=" ".join)
def test_every_command_the_readme_shows_exists(command):
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, (command, result.output)


def test_links_resolve_and_every_decision_is_indexed():
    for page in [README, *sorted((REPO / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), (page.relative_to(REPO), target)
    index = (REPO / "docs" / "decisions" / "README.md").read_text()
    records = sorted(p.stem for p in (REPO / "docs" / "decisions").glob("*.md") if p.stem != "README")
    assert records and not [r for r in records if f"({r}.md)" not in index]
