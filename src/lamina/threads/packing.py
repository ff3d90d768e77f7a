"""How a stored A2A task's JSON is kept on disk: compressed (DEFLATE) with a preset dictionary
of what every task repeats (the Task's field names, states, the memory tools' results).

A task is mostly structure and repetition: the ids of the task and its context appear three
times each, a search result names the same fields for every hit. DEFLATE finds the
repetitions inside one task; the preset dictionary gives it the first occurrence of each. A
one-shot ``memory_search`` task of ten hits (8.6 kB of JSON) keeps about 1 kB.

The first byte names the format: ``FORMAT_1`` is raw DEFLATE with ``DICTIONARY_1``;
``FORMAT_2`` (``pack_with``) is raw DEFLATE with ``DICTIONARY_1`` followed by words the
reader knows apart (the ids of the row holding it: a thread kept in its task names them). A
stored task is read back with the dictionary it was written with, so that dictionary never
changes (``tests/threads/test_packing.py`` pins it); a better one is a new format byte.
"""

from __future__ import annotations

import zlib

FORMAT_1 = 1
FORMAT_2 = 2

# Least common first: DEFLATE reaches back 32 kB, and the nearer a match the fewer bits.
DICTIONARY_1 = (
    b'"auth-required""TASK_STATE_AUTH_REQUIRED""TASK_STATE_CANCELED""cancelled by the client"'
    b'"session_context":true"constraints_layer":{"layer":"project","layer_id":"'
    b'"constraints":[{"policy_id":"builtin-secrets","'
    b'{"mode":"search","note":"","memories":[],"knowledge":[{"id":"","type":"","title":"",'
    b'"summary":"","score":'
    b'"input_schema""read_only"'
    b'{"error":{"code":"INVALID_ARGUMENT","message":"","retryable":false,"details":{"field":"'
    b'"TASK_STATE_REJECTED""TASK_STATE_FAILED"'
    b'"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"'
    b' needs: . Reply in this task with a data part holding the missing arguments."'
    b'{"items":[],"total":0,"next_cursor":null}'
    b'"old_content":null,"new_content":null,"old_metadata":null,"new_metadata":null,'
    b'"operation":"add","actor":null,"at":"'
    b'{"memory_id":"","deleted":true}'
    b'"memory_delete""memory_update""memory_history""memory_list""memory_get""context_prompt"'
    b'"agent_id":"","session_id":"","project_id":"","team_id":"","org_id":"","company_id":"'
    b'"layer":"project""layer":"session""layer":"agent""layer":"team""layer":"org"'
    b'"layer":"company"'
    b'"below_threshold":0}'
    b'"parts":{"semantic":,"keyword":,"semantic_weight":0.5,"speaker":0,"conversation":0,'
    b'"phrase":0,"date":0}},'
    b'"valid_from":null,"valid_until":null,"expires_at":null,"violations":[],'
    b'"deduplicated":false,"facts":null},"score":0.,"semantic_score":1.,"keyword_score":0.'
    b'"embedding_generated":true,"embedding_model":"all-MiniLM-L6-v2-int8","event_at":"'
    b'{"results":[{"memory":{"id":"","tenant_id":"default","layer":"user",'
    b'"identifiers":{"user_id":""},"content":"","metadata":{},"created_at":"2026-01-01T00:00:00.'
    b'000000Z","updated_at":"'
    b'"history":[{"messageId":"","contextId":"","taskId":"","role":"ROLE_USER","parts":[{"data":'
    b'{"tool":"memory_search","arguments":{"query":"","user_id":"","limit":10}}}]}]}'
    b'"tool":"memory_add","arguments":{"content":"","layer":"user","user_id":"'
    b'"artifacts":[{"artifactId":"","name":"memory_search","parts":[{"data":'
    b'"mediaType":"application/json"}],"metadata":{"skill":"memory","tool":"memory_search"}}],'
    b'{"id":"","contextId":"","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"'
    b'","contextId":"","taskId":"","role":"ROLE_AGENT","parts":[{"text":"memory_search: done"}]},'
    b'"timestamp":"2026-01-01T00:00:00.000000Z"},'
)


def pack(text: str) -> bytes:
    """The task's JSON text, compressed (its first byte: the format)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zdict=DICTIONARY_1)
    return bytes((FORMAT_1,)) + compressor.compress(text.encode("utf-8")) + compressor.flush()


def pack_with(text: str, words: str) -> bytes:
    """``text`` compressed with ``words`` (which the reader must give ``unpack`` again)
    after the dictionary: what it repeats of them costs a few bits."""
    zdict = DICTIONARY_1 + words.encode("utf-8", "surrogatepass")
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zdict=zdict)
    return bytes((FORMAT_2,)) + compressor.compress(text.encode("utf-8")) + compressor.flush()


def unpack(data: bytes, words: str = "") -> str:
    """The text ``pack`` (or ``pack_with`` given these ``words``) wrote."""
    if not data or data[0] not in (FORMAT_1, FORMAT_2):
        raise ValueError(f"a stored task of an unknown format ({data[:1]!r})")
    zdict = DICTIONARY_1
    if data[0] == FORMAT_2:
        zdict += words.encode("utf-8", "surrogatepass")
    decompressor = zlib.decompressobj(-15, zdict=zdict)
    return (decompressor.decompress(data[1:]) + decompressor.flush()).decode("utf-8")


def stored_text(data: str, packed: bytes | None) -> str:
    """A task row's JSON: ``packed`` when set, else ``data`` (a row written before packing)."""
    return data if packed is None else unpack(bytes(packed))
