#!/usr/bin/env python3
"""Writes the expected tokenizer outputs that tests/unit/test_tokenizer.cpp checks against.

    scripts/make_tokenizer_fixtures.py [TESTDATA_DIR]

TESTDATA_DIR defaults to ../shared/testdata beside the repository root. Reads
tests/fixtures/tokenizer/corpus.json (a list of strings) and writes one
tests/fixtures/tokenizer/<name>.json per tokenizer.

References:
  tokenizer.json   Hugging Face `tokenizers` running the file as written (the fast tokenizer that
                   transformers' AutoTokenizer wraps). AutoTokenizer is run too; where it disagrees
                   the case is listed under "autotokenizer_disagrees" (transformers 5 rebuilds the
                   Llama pipeline from its class instead of the file's normalizer).
  tokenizer.model  sentencepiece itself. Special-token text (control and unknown pieces: <s>, </s>,
                   <unk>) is split out first and each remaining segment is encoded on its own, as
                   transformers' LlamaTokenizer (legacy) does; BOS/EOS per tokenizer_config.json.
                   Decoding keeps special pieces as their text (unless skipped) and decodes the runs
                   between them with sentencepiece.
"""
import json
import lzma
import pathlib
import shutil
import sys
import tempfile

import sentencepiece
import tokenizers
from transformers import AutoTokenizer

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "tests" / "fixtures" / "tokenizer"

# name -> (folder under testdata, which file is the reference)
TOKENIZERS = {
    "llama2": ("tokenizers/llama2", "json"),
    "llama2_spm": ("tokenizers/llama2", "model"),
    "llama3.1": ("tokenizers/llama3.1", "json"),
    "qwen3": ("tokenizers/qwen3", "json"),
    "gemma3": ("tokenizers/gemma3", "json"),
    "stories260K": ("models/stories260K", "model"),
}


def read_maybe_xz(folder: pathlib.Path, name: str):
    """Bytes of folder/name or folder/name.xz decompressed; None when neither exists."""
    if (folder / name).exists():
        return (folder / name).read_bytes()
    if (folder / (name + ".xz")).exists():
        return lzma.decompress((folder / (name + ".xz")).read_bytes())
    return None


def json_cases(folder: pathlib.Path, corpus):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="slab-tok-"))
    try:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            data = read_maybe_xz(folder, name)
            if data is not None:
                (tmp / name).write_bytes(data)
        raw = tokenizers.Tokenizer.from_file(str(tmp / "tokenizer.json"))
        auto = AutoTokenizer.from_pretrained(str(tmp), use_fast=True)
        cases, disagree = [], []
        for i, text in enumerate(corpus):
            ids = raw.encode(text, add_special_tokens=True).ids
            ids_plain = raw.encode(text, add_special_tokens=False).ids
            auto_ids = auto(text, add_special_tokens=True)["input_ids"]
            auto_plain = auto(text, add_special_tokens=False)["input_ids"]
            if auto_ids != ids or auto_plain != ids_plain:
                disagree.append(i)
            decoded = raw.decode(ids, skip_special_tokens=False)
            decoded_skip = raw.decode(ids, skip_special_tokens=True)
            assert decoded == auto.decode(ids, skip_special_tokens=False), (i, text)
            assert decoded_skip == auto.decode(ids, skip_special_tokens=True), (i, text)
            cases.append(dict(text=text, ids=ids, ids_no_special=ids_plain,
                              decoded=decoded, decoded_skip_special=decoded_skip))
        return cases, disagree
    finally:
        shutil.rmtree(tmp)


def spm_cases(folder: pathlib.Path, corpus):
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    config = json.loads(read_maybe_xz(folder, "tokenizer_config.json") or b"{}")
    add_bos = bool(config.get("add_bos_token", True))
    add_eos = bool(config.get("add_eos_token", False))
    special = {i for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)}
    special_text = sorted((sp.id_to_piece(i) for i in special), key=len, reverse=True)

    def encode(text, add_special):
        ids, pos, segment = [], 0, ""
        while pos < len(text):
            hit = next((s for s in special_text if text.startswith(s, pos)), None)
            if hit is None:
                segment += text[pos]
                pos += 1
                continue
            if segment:
                ids += sp.encode(segment)
                segment = ""
            ids.append(sp.piece_to_id(hit))
            pos += len(hit)
        if segment:
            ids += sp.encode(segment)
        if add_special:
            ids = ([sp.bos_id()] if add_bos else []) + ids + ([sp.eos_id()] if add_eos else [])
        return ids

    def decode(ids, skip_special):
        if skip_special:
            return sp.decode([i for i in ids if i not in special])
        out, run = "", []
        for i in ids:
            if i in special:
                out += sp.decode(run) + sp.id_to_piece(i)
                run = []
            else:
                run.append(i)
        return out + sp.decode(run)

    cases = []
    for text in corpus:
        ids = encode(text, True)
        cases.append(dict(text=text, ids=ids, ids_no_special=encode(text, False),
                          decoded=decode(ids, False), decoded_skip_special=decode(ids, True)))
    return cases, []


def main():
    testdata = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "testdata"
    corpus = json.loads((OUT_DIR / "corpus.json").read_text(encoding="utf-8"))
    for name, (relative, kind) in TOKENIZERS.items():
        folder = testdata / relative
        cases, disagree = (json_cases if kind == "json" else spm_cases)(folder, corpus)
        fixture = {
            "source": relative,
            "file": "tokenizer.json" if kind == "json" else "tokenizer.model",
            "reference": (f"tokenizers {tokenizers.__version__}" if kind == "json"
                          else f"sentencepiece {sentencepiece.__version__}"),
            "autotokenizer_disagrees": disagree,
            "cases": cases,
        }
        out = OUT_DIR / f"{name}.json"
        out.write_text(json.dumps(fixture, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n",
                       encoding="utf-8")
        print(f"{out.relative_to(REPO)}: {len(cases)} cases, AutoTokenizer disagrees on {len(disagree)}")


if __name__ == "__main__":
    main()
