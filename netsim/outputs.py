"""Output paths and files: checked before anything runs, written with the user's file mode.

A command that writes results checks its output paths first (:func:`dir_problems`,
:func:`file_problems`, :func:`replace_problems`), so a wrong ``--out`` fails in a second with
exit code 2, not after the whole simulation, and never replaces a file netsim did not write. Files written through a temporary file and a rename get the mode a plain
``open()`` would have given them (0666 less the umask, :func:`user_mode`), not the temporary
file's 0600, so a shared results folder stays readable to collaborators.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from netsim.scenario.errors import Problem


def user_mode() -> int:
    """The mode a new file gets from ``open()``: 0o666 less this process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def dir_problems(path: str | Path, flag: str = "--out") -> list[Problem]:
    """Why ``path`` cannot be (or become) a folder to write into; empty when it can."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return [Problem(flag, f"{str(path)!r} exists and is not a folder (give a folder path)")]
    base = _nearest_existing(p)
    if not base.is_dir():
        return [Problem(flag, f"{str(path)!r} cannot be created: {str(base)!r} is a file")]
    if not os.access(base, os.W_OK | os.X_OK):
        return [Problem(flag, f"{str(path)!r}: no permission to write in {str(base)!r}")]
    return []


def file_problems(path: str | Path, flag: str = "--out") -> list[Problem]:
    """Why a file cannot be written at ``path``; empty when it can."""
    p = Path(path)
    if p.is_dir():
        return [Problem(flag, f"{str(path)!r} is a folder; expected a file path")]
    if p.exists() and not os.access(p, os.W_OK):
        return [Problem(flag, f"{str(path)!r}: no permission to replace it")]
    return [Problem(flag, q.message) for q in dir_problems(p.parent or Path("."), flag)]


def head_text(path: str | Path, size: int = 65536) -> str:
    """The first ``size`` bytes of a file as text (undecodable bytes replaced); ``""`` when it
    cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""


def replace_problems(path: str | Path, is_own: Callable[[Path], bool], what: str,
                     flag: str = "--out") -> list[Problem]:
    """:func:`file_problems`, and more: an existing file at ``path`` that ``is_own`` does not
    recognise as one netsim wrote (``what``: "netsim report") is refused, so that an output
    path never replaces a user's own file, as an output folder never replaces a file (see
    :func:`dir_problems`). Empty when ``path`` can be written."""
    problems = file_problems(path, flag)
    p = Path(path)
    if not problems and p.exists() and not is_own(p):
        problems.append(Problem(flag, f"{str(path)!r} exists and is not a {what}; netsim "
                                      "replaces only its own (give a new file name, or remove "
                                      "that file first)"))
    return problems


def write_atomic(path: str | Path, write: Callable[[str], object], suffix: str = ".tmp") -> None:
    """Write a file through ``write(temporary_path)`` and a rename (atomic on POSIX), with
    the user's normal file mode; the temporary file is removed on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, user_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
