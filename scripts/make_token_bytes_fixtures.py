#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/token_bytes.json: for a sample of token ids of each
tokenizer.json, the bytes (hex) the token adds in the middle of a decoded text, which
tests/unit/test_vocabulary_bytes.cpp compares with Tokenizer::vocabulary_bytes().

    scripts/make_token_bytes_fixtures.py [TESTDATA_DIR]

TESTDATA_DIR defaults to ../shared/testdata beside the repository root.

The bytes come from the vocabulary alone, independently of slabserve: byte-level tokenizers map
each character back through GPT-2's bytes_to_unicode() table, SentencePiece-style ones turn "▁"
into a space and a "<0xAB>" byte-fallback piece into its byte. Hugging Face `tokenizers` checks
every one: decoding [anchor, id] must give the anchor's text followed by the bytes (as U+FFFD
where they are not valid UTF-8). Special tokens add nothing (decoding skips them).
"""
import json
import lzma
import pathlib
import random
import re
import sys

import tokenizers

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "tokenizer" / "token_bytes.json"
TOKENIZERS = {
    "llama2": "tokenizers/llama2",
    "llama3.1": "tokenizers/llama3.1",
    "qwen3": "tokenizers/qwen3",
    "gemma3": "tokenizers/gemma3",
}
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def bytes_to_unicode():
    """GPT-2's byte alphabet (openai/gpt-2 encoder.py): byte -> printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_OF_CHAR = {c: b for b, c in bytes_to_unicode().items()}


def read_tokenizer_json(folder: pathlib.Path) -> str:
    if (folder / "tokenizer.json").exists():
        return (folder / "tokenizer.json").read_text()
    return lzma.decompress((folder / "tokenizer.json.xz").read_bytes()).decode()


def token_bytes(document: dict, special: set, token: str, token_id: int) -> bytes:
    if token_id in special:
        return b""
    decoder_types = json.dumps(document["decoder"], ensure_ascii=False)
    if '"ByteLevel"' in decoder_types:
        if all(c in BYTE_OF_CHAR for c in token):
            return bytes(BYTE_OF_CHAR[c] for c in token)
        return token.encode()
    assert '"ByteFallback"' in decoder_types and "\u2581" in decoder_types, decoder_types
    match = BYTE_PIECE.fullmatch(token)
    if match:
        return bytes([int(match.group(1), 16)])
    return token.replace("\u2581", " ").encode()


def sample_ids(vocab_size: int, special: set, all_bytes) -> list:
    rng = random.Random(20240601)
    ids = set(range(min(300, vocab_size)))
    ids |= set(rng.sample(range(vocab_size), 400))
    ids |= set(sorted(special)[:50])
    partial = [i for i, b in enumerate(all_bytes) if b is not None and not is_utf8(b)]
    ids |= set(rng.sample(partial, min(200, len(partial))))
    return sorted(i for i in ids if all_bytes[i] is not None)


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def main():
    testdata = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "testdata"
    out = {}
    for name, relative in TOKENIZERS.items():
        text = read_tokenizer_json(testdata / relative)
        document = json.loads(text)
        tokenizer = tokenizers.Tokenizer.from_str(text)
        special = {t["id"] for t in document["added_tokens"] if t["special"]}
        vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        all_bytes = []
        for token_id in range(vocab_size):
            token = tokenizer.id_to_token(token_id)
            all_bytes.append(None if token is None else token_bytes(document, special, token, token_id))
        anchor = tokenizer.encode("a", add_special_tokens=False).ids[-1]
        anchor_text = tokenizer.decode([anchor], skip_special_tokens=True)
        assert anchor_text == "a", anchor_text
        ids = sample_ids(vocab_size, special, all_bytes)
        for token_id in ids:
            decoded = tokenizer.decode([anchor, token_id], skip_special_tokens=True)
            expected = anchor_text + all_bytes[token_id].decode("utf-8", errors="replace")
            assert decoded == expected, (name, token_id, tokenizer.id_to_token(token_id), decoded, expected)
        out[name] = {"vocab_size": vocab_size, "bytes": {str(i): all_bytes[i].hex() for i in ids}}
        print(f"{name}: {len(ids)} ids", file=sys.stderr)
    OUT.write_text(json.dumps(out, indent=None, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
