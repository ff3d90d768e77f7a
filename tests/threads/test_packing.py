"""How a stored task's JSON is kept on disk (lamina.threads.packing): compressed with a
preset dictionary that never changes for its format byte."""

from __future__ import annotations

import hashlib
import json
import zlib

import pytest

from lamina.threads import packing
from lamina.threads.packing import FORMAT_1, FORMAT_2, pack, pack_with, stored_text, unpack


def test_the_format_1_dictionary_never_changes() -> None:
    """Tasks stored with format 1 are read with this dictionary: a better one needs a new
    format byte, never an edit."""
    digest = hashlib.sha256(packing.DICTIONARY_1).hexdigest()
    assert digest == PINNED


PINNED = "660dd99a968f37c9a0fc22e55a043b636a990af5c29ddcdd8ba0a9953efc393b"


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        json.dumps({"id": "t", "history": [{"parts": [{"text": "héllo \u2603 \U0001f600"}]}]}),
        json.dumps({"artifacts": [{"parts": [{"data": {"x": "y" * 50_000}}]}]}),
    ],
)
def test_pack_and_unpack_give_the_text_back(text: str) -> None:
    packed = pack(text)
    assert packed[0] == FORMAT_1
    assert unpack(packed) == text
    assert stored_text("", packed) == text
    assert stored_text(text, None) == text


def test_a_search_task_keeps_a_fraction_of_its_json() -> None:
    hit = {
        "memory": {
            "id": "ed5731d2-96b0-45a0-93d9-1a9e675cd509",
            "tenant_id": "default",
            "layer": "user",
            "identifiers": {"user_id": "bench"},
            "content": "Mateo dislikes the PostgreSQL cluster before the Friday release",
            "metadata": {},
        },
        "score": 0.9161102362394531,
    }
    text = json.dumps({"artifacts": [{"parts": [{"data": {"results": [hit] * 10}}]}]})
    assert len(pack(text)) * 5 < len(text)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        unpack(b"\x07abc")


def test_format_2_is_read_back_with_the_words_it_was_packed_with() -> None:
    """``pack_with``: the dictionary followed by words the reader gives again (a thread kept
    in its task is packed against the ids it names)."""
    words = '{"task":"t-1","contextId":"c-1"'
    text = json.dumps({"turns": [{"task": "t-1", "arguments": {"q": "héllo"}}]})
    packed = pack_with(text, words)
    assert packed[0] == FORMAT_2 and unpack(packed, words) == text
    assert len(packed) < len(pack(text))
    try:  # other words read back something else, or nothing
        other = unpack(packed, '{"task":"t-2","contextId":"c-2"')
    except (zlib.error, UnicodeDecodeError):
        other = None
    assert other != text
