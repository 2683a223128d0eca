"""A griffe extension for the API page (mkdocs.yml): netsim's docstrings write their
``Parameters`` and ``Attributes`` sections as ``name: description`` lines (or ``a: ...; b: ...``
in one paragraph), which the numpy parser would read as ``name : type`` and drop the
description. This rewrites such entries to the numpy form (``name`` then the indented
description) before griffe parses them, and moves a sentence that follows the entries before
the section (a numpy section runs to the next one); the code's docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

SECTIONS = {"Parameters", "Attributes", "Other Parameters"}
ENTRY = re.compile(r"^(?P<names>\**[A-Za-z_]\w*(?:,\s*\**[A-Za-z_]\w*)*):\s+(?P<text>.*)$")
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")
SPLIT = re.compile(r";\s+(?=\**[A-Za-z_]\w*(?:,\s*[A-Za-z_]\w*)*:\s)")


def _is_header(lines: list[str], i: int) -> bool:
    return (i + 1 < len(lines) and lines[i].strip() != ""
            and set(lines[i + 1].strip()) == {"-"} and not lines[i].startswith(" "))


def _entries(body: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(names, description) of each entry of a section body, and the prose after them."""
    entries: list[list[str]] = []
    rest: list[str] = []
    blank = False
    for k, line in enumerate(body):
        if not line.strip():
            blank = True
            continue
        top = not line.startswith(" ")
        if top and ENTRY.match(line):
            entries.append([line.strip()])
        elif entries and not (top and (blank or entries[-1][-1].endswith("."))):
            # an indented line, or an unindented one inside an unfinished sentence, goes on
            # with the entry; an unindented sentence after a finished one is prose
            entries[-1].append(line.strip())
        else:
            rest = body[k:]
            break
        blank = False
    out = []
    for entry in entries:
        for part in SPLIT.split(" ".join(entry)):
            m = ENTRY.match(part.strip())
            if m:
                out.append((m["names"], m["text"].strip()))
            elif out:
                out[-1] = (out[-1][0], f"{out[-1][1]} {part.strip()}")
    return out, rest


def _listing(paragraph: list[str]) -> list[tuple[str, str]] | None:
    """The entries of a paragraph that is nothing but ``name: description`` entries (two or
    more), else None."""
    if not paragraph or not ENTRY.match(paragraph[0]):
        return None
    entries, rest = _entries(paragraph)
    return entries if len(entries) >= 2 and not rest else None


def _sections_from_listings(lines: list[str], section: str) -> list[str]:
    """Paragraphs after the summary that only list ``name: description`` entries (a class's
    attributes, a function's parameters, written without a header) become a section."""
    out: list[str] = []
    paragraph: list[str] = []
    done = False  # once a section header is met, leave the rest as written
    for k, line in enumerate([*lines, ""]):
        if not done and _is_header(lines, k):
            done = True
        if done or line.strip():
            if done:
                out += paragraph
                paragraph = []
                if k < len(lines):
                    out.append(line)
            else:
                paragraph.append(line)
            continue
        found = _listing(paragraph) if out else None
        if found:
            out += [section, "-" * len(section)]
            for names, desc in found:
                out += [names, f"    {desc}"]
        else:
            out += paragraph
        if k < len(lines):
            out.append(line)
        paragraph = []
    return out


def rewrite(text: str, kind: str = "") -> str:
    """The docstring with its ``name: description`` sections in numpy form; for a class
    (``kind`` "class") or a function, a header-less listing becomes its Attributes or
    Parameters section."""
    lines = text.splitlines()
    if kind in ("class", "function"):
        lines = _sections_from_listings(lines, "Attributes" if kind == "class" else "Parameters")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _is_header(lines, i) and lines[i].strip() in SECTIONS:
            j = i + 2
            while j < len(lines) and not _is_header(lines, j):
                j += 1
            body = lines[i + 2:j]
            entries, rest = _entries(body)
            if not entries:  # not of this form: leave the section as written
                out += lines[i:j]
            else:
                if rest:  # (a numpy section runs to the next one: prose goes before it)
                    out += rest + [""]
                out += [lines[i], lines[i + 1]]
                for names, desc in entries:
                    out += [names, f"    {desc}"]
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


class NetsimDocstrings(griffe.Extension):
    """Rewrite each object's docstring before it is parsed (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:  # (Sphinx roles such as :func:`x` read as `x`)
            obj.docstring.value = ROLE.sub(r"`\1`", rewrite(obj.docstring.value, obj.kind.value))
