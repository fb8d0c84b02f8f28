#!/usr/bin/env python3
"""Render slabserve's built-in chat templates with Python jinja2, for tests/fixtures/chat/builtin.json.

The templates' sources are read from src/chat/builtin_templates.cpp (each between R"jinja( and
)jinja"), so the fixture always renders what the binary holds. Every conversation of
make_chat_template_fixtures.py that has no tools is rendered with and without
add_generation_prompt, in the same environment and with the same transformers conventions as the
real templates' fixtures, with generic special tokens. The C++ test compares its own rendering
with these, and separately with the real family templates' fixtures (expected/*.json).
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_chat_template_fixtures as real  # noqa: E402  (same directory)

SOURCE = real.REPO / "src" / "chat" / "builtin_templates.cpp"
OUT = real.OUT / "builtin.json"


def builtin_sources():
    text = SOURCE.read_text(encoding="utf-8")
    found = re.findall(r'\{"(\w+)",\s*R"jinja\((.*?)\)jinja"\}', text, re.S)
    if len(found) < 7:
        raise SystemExit(f"found only {len(found)} built-in templates in {SOURCE}")
    return found


def main():
    conversations = [c for c in real.CONVERSATIONS if not c.get("tools")]
    templates = []
    for name, source in builtin_sources():
        cases = []
        for conv in conversations:
            for agp in (False, True):
                result = real.render(source, conv["messages"], None, agp, real.GENERIC_SPECIAL_TOKENS,
                                     conv.get("kwargs", {}))
                cases.append({"conversation": conv["name"], "add_generation_prompt": agp, **result})
        templates.append({"name": name, "source": source, "special_tokens": real.GENERIC_SPECIAL_TOKENS,
                          "cases": cases})
        errors = sum("error" in c for c in cases)
        print(f"builtin {name}: {len(cases)} cases, {errors} errors")
    real.write_json(OUT, {"templates": templates})


if __name__ == "__main__":
    main()
