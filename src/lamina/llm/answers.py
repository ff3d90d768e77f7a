"""Reading JSON out of a chat model's answer, leniently where that is safe: code fences,
prose around the JSON, a top-level array instead of an object, and (for lists whose items
stand alone) the complete items of an answer cut short."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_DECODER = json.JSONDecoder()


def _candidates(raw: str) -> list[str]:
    text = raw.strip()
    found = [m.group(1).strip() for m in _FENCE.finditer(text)]
    return [*found, text]


def parse_json(raw: str) -> Any:
    """The first JSON object or array in ``raw`` (inside a code fence, or after some prose);
    ValueError when there is none."""
    for text in _candidates(raw):
        try:
            return json.loads(text)
        except ValueError:
            pass
        for start, char in enumerate(text):
            if char in "{[":
                try:
                    return _DECODER.raw_decode(text, start)[0]
                except ValueError:
                    continue
    raise ValueError("no JSON object or array in the answer")


def parse_json_object(raw: str) -> dict[str, Any] | None:
    """The answer's JSON object, or None when it holds none."""
    try:
        found = parse_json(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def salvage_items(raw: str, key: str) -> list[Any]:
    """The complete items of the array under ``key`` in an answer that was cut short
    (``{"facts": ["a", "b", "c`` gives ``["a", "b"]``); [] when there is no such array."""
    for text in _candidates(raw):
        match = re.search(r'"' + re.escape(key) + r'"\s*:\s*\[', text)
        if match is None:
            continue
        items: list[Any] = []
        at = match.end()
        while True:
            while at < len(text) and text[at] in " \t\r\n,":
                at += 1
            if at >= len(text) or text[at] == "]":
                return items
            try:
                item, at = _DECODER.raw_decode(text, at)
            except ValueError:
                return items
            items.append(item)
    return []
