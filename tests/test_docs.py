"""The documentation cannot rot: every relative link in README.md and docs/*.md leads
to a file (and an anchor to a heading of it), and every code block that claims to run
runs, from a copy of the checkout.

What a fenced block's info string says:

- ```` ```python ````: executed, each block in a fresh namespace, the working directory a
  copy of the checkout (``scenes/``, ``agents/``, ``saves/``);
- ```` ```sh ````: every line is a ``manor`` command (``manor ...`` or ``python -m manor
  ...``, after optional ``VAR=value`` assignments, with a ``# comment`` after it), run
  through ``manor.cli.main`` in-process; it must exit 0. No pipes or other shell;
- ```` ```toml ````: parsed; ```` ```json ```` and ```` ```text ````: shown (any other
  language is refused, so that no example goes unrun by being written ```` ```bash ````);
- ``file=NAME`` after the language: the block is also written to that file, for the
  blocks after it on the page (a world's module, its scene, a ``manor.toml``);
- ``no-run``: a fragment, or a command too long or too interactive to run here
  (``play``, ``serve-agent``, ``bench``, Redis): shown, not run.

The blocks of a page run in order, in one folder of their own.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from manor.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
#: The copy of the checkout a page's examples run in.
CHECKOUT = ("scenes", "agents", "saves")

_FENCE = re.compile(r"^```(.*)$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_SHELL = re.compile(r"[|&;<>]|\$\(")
#: The languages a block may be in: one the runner knows, so that no example is left
#: unrun by being written ```bash.
LANGUAGES = frozenset({"python", "sh", "toml", "json", "text"})


@attrs.frozen
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # of the opening fence, from 1
    language: str
    runs: bool
    file: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order.

    Raises:
        AssertionError: a fence left open.
    """
    found: list[Block] = []
    opened: tuple[int, list[str]] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence:
                opened, body = (number, fence.group(1).split()), []
        elif fence and not fence.group(1).strip():
            start, info = opened
            language = info[0] if info else ""
            files = [word.removeprefix("file=") for word in info[1:] if word.startswith("file=")]
            found.append(Block(page, start, language, "no-run" not in info[1:], files[0] if files else None, "\n".join(body) + "\n"))
            opened = None
        else:
            body.append(line)
    assert opened is None, f"{page.relative_to(ROOT)}:{opened[0]}: a code block is never closed"
    return found


