"""The documentation holds: README.md and docs/*.md link only to files and headings that exist, every
`vlcheck ...` command they show in a shell code block parses with vlcheck's own argparse parser
(a flag that does not exist fails here), and the README stays one screen.

Links: every relative Markdown link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`) outside
code; the file must exist, and an anchor must be a heading of the target, slugged as GitHub does.
Commands: the lines of fenced blocks tagged bash/sh/shell/console (or untagged) whose program is
`vlcheck`, `<path>/vlcheck` or `python -m vlcheck.cli`, after joining `\\` continuations,
dropping comments, splitting at `&&`, `||`, `;` and `|`, and skipping `VAR=value` prefixes; the
command after `vlcheck env ... --` is parsed too. Parsed only: nothing runs.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from vlcheck.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
SHELL = {"", "bash", "sh", "shell", "console", "zsh"}

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*\n(.*?)^\1\2[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {"&&", "||", ";", "|", "&", "|&"}
_REDIRECTS = {">", ">>", "<", "2>", "2>>", "&>"}


def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return [(m.group(3).lower(), m.group(4)) for m in _FENCE.finditer(text)]


def prose(text: str) -> str:
    """The text outside fenced blocks and inline code (links and headings there are not links and headings)."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without Markdown, lowercased, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", path.read_text())):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    problems = []
    for m in _LINK.finditer(prose(path.read_text())):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: {doc_id(dest)} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading '#{anchor}' in {doc_id(dest)}")
    return problems


def shell_commands(text: str) -> list[str]:
    """Each shell line of the shell code blocks, continuations joined."""
    lines = []
    for language, body in code_blocks(text):
        if language not in SHELL:
            continue
        for line in re.sub(r"\\\n", " ", body).splitlines():
            if line.strip():
                lines.append(line.strip().removeprefix("$ "))
    return lines


def vlcheck_argvs(line: str) -> list[list[str]]:
    """The vlcheck argument lists of one shell line (none when it runs no vlcheck)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError as err:  # an unclosed quote
        return [["<unparsable shell line>", str(err)]]
    segments, current = [], []
    for token in tokens:
        if token in _OPERATORS:
            segments.append(current)
            current = []
        else:
            current.append(token)
    segments.append(current)
    argvs = []
    for words in segments:
        words = [w for i, w in enumerate(words) if w not in _REDIRECTS and (i == 0 or words[i - 1] not in _REDIRECTS)]
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            continue
        if words[0] == "vlcheck" or words[0].endswith("/vlcheck"):
            argvs.append(words[1:])
        elif re.search(r"(^|/)python[\d.]*$", words[0]) and words[1:3] == ["-m", "vlcheck.cli"]:
            argvs.append(words[3:])
    return argvs


def parse_error(argv: list[str]) -> str | None:
    """argparse's complaint about `vlcheck ARGV`, or None when it parses (and, for `env ... --
    COMMAND`, COMMAND parses too)."""
    if argv[:1] == ["<unparsable shell line>"]:
        return argv[1]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as stop:
        if stop.code not in (0, None):  # --help and --version exit 0
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {stop.code}"
    if argv[:1] == ["env"] and "--" in argv and argv[argv.index("--") + 1:]:
        inner = parse_error(argv[argv.index("--") + 1:])
        if inner:
            return f"the command after `--`: {inner}"
    return None


def bad_commands(text: str) -> list[str]:
    return [f"vlcheck {shlex.join(argv)}: {problem}"
            for line in shell_commands(text) for argv in vlcheck_argvs(line)
            if (problem := parse_error(argv))]


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_every_relative_link_resolves(path):
    problems = broken_links(path)
    assert not problems, f"{doc_id(path)}: broken links:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_every_vlcheck_command_shown_parses(path):
    problems = bad_commands(path.read_text())
    assert not problems, f"{doc_id(path)}: commands vlcheck's parser rejects:\n  " + "\n  ".join(problems)


def test_the_readme_is_one_screen():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES}: move detail into docs/"


def test_the_readme_shows_the_gate_and_the_tests_command():
    """CI runs "the README's test command"; the gate's three steps are the README's job."""
    shown = shell_commands(README.read_text())
    assert 'pytest -m "not gpu" -n auto' in {line.split("#", 1)[0].strip() for line in shown}
    programs = {argv[0] for line in shown for argv in vlcheck_argvs(line) if argv}
    assert {"check", "env", "diff"} <= programs, programs


def test_the_checks_themselves_catch_a_bad_flag_and_a_broken_link(tmp_path):
    """The helpers above find what they are for (a check that finds nothing passes for nothing)."""
    doc = ("```bash\n"
           "vlcheck check --json a.json --no-such-flag   # a flag that does not exist\n"
           "VLCHECK_SPEC_PATH=specs vlcheck diff a.json b.json && .venv/bin/vlcheck list | head\n"
           "vlcheck env --vllm 0.28.0 -- \\\n  check --nope\n"
           "python -m vlcheck.cli nosuchcommand\n"
           "pytest -m gpu --whatever    # not vlcheck: not parsed\n"
           "```\n"
           "```text\nvlcheck check --not-parsed-in-output\n```\n")
    problems = bad_commands(doc)
    assert len(problems) == 3, problems
    assert "--no-such-flag" in problems[0] and "the command after `--`" in problems[1] and "nosuchcommand" in problems[2]
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: yes\n")
    page.write_text("[ok](other.md#a-code-heading-yes) [self](#title) [gone](missing.md) [bad](other.md#nope) "
                    "[web](https://example.com) `[code](not-a-link.md)`\n\n# Title\n")
    assert [p.split(":")[0] for p in broken_links(page)] == ["missing.md", "other.md#nope"]
