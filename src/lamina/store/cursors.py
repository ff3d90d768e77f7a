"""Opaque list cursors: the position (row sequence) after which the next page starts."""

from __future__ import annotations

import base64
import binascii
import json

from lamina.errors import ErrorCode, LaminaError


def encode_cursor(pk: int) -> str:
    """An opaque list cursor: the position (row sequence) after which the next page starts."""
    raw = json.dumps({"v": 1, "pk": pk}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        pk = data["pk"]
        if data.get("v") != 1 or not isinstance(pk, int) or pk < 0:
            raise ValueError
        return pk
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT, "invalid cursor: pass back a next_cursor from list"
        ) from None