def prose(page: Path) -> str:
    """``page`` without its code blocks and inline code: where its links are."""
    lines, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            inside = not inside
        elif not inside:
            lines.append(_INLINE_CODE.sub("", line))
    return "\n".join(lines)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of ``page``'s headings: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces made hyphens; a repeated one numbered."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if inside or not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def manor_command(line: str) -> tuple[dict[str, str], list[str]] | None:
    """A runnable block's line as (environment, manor's arguments); ``None`` for a blank
    or comment line.

    Raises:
        AssertionError: the line is not a plain manor command.
    """
    words = shlex.split(line, comments=True)
    if not words:
        return None
    environment = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        environment[name] = value
    for prefix in (["manor"], ["python", "-m", "manor"], ["python3", "-m", "manor"]):
        if words[: len(prefix)] == prefix:
            arguments = words[len(prefix) :]
            break
    else:
        raise AssertionError(f"not a manor command (mark the block no-run if it is not meant to run here): {line}")
    shell = [word for word in arguments if _SHELL.search(word)]
    assert not shell, f"shell syntax in a command the tests run through the CLI ({shell[0]!r}): {line}"
    return environment, arguments


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the checkout's content as the working directory, with no ``MANOR_*``
    variables, and Python's import state restored afterwards (a page may import a world
    of its own)."""
    for name in CHECKOUT:
        shutil.copytree(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("MANOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    modules = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules:
        if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def run_block(block: Block, folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Write ``block`` to its file, if it names one, and run it if it runs.

    Raises:
        AssertionError: naming the block, when it fails.
    """
    assert block.language in LANGUAGES, f"{block.where}: a block in {block.language or 'no language'!r}: write one of {sorted(LANGUAGES)}"
    if block.file:
        (folder / block.file).write_text(block.text, encoding="utf-8")
    if block.language == "toml":
        try:
            tomllib.loads(block.text)
        except tomllib.TOMLDecodeError as exc:
            raise AssertionError(f"{block.where}: not TOML: {exc}") from None
    if not block.runs:
        return
    if block.language == "python":
        code = compile(block.text, block.where, "exec")
        exec(code, {"__name__": "__docs__"})  # noqa: S102 - the docs' own examples; a traceback names the block
        capsys.readouterr()
    elif block.language == "sh":
        for offset, line in enumerate(block.text.splitlines(), 1):
            command = manor_command(line)
            if command is None:
                continue
            environment, arguments = command
            with monkeypatch.context() as patch:
                for name, value in environment.items():
                    patch.setenv(name, value)
                status = main(arguments)
            output = capsys.readouterr()
            assert status == 0, f"{block.where} (+{offset}): `{line.strip()}` exited {status}: {output.err.strip()[-500:]}"


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_example_runs(page: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The page's blocks, run in order in a copy of the checkout."""
    for block in blocks(page):
        run_block(block, checkout, monkeypatch, capsys)


def broken_links(page: Path, root: Path) -> list[str]:
    """The relative links of ``page`` that name no file under ``root``, or an anchor
    that is no heading of the file they name."""
    broken = []
    for target in _LINK.findall(prose(page)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or not linked.is_relative_to(root):
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(root)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    """A relative link names a file of the checkout; its anchor, a heading of that file."""
    assert broken_links(page, ROOT) == []


def test_every_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _LINK.findall(prose(README))}
    assert [page.name for page in PAGES[1:] if page not in linked] == []


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    """Install-and-play and install-and-test, one line each, before anything else; CI
    runs the very test command a newcomer is given."""
    first = blocks(README)[0]
    commands = first.text.splitlines()
    assert first.line <= 6 and len(commands) == 2
    assert all(command.startswith("python3 -m venv .venv && ") for command in commands)
    assert commands[0].endswith("-m manor play") and commands[1].endswith("-m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250


class TestTheRunner:
    """The runner refuses what it cannot run, rather than skipping it."""

    def test_a_command_that_is_not_manor_fails(self) -> None:
        with pytest.raises(AssertionError, match="not a manor command"):
            manor_command("apt-get install -y redis-server")

    def test_shell_syntax_fails(self) -> None:
        with pytest.raises(AssertionError, match="shell syntax"):
            manor_command("manor story saves/x.msav --format jsonl | head -3")

    def test_environment_comment_and_prefix(self) -> None:
        assert manor_command("MANOR_SIM_INVALID_RATE=0.3 python -m manor run --ticks 1   # note") == (
            {"MANOR_SIM_INVALID_RATE": "0.3"},
            ["run", "--ticks", "1"],
        )
        assert manor_command("   # only a comment") is None

    def test_links_are_checked_to_the_heading(self, tmp_path: Path) -> None:
        (tmp_path / "a.md").write_text("# A page\n\n## The `gate`, on Redis\n", encoding="utf-8")
        page = tmp_path / "b.md"
        page.write_text(
            "[ok](a.md#the-gate-on-redis) [gone](DESIGN.md) [no heading](a.md#gate) [web](https://x.org/y.md)\n"
            "`[in code](nowhere.md)`\n```text\n[in a block](nowhere.md)\n```\n",
            encoding="utf-8",
        )
        assert broken_links(page, tmp_path) == ["DESIGN.md: no such file", "a.md#gate: no heading #gate in a.md"]

    def test_blocks_read_their_marks(self, tmp_path: Path) -> None:
        page = tmp_path / "page.md"
        page.write_text("text\n```sh no-run\nmanor play\n```\n\n```toml file=manor.toml\n[gate]\n```\n", encoding="utf-8")
        found = blocks(page)
        assert [(b.language, b.runs, b.file, b.text) for b in found] == [
            ("sh", False, None, "manor play\n"),
            ("toml", True, "manor.toml", "[gate]\n"),
        ]
