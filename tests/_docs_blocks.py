"""The code blocks of the README and the docs pages, as a reader meets them.

A page's blocks are read in order. Each is a :class:`Block` with its language:

- ``python``: run in one namespace per page (one fresh process per page);
- ``bash``: run by bash line by line as a script; ``console``: the lines after ``$`` are the
  commands, the others their output;
- ``toml``: a file; written under the name given by a ``didmem-docs: file NAME`` comment
  before it, else only parsed;
- ``text`` (and a bare ``::`` block that does not look like code): output, not run.

A comment just before a block says what the test does with it, in the source only (an RST
comment ``.. didmem-docs: ...`` or, in Markdown, ``<!-- didmem-docs: ... -->``):

- ``didmem-docs: skip gpu|hub|data REASON``: not run here, and why (a GPU, the network, or
  files this machine does not have);
- ``didmem-docs: file NAME``: the toml block is that file (the prose says so too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "read_blocks", "looks_like_code", "console_commands", "shell_script",
           "SKIP_KINDS"]

#: The reasons a block may be skipped for: what this machine or a test run does not have.
SKIP_KINDS = ("gpu", "hub", "data")

_DIRECTIVE = re.compile(r"^\s*(?:\.\. |<!-- )didmem-docs:\s*(.*?)\s*(?:-->)?\s*$")
_CODE_START = re.compile(
    r"^(import |from \w|didmem |python |pip |\$ |[A-Za-z_][\w.\[\]\"']*\s*=[^=]|"
    r"[A-Za-z_][\w.]*\(|print\(|#!)"
)


@dataclass(frozen=True)
class Block:
    """One code block of a page."""

    page: str
    line: int
    lang: str
    code: str
    skip: str | None = None   # "gpu: reason", "hub: reason", "data: reason"
    file: str | None = None   # the name a toml block is saved under

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def looks_like_code(code: str) -> bool:
    """Whether a bare literal block starts like a command or Python rather than output."""
    first = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return bool(_CODE_START.match(first))


def _dedent(lines: list) -> str:
    body = [ln for ln in lines]
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    indent = min((len(ln) - len(ln.lstrip()) for ln in body if ln.strip()), default=0)
    return "\n".join(ln[indent:] for ln in body) + "\n"


def _options(directive: str | None, page: str, line: int) -> dict:
    if directive is None:
        return {}
    head, _, rest = directive.partition(" ")
    if head == "skip":
        kind = rest.split(":", 1)[0].split(" ", 1)[0]
        if kind not in SKIP_KINDS or len(rest.split(None, 1)) < 2:
            raise ValueError(f"{page}:{line}: 'didmem-docs: skip' takes one of {SKIP_KINDS} "
                             f"and a reason; got {directive!r}")
        return {"skip": rest}
    if head == "file" and rest:
        return {"file": rest.strip()}
    raise ValueError(f"{page}:{line}: unknown 'didmem-docs:' comment {directive!r}")


def _rst_blocks(page: str, lines: list) -> list:
    blocks, pending, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        m = _DIRECTIVE.match(line)
        if m:
            pending = (m.group(1), i + 1)
            i += 1
            continue
        code = re.match(r"^(\s*)\.\. code-block::\s*(\S+)\s*$", line)
        bare = (line.rstrip().endswith("::") and not line.lstrip().startswith("..")
                and line.strip() != "")
        if not (code or bare):
            if line.strip() and pending is not None and not line.lstrip().startswith(".."):
                raise ValueError(f"{page}:{pending[1]}: a 'didmem-docs:' comment must stand "
                                 "just before a code block")
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        j, body = i + 1, []
        while j < len(lines) and lines[j].lstrip().startswith(":") and code:
            j += 1  # directive options (:caption: ...)
        while j < len(lines) and (not lines[j].strip()
                                  or len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j])
            j += 1
        text = _dedent(body)
        lang = code.group(2) if code else "literal"
        options = _options(pending[0], page, pending[1]) if pending else {}
        if text.strip():
            blocks.append(Block(page, i + 1, lang, text, **options))
        pending = None
        i = j
    return blocks


def _markdown_blocks(page: str, lines: list) -> list:
    blocks, pending, i = [], None, 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if m:
            pending = (m.group(1), i + 1)
            i += 1
            continue
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            if lines[i].strip() and pending is not None:
                raise ValueError(f"{page}:{pending[1]}: a 'didmem-docs:' comment must stand "
                                 "just before a code block")
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        options = _options(pending[0], page, pending[1]) if pending else {}
        blocks.append(Block(page, i + 1, fence.group(1) or "literal",
                            "\n".join(lines[i + 1:j]) + "\n", **options))
        pending = None
        i = j + 1
    return blocks


def read_blocks(path: Path, root: Path) -> list:
    """Every code block of the page at ``path`` (README.md or a docs .rst), in order."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".md":
        return _markdown_blocks(page, lines)
    return _rst_blocks(page, lines)


def console_commands(code: str) -> str:
    """The commands of a ``console`` block (``$ cmd``, continued by a trailing backslash)."""
    out, going = [], False
    for line in code.splitlines():
        if line.startswith("$ "):
            out.append(line[2:])
            going = line.rstrip().endswith("\\")
        elif going:
            out.append(line)
            going = line.rstrip().endswith("\\")
    return "\n".join(out) + "\n"


def shell_script(code: str) -> str:
    """A bash block as the test runs it, in the environment the test suite has installed.

    ``pip install ... &&`` in front of a command is dropped (the packages are installed), a
    line that only installs is left out, and so is ``python -m pytest`` (the test suite, which
    is running this test).
    """
    out = []
    for line in code.splitlines():
        stripped = re.sub(r"^\s*pip install [^&#]*&&\s*", "", line)
        if re.match(r"^\s*pip install ", stripped) or re.match(r"^\s*python -m pytest\b",
                                                                  stripped):
            out.append(f"# (not run by the docs test) {line}")
            continue
        out.append(stripped)
    return "\n".join(out) + "\n"
