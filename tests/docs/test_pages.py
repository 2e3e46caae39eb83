"""The README front page and the docs' examples: every example is included by a page and run by a test.

The site's links, anchors and snippet paths are checked by `mkdocs build --strict` (`make docs-check`).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
# Pages whose inline code blocks are not (yet) files under docs/examples/, with why.
INLINE_ALLOWED = {
    "architecture.md": "the code's design doc, with its own diagrams",
    "reference/broker-plan-record.md": "written with the broker plugin, whose tests read the record",
}
SNIPPET = re.compile(r'--8<-- "([^":]+)(?::[\w-]+)?"')


def _included() -> set[Path]:
    return {ROOT / m for page in DOCS.rglob("*.md") for m in SNIPPET.findall(page.read_text())}


def test_readme_is_a_front_page() -> None:
    """At most 150 lines; the two commands for a fresh machine on its first screen; a glossary;
    every relative link resolves to a file."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines"
    first_screen = "\n".join(lines[:30])
    assert re.search(r"^make demo\b", first_screen, re.MULTILINE)
    assert re.search(r"^make test\b", first_screen, re.MULTILINE)
    assert "## Glossary" in lines
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", "\n".join(lines))
    relative = [link for link in links if "://" not in link]
    assert relative, "the README links into the docs"
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, missing


def test_readme_commands_are_the_tested_ones() -> None:
    """The README's two commands are the same lines as docs/examples/fresh-machine.sh's."""
    readme = (ROOT / "README.md").read_text()
    script = (EXAMPLES / "fresh-machine.sh").read_text()
    for line in re.findall(r"^make (?:demo|test) .*$", script, re.MULTILINE):
        assert line in readme, line


def test_every_example_is_included_and_run() -> None:
    """A file under docs/examples/ is shown on a page and named by a test here (or it is untested)."""
    tests = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    examples = [p for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert examples
    not_shown = [p for p in examples if p not in _included()]
    assert not not_shown, f"examples no page includes: {not_shown}"
    not_run = [p for p in examples if p.name not in tests and p.stem not in tests]
    assert not not_run, f"examples no test names: {not_run}"


def test_pages_show_no_untested_code_block() -> None:
    """Code blocks of commands, JSON, SQL and Python on the pages come from docs/examples/, except the
    few fenced blocks listed here (a layout tree, a mermaid diagram, one command line after a snippet)."""
    allowed = {"text", "mermaid", ""}
    offenders = []
    for page in DOCS.rglob("*.md"):
        if str(page.relative_to(DOCS)) in INLINE_ALLOWED or page.is_relative_to(EXAMPLES):
            continue
        blocks = re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)
        for language, body in blocks:
            body_lines = [line for line in body.splitlines() if line.strip()]
            from_file = body_lines and body_lines[0].startswith("--8<--")
            extra = [line for line in body_lines[1:] if not line.startswith("--8<--")]
            if language in allowed or (from_file and len(extra) <= 1):
                continue
            offenders.append(f"{page.relative_to(ROOT)}: ```{language}")
    assert not offenders, offenders
