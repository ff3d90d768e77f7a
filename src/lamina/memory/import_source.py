"""Where an import's records come from: a file (or its lines, or the records themselves),
read as JSON Lines (one record a line: lamina's export) or, for mem0, also as one JSON
document. A JSON document given as lamina's format is refused saying what it holds and
which format reads it, not as a bad first line (docs/export.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lamina.checks import invalid
from lamina.errors import LaminaError
from lamina.memory.records import from_mem0, parse_line

__all__ = ["ImportSource", "reader"]

#: A source of records: a JSONL file's path, or the records (JSON text lines or objects).
ImportSource = str | os.PathLike[str] | Iterable[str | Mapping[str, Any]]
#: (line number, record object, line text or None) of each record of a source.
Records = Callable[[], Iterator[tuple[int, Any, str | None]]]


def reader(source: ImportSource, format: str) -> Records:
    """A function giving the (line number, record object, line text or None) of
    ``source``, afresh each call (an import reads its records twice: to check them, then
    to store them)."""
    lines: Callable[[], Iterable[str | Mapping[str, Any]]]
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise invalid(f"{path}: no such file", "source")
        lines = lambda: _file_lines(path)  # noqa: E731
        document = _document(_first_line(path), lambda: _file_text(path), str(path), format)
    else:
        given = list(source)
        lines = lambda: given  # noqa: E731
        texts = [t for t in given if isinstance(t, str)] if given else []
        first = next((t for t in texts if t.strip()), None)
        document = None
        if first is not None and len(texts) == len(given):
            document = _document(first, lambda: "".join(texts), "source", format)
    if document is not None:
        lines = lambda: document  # noqa: E731

    def read() -> Iterator[tuple[int, Any, str | None]]:
        for number, line in enumerate(lines(), start=1):
            raw = None
            if isinstance(line, str):
                if not line.strip():
                    continue
                data: Any = parse_line(line, number)
                raw = line
            elif isinstance(line, Mapping):
                data = dict(line)
            else:
                raise invalid(f"line {number}: a record must be a JSON object", line=number)
            yield number, from_mem0(data, number) if format == "mem0" else data, raw

    return read


def _file_lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8") as handle:
            yield from handle
    except UnicodeDecodeError as exc:
        raise invalid(f"{path}: not UTF-8 text ({exc.reason})", "source") from None


def _first_line(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                return line
    return ""


def _file_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"{path}: not UTF-8 text ({exc.reason})", "source") from None


def _document(
    first: str, whole: Callable[[], str], where: str, format: str
) -> list[Mapping[str, Any]] | None:
    """The records of a source that is one JSON document rather than JSON Lines: mem0's
    (a list, or ``{"results": [...]}``); for lamina's format, an INVALID_ARGUMENT saying
    what the document holds. None: JSON Lines (or text that is neither, whose lines are
    read and the first bad one named)."""
    try:
        value: Any = json.loads(first)
    except json.JSONDecodeError:
        try:
            value = json.loads(whole())
        except json.JSONDecodeError:
            return None  # not one document either: the line by line reading says where
    else:
        if not _is_document(value, format):
            return None  # the first record of JSON Lines
    items = value.get("results") if isinstance(value, dict) else value
    if format == "mem0":
        if not isinstance(items, list):
            raise invalid(f'{where}: a mem0 export is a list or {{"results": [...]}}', "source")
        return items
    raise _not_json_lines(value, items, where)


def _is_document(value: Any, format: str) -> bool:
    """Whether one line's JSON value is a whole document, not a record of JSON Lines."""
    if isinstance(value, list):
        return True
    wrapped = isinstance(value, dict) and isinstance(value.get("results"), list)
    return wrapped and (format == "mem0" or "content" not in value)


def _not_json_lines(value: Any, items: Any, where: str) -> LaminaError:
    """What a JSON document given as lamina's format holds, and how to import it."""
    records = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    if records and all("memory" in r and "content" not in r for r in records):
        return invalid(
            f"{where}: one JSON document holding {len(records)} mem0 memories, not lamina's "
            'JSON Lines: import it with format="mem0" (lamina memory import --format mem0)',
            "format",
            found="mem0",
        )
    if isinstance(value, dict) and not isinstance(value.get("results"), list):
        shape = "one JSON object over several lines"
    elif isinstance(items, list):
        shape = f"one JSON document holding a list of {len(items)} items"
    else:
        shape = "one JSON document"
    return invalid(
        f"{where}: {shape}, not JSON Lines: lamina's format is one record a line, as "
        "`lamina memory export` writes it (mem0's memories: --format mem0)",
        "format",
        found="json",
    )
