#!/usr/bin/env python3
"""Token sequences labelled by a JSON Schema prefix oracle: tests/fixtures/grammar/json_schema_prefix.json.

For random JSON schemas (and the realistic ones of json_schema_fixture_schemas.py that use only
the keywords the oracle knows), token sequences and, for each token, whether the text so far
plus the token is still the beginning of a document valid under the schema
(json_prefix_oracle.py). tests/unit/test_json_schema_prefix.cpp replays them through the JSON
Schema compiler, the Matcher and the TokenMasker: a token's mask bit must equal its label.

Sequences: valid documents (written with random whitespace and escapes in the compiler's
conventions, checked with the jsonschema package) cut into tokens of 1-8 bytes (now and then
16), as they are and with one token replaced, inserted or deleted (tricky tokens, bytes that
are not UTF-8, pieces of other documents, Qwen3 vocabulary tokens); near-miss documents (one
value, key or member changed to a spelling at the edge of the schema); and random walks that
mostly take tokens the oracle allows. A sequence stops at its first refused token. Each records
whether its accepted text is a whole valid document (the oracle's answer, which jsonschema must
confirm). At each step, probes: another pool token and a run of closing brackets, labelled too.

The oracle is checked here first: hand-written edge cases (ORACLE_EXAMPLES), every prefix of
every generated document is viable, every document is complete, and every text it calls
complete passes jsonschema (numbers read as exact decimals).

Needs python3 with jsonschema, and ../shared/testdata/tokenizers/qwen3/tokenizer.json.xz for
vocabulary tokens. Deterministic (seeded); the output is committed. A larger sweep: --seed N
--random-schemas K --out /tmp/sweep.json, then SLAB_JSON_PREFIX_FIXTURE=/tmp/sweep.json
build/tests/slab_unit_tests "token masks and the matcher agree*".
"""
import argparse
import decimal
import json
import lzma
import random
import sys
from pathlib import Path

from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_prefix_oracle import MAX_INDENT, Oracle  # noqa: E402  (same directory)
from json_schema_fixture_schemas import REALISTIC  # noqa: E402
from make_json_schema_fixtures import Generator  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "grammar" / "json_schema_prefix.json"
QWEN3_TOKENIZER = REPO.parent / "shared" / "testdata" / "tokenizers" / "qwen3" / "tokenizer.json.xz"

ORACLE_KEYWORDS = {"type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "$ref",
                   "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
                   "exclusiveMinimum", "title", "description", "$schema", "$defs", "default"}
TRICKY_TOKENS = [
    '"', '",', '"}', '}]', ']', '}', '{', '[', ':', ', "', ',', '0', '1', '7', '42', '-', '.', 'e', 'e+', 'E-', '\\',
    '\\u00', '\\u', '\\"', '\\n', '\\/', 'true', 'nul', 'null', 'false', 'fals', ' ', '  ', '\n', '\n  ', '\n\t',
    '\n' + ' ' * 20, '\n' + ' ' * 21, ' ' * 8, '\t', '"a', 'é', '日本', '😀', '\x7f', '\\ud83d', '\\ude00', '\\u0041',
    '\\u00e9', '\\uDC00', '"id"', '"name":', 'extra', ': ', '{"', '["', '":"', '0.', '.5', '-0', '00', '1e', '\r',
    '\x01', ']]]]', '}}}}', '"}}}', 'null}}}', '0]]]]]]', '"]]]', '1}]}]', ' }\n}']
# Bytes that are not UTF-8 text: a surrogate's encoding, overlong, beyond U+10FFFF, stray and
# unfinished sequences.
TRICKY_BYTES = [b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xc0\xaf", b"\xc1", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
                b"\xff", b"\x80", b"\xe6\x97", b"\xa5", b"\xf0\x9f", b"\x98\x80", b"\xe0\x80\x80"]
ENUM_POOL = ["red", "green", "a/b", "tab\there", 'q"uote', "back\\slash", "é", "日本", "😀", "", 7, -3, 0, 2.5, None,
             True, False, [1, "x"], {"k": "v", "n": [None]}]
PROBES_PER_STEP = 1
KEY_POOL = ["id", "name", "value", "items", "meta", "count", "flag", "note", "a", "ab", "abc", "x_1"]


# The oracle on edge cases of the conventions, by hand: (schema, text, viable, complete).
ORACLE_EXAMPLES = [
    ({"type": "string"}, b'"\xed\xa0\x80', False, False),  # a surrogate's UTF-8 encoding
    ({"type": "string"}, b'"\xed\x9f\xbf"', True, True),  # U+D7FF
    ({"type": "string"}, b'"\xf4\x90', False, False),  # beyond U+10FFFF
    ({"type": "string"}, b'"\\ud83d\\uDE00"', True, True),
    ({"type": "string"}, b'"\\udc', False, False),  # a lone low surrogate
    ({"type": "string"}, b'"\\u0041"', True, True),  # free text: any escape
    ({"enum": ["A", "\u00e9"]}, b'"\\u0041', False, False),  # a value: no needless escape
    ({"enum": ["A", "\u00e9"]}, b'"\\u00E9"', True, True),
    ({"type": "string", "maxLength": 2}, b'"ab\\', False, False),
    ({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": True},
     b'{"id":1,"id"', False, False),  # an extra key is never a declared one
    ({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": True},
     b'{"id":1,"i\\u0064', False, False),  # nor a needless escape while it spells one's beginning
    ({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": True},
     b'{"id":1,"x\\u0064"', True, False),
    ({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}}}, b'{"b":null,"a"', False,
     False),  # schema order
    ({"type": "array"}, b"[\n" + b" " * 20 + b"1", True, False),
    ({"type": "array"}, b"[\n" + b" " * 21, False, False),
    ({"type": "array"}, b"[  1", False, False),  # one run per gap
    ({"type": "array"}, b" [", False, False),  # none before the document
    ({"type": "integer", "minimum": 10, "maximum": 20}, b"2", True, False),
    ({"type": "integer", "minimum": 10, "maximum": 20}, b"3", False, False),
    ({"type": "integer", "minimum": -5}, b"-0", False, False),
    ({"type": "integer"}, b"-0", True, True),
    ({"type": "number", "exclusiveMinimum": 0}, b"0.00", True, False),
    ({"type": "number", "exclusiveMinimum": 0}, b"0.0e", False, False),
    ({"type": "number", "minimum": 0}, b"-", False, False),
    ({"const": {"k": [1, None]}}, b'{ "k" :[1 ,null ] }', True, True),
]


def check_oracle_examples():
    for schema, text, viable, complete in ORACLE_EXAMPLES:
        if Oracle(schema).check(text) != (viable, complete):
            raise SystemExit(f"oracle example {schema} {text!r}: {Oracle(schema).check(text)}, want "
                             f"{(viable, complete)}")


def validator(schema):
    return Draft202012Validator(schema)


# ---- schemas ----

def uses_only_oracle_keywords(schema):
    if isinstance(schema, list):
        return all(uses_only_oracle_keywords(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    for key, value in schema.items():
        if key not in ORACLE_KEYWORDS:
            return False
        if key == "exclusiveMinimum" and (value != 0 or schema.get("type") != "number"):
            return False
        if key in ("properties", "$defs"):
            if not all(uses_only_oracle_keywords(s) for s in value.values()):
                return False
        elif key not in ("enum", "const", "default") and not uses_only_oracle_keywords(value):
            return False
    if "$ref" in schema and not (schema["$ref"] == "#" or schema["$ref"].startswith("#/$defs/")):
        return False
    return "type" in schema or "$ref" in schema or "anyOf" in schema or "enum" in schema or "const" in schema


def random_schema(rng, depth, defs):
    kinds = ["string", "string", "integer", "number", "boolean", "null", "enum", "const"]
    if depth < 3:
        kinds += ["object", "object", "object", "array", "array", "anyOf", "typelist"]
    if defs and depth > 0:
        kinds.append("ref")
    kind = rng.choice(kinds)
    if kind == "string":
        schema = {"type": "string"}
        if rng.random() < 0.5:
            low = rng.randint(0, 3)
            schema.update(minLength=low, maxLength=low + rng.randint(0, 6))
        return schema
    if kind == "integer":
        schema = {"type": "integer"}
        roll = rng.random()
        if roll < 0.3:
            schema["minimum"] = rng.choice([0, 1, -50, 7, 100])
        elif roll < 0.45:
            schema["maximum"] = rng.choice([0, -1, 99, 5000])
        elif roll < 0.8:
            low = rng.choice([-120, -9, 0, 3, 10, 95, 1000])
            schema.update(minimum=low, maximum=low + rng.choice([0, 1, 9, 10, 99, 250, 12345]))
        return schema
    if kind == "number":
        return rng.choice([{"type": "number"}, {"type": "number", "minimum": 0},
                           {"type": "number", "exclusiveMinimum": 0}])
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        return {"enum": rng.sample(ENUM_POOL, rng.randint(1, 4))}
    if kind == "const":
        return {"const": rng.choice(ENUM_POOL)}
    if kind == "ref":
        return {"$ref": "#/$defs/" + rng.choice(sorted(defs))}
    if kind == "object":
        names = rng.sample(KEY_POOL, rng.randint(0 if rng.random() < 0.15 else 1, 4))
        schema = {"type": "object"}
        if names or rng.random() < 0.5:
            schema["properties"] = {n: random_schema(rng, depth + 1, defs) for n in names}
            schema["required"] = [n for n in names if rng.random() < 0.5]
        additional = rng.choice([False, False, True, None, None, "schema"])
        if additional == "schema":
            additional = random_schema(rng, depth + 1, defs)
        if additional is not None:
            schema["additionalProperties"] = additional
        return schema
    if kind == "array":
        schema = {"type": "array"}
        if rng.random() < 0.85:
            schema["items"] = random_schema(rng, depth + 1, defs)
        if rng.random() < 0.2:
            schema["prefixItems"] = [random_schema(rng, depth + 1, defs) for _ in range(rng.randint(1, 2))]
            if rng.random() < 0.4:
                schema["items"] = False
        if rng.random() < 0.6:
            low = rng.randint(0, 2)
            schema.update(minItems=low, maxItems=low + rng.randint(0, 3))
        if schema.get("items") is False:  # no more items than the prefix
            schema["minItems"] = min(schema.get("minItems", 0), len(schema["prefixItems"]))
        return schema
    if kind == "anyOf":
        if rng.random() < 0.3:  # objects sharing keys: the matcher follows both until they part
            shared = rng.sample(KEY_POOL, 2)
            return {"anyOf": [{"type": "object", "properties": {
                shared[0]: random_schema(rng, depth + 1, defs), shared[1]: random_schema(rng, depth + 1, defs)},
                "required": [shared[0]], "additionalProperties": rng.choice([False, True])} for _ in range(2)]}
        return {"anyOf": [random_schema(rng, depth + 1, defs) for _ in range(rng.randint(2, 3))]}
    return {"type": rng.sample(["string", "integer", "number", "boolean", "null", "object", "array"],
                               rng.randint(2, 3))}


def nested(depth, leaf, wrap):
    return leaf if depth == 0 else wrap(nested(depth - 1, leaf, wrap))


# Deep nesting: a token such as `"}}}}` closes more rules than the masker keeps per context.
DEEP = [
    ("deep_arrays", nested(7, {"type": "integer"}, lambda s: {"type": "array", "items": s, "maxItems": 2})),
    ("deep_objects", nested(7, {"type": "string", "maxLength": 3}, lambda s: {
        "type": "object", "properties": {"a": s, "b": {"type": "null"}}, "required": ["a"],
        "additionalProperties": False})),
    ("deep_any_of", nested(6, {"type": "boolean"}, lambda s: {"anyOf": [
        {"type": "array", "items": s, "minItems": 1, "maxItems": 1}, {"type": "object", "properties": {"k": s}}]})),
]


# Arrays of one kind of leaf, so that near-miss changes land on that kind's edges.
LEAF_ARRAYS = [(f"array_of_{name}", {"type": "array", "items": leaf, "minItems": 1}) for name, leaf in [
    ("positive_numbers", {"type": "number", "exclusiveMinimum": 0}),
    ("nonnegative_numbers", {"type": "number", "minimum": 0}),
    ("numbers", {"type": "number"}),
    ("integers_-20_to_20", {"type": "integer", "minimum": -20, "maximum": 20}),
    ("integers_from_100", {"type": "integer", "minimum": 100}),
    ("strings_2_to_4", {"type": "string", "minLength": 2, "maxLength": 4}),
    ("enum_values", {"enum": ENUM_POOL}),
]]


# Texts at the edges of a few schemas, labelled like the rest (valid or not: the oracle says).
EXTRA_KEYS = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
              "required": ["id"], "additionalProperties": {"type": "integer"}}
EDGE_TEXTS = {
    "array_of_integers_-20_to_20": ["[-21]", "[21]", "[-20,20]", "[20,21]", "[-19,-2]", "[200]", "[-200]", "[-0]"],
    "array_of_integers_from_100": ["[99]", "[100]", "[1000]", "[10]", "[-100]", "[100,099]"],
    "array_of_positive_numbers": ["[0.0]", "[0.01]", "[0e5]", "[0.000,1]", "[1e-5]", "[0.5e-400]", "[-1]"],
    "array_of_nonnegative_numbers": ["[0]", "[0.0]", "[-0]", "[-0.5]", "[1e400]"],
    "array_of_strings_2_to_4": ['["a"]', '["ab"]', '["abcd"]', '["abcde"]', '["\\u00e9\\u00e9\\u00e9\\u00e9"]',
                                '["\\ud83d\\ude00\\ud83d\\ude00"]', '["\\ud83d\\ude00"]'],
    "extra_keys": ['{"id":1,"id":2}', '{"id":1,"idx":2}', '{"id":1,"i":2}', '{"id":1,"name":"a","name":3}',
                   '{"id":1,"name":"a","nam":3}', '{"id":1,"\\u0069d":2}', '{"id":1,"x\\u0069":2}', '{"name":"a"}',
                   '{"id":1,"name":"a","extra":3,"id":4}', '{"id":1,"":2}'],
}


def random_root(rng, index):
    defs = {}
    if index % 4 == 3:  # definitions, some referring to one another or to the root
        defs = {"Leaf": random_schema(rng, 2, {}), "Node": {
            "type": "object", "properties": {"value": {"type": "integer"},
                                             "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
            "required": ["value"], "additionalProperties": False}}
    schema = random_schema(rng, 0, defs) if index % 3 else {"type": "object", "properties": {
        name: random_schema(rng, 1, defs) for name in rng.sample(KEY_POOL, rng.randint(1, 4))}}
    if defs:
        schema = {"type": "object", "properties": {"root": schema, "leaf": {"$ref": "#/$defs/Leaf"},
                                                   "list": {"$ref": "#/$defs/Node"}}, "required": ["list"],
                  "$defs": defs}
    return schema


# ---- documents ----

def spell_string(text, rng):
    """A JSON string with random (strictly allowed) escapes: non-ASCII as \\u (either case), `/`
    as \\/, control characters short or \\u00XX."""
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif cp < 0x20:
            short = {8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t"}.get(cp)
            out.append(short if short and rng.random() < 0.6 else f"\\u{cp:04x}")
        elif ch == "/" and rng.random() < 0.5:
            out.append("\\/")
        elif cp >= 0x80 and rng.random() < 0.4:
            units = [cp] if cp <= 0xFFFF else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
            escaped = "".join(f"\\u{u:04x}" for u in units)
            out.append(escaped.upper().replace("\\U", "\\u") if rng.random() < 0.5 else escaped)
        else:
            out.append(ch)
    return "".join(out) + '"'


def random_ws(rng, allow):
    if not allow:
        return ""
    roll = rng.random()
    if roll < 0.5:
        return ""
    if roll < 0.75:
        return " "
    return "\n" + "".join(rng.choice(" \t") if rng.random() < 0.1 else " " for _ in range(rng.randint(0, MAX_INDENT)))


class Raw:
    """Text written as it is in place of a value or key (near-miss documents)."""

    def __init__(self, text):
        self.text = text


def serialise(value, rng, allow_ws, style):
    """style: compact, spaced (json.dumps' default separators) or random (a random run in every gap)."""
    def gap():
        return random_ws(rng, allow_ws) if style == "random" else ""

    def separator():
        return ", " if style == "spaced" else "," + gap()

    def write(v):
        if isinstance(v, Raw):
            return v.text
        if isinstance(v, str):
            return spell_string(v, rng)
        if isinstance(v, dict):
            members = []
            for key, member in v.items():
                colon = ": " if style == "spaced" else gap() + ":" + gap()
                members.append(write(key) + colon + write(member) + gap())
            return "{" + gap() + "".join((separator() if i else "") + m for i, m in enumerate(members)) + "}"
        if isinstance(v, list):
            items = [write(item) + gap() for item in v]
            return "[" + gap() + "".join((separator() if i else "") + m for i, m in enumerate(items)) + "]"
        return json.dumps(v)

    return write(value)


def cut(text, rng):
    """Random tokens of 1-8 bytes, now and then up to 16 (a vocabulary's `"}]}` closes many rules)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    tokens, at = [], 0
    while at < len(data):
        size = rng.randint(1, 16 if rng.random() < 0.1 else 8)
        tokens.append(data[at:at + size])
        at += size
    return tokens


def near_misses(value, rng):
    """Spellings close to a value that the schema may refuse: bounds and lengths off by one,
    needless escapes, another type, number spellings the compiler's conventions leave out."""
    if isinstance(value, bool) or value is None:
        return ["tru", "null", "false", "true", "0", '"true"', "nul"]
    if isinstance(value, (int, float)):
        number = [str(value) + ".0", str(value) + "e0", "-0", "0", "0.0", "-0.0", "0e5", "0.000", "1e-5", "-1", ".5",
                  "5.", "1E+2", "01", "1e400"]
        if isinstance(value, int):
            number += [str(value - 1), str(value + 1), str(value * 10), str(-value), str(value) + "0"]
        return number
    if isinstance(value, str):
        changed = ("x" + value, value[:-1], value + "x", value + "xx", "", value.upper())
        spelled = [spell_string(v, rng) for v in changed]
        return spelled + ['"\\u0041' + spell_string(value, rng)[1:], spell_string(value, rng)[:-1] + '\\u00e9"']
    return ["{}", "[]", "null", '""']


def near_miss_document(doc, rng):
    """The document with one value, key or member changed (a Raw spelling), or None."""
    spots = []

    def visit(node):
        if isinstance(node, dict):
            for key in list(node):
                spots.append((node, key))
                visit(node[key])
        elif isinstance(node, list):
            for i, item in enumerate(node):
                spots.append((node, i))
                visit(item)

    visit(doc)
    if not spots:
        return Raw(rng.choice(near_misses(doc, rng)))
    container, at = rng.choice(spots)
    roll = rng.random()
    if isinstance(container, dict) and roll < 0.3:  # the key: misspelt, needlessly escaped, repeated
        key = at
        options = [spell_string(key + "x", rng), spell_string(key[:-1], rng), spell_string(key.upper(), rng)]
        if key and 0x20 <= ord(key[0]) < 0x7F and key[0] not in '"\\':
            options.append('"\\u%04x' % ord(key[0]) + spell_string(key[1:], rng)[1:])
        items = list(container.items())
        container.clear()
        for k, v in items:
            container[Raw(rng.choice(options)) if k == key else k] = v
            if k == key and rng.random() < 0.3:
                container[Raw(spell_string(key, rng))] = v
        return doc
    if roll < 0.4:  # a member or item left out
        del container[at]
        return doc
    container[at] = Raw(rng.choice(near_misses(container[at], rng)))
    return doc


def closing_tokens(rng):
    """Tokens ending a value and then closing several arrays and objects (the masker rechecks
    tokens that leave more rules than its contexts hold)."""
    out = []
    for _ in range(40):
        closers = "".join(rng.choice("}]") for _ in range(rng.randint(2, 7)))
        if rng.random() < 0.3:
            closers = closers[:1] + rng.choice([" ", "\n", "\n  "]) + closers[1:]
        value_end = rng.choice(["", "", "0", "1", "7", '"', "e", "null", "true", '"x"', "5.5", ","])
        out.append((value_end + closers).encode())
    return out


def qwen3_json_tokens(rng, count):
    """Qwen3 vocabulary tokens (bytes) that have JSON punctuation, digits or whitespace in them."""
    data = json.loads(lzma.decompress(QWEN3_TOKENIZER.read_bytes()))
    byte_of, next_extra = {}, 0
    for b in range(256):  # GPT-2's byte-to-character table, inverted
        printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        byte_of[chr(b) if printable else chr(256 + next_extra)] = b
        next_extra += 0 if printable else 1
    picked = []
    for piece in sorted(data["model"]["vocab"]):
        raw = bytes(byte_of[c] for c in piece)
        if any(c in raw for c in b'{}[]":,0123456789\\\n') or raw.strip() == b"":
            picked.append(raw)
    return rng.sample(picked, count)


def exact_number(spelling):
    """A JSON number as a Decimal (as a float, 1e-400 would be 0 and fail exclusiveMinimum 0);
    exponents beyond Decimal's range are clamped to +-10^6, far past any bound a fixture uses."""
    mantissa, _, exponent = spelling.lower().partition("e")
    if exponent:
        exponent = str(max(-10**6, min(10**6, int(exponent))))
    return decimal.Decimal(mantissa + ("e" + exponent if exponent else ""))


class SchemaCase:
    def __init__(self, name, schema, allow_ws, rng, pool):
        self.name, self.schema, self.allow_ws, self.rng = name, schema, allow_ws, rng
        self.oracle = Oracle(schema, allow_ws)
        self.check = validator(schema)
        self.pool = pool
        self.closers = closing_tokens(rng)
        self.checked_complete = 0
        self.rejected_at = []  # text lengths where a sequence's last token was refused

    def documents(self, count):
        """(value, text) pairs: valid documents, written in the compiler's conventions."""
        generator = Generator(self.schema, self.rng)
        texts, values = [], []
        for _ in range(count * 3):
            doc = generator.value(self.schema)
            if list(self.check.iter_errors(doc)):
                raise SystemExit(f"{self.name}: generated an invalid document {doc!r}")
            style = self.rng.choice(["compact", "spaced", "random", "random"] if self.allow_ws else ["compact"])
            text = serialise(doc, self.rng, self.allow_ws, style).encode("utf-8")
            if len(text) > 400 or text in texts:
                continue
            self.check_document(text)
            texts.append(text)
            values.append(doc)
            if len(texts) == count:
                break
        return list(zip(values, texts))

    def check_document(self, text):
        for end in range(len(text) + 1):
            viable, complete = self.oracle.check(text[:end])
            if not viable:
                raise SystemExit(f"{self.name}: oracle refuses prefix {text[:end]!r} of valid {text!r}")
        if not complete:
            raise SystemExit(f"{self.name}: oracle says valid {text!r} is not complete")
        self.confirm_complete(text)

    def confirm_complete(self, text):
        errors = list(self.check.iter_errors(json.loads(text, parse_float=exact_number)))
        if errors:
            raise SystemExit(f"{self.name}: oracle calls {text!r} complete, jsonschema: {errors[0].message}")
        self.checked_complete += 1

    def label(self, tokens, kind):
        """Feeds tokens until the first the oracle refuses; the sequence as the fixture stores it.
        probes: at some steps, other pool tokens and their labels, [step, token, allowed]."""
        text, taken, complete, probes = b"", [], False, []
        for step, token in enumerate(tokens):
            for probe in self.rng.sample(self.pool, PROBES_PER_STEP) + [self.rng.choice(self.closers)]:
                if probe != token:
                    probes.append([step, probe, self.oracle.check(text + probe)[0]])
            viable, now_complete = self.oracle.check(text + token)
            taken.append(token)
            if not viable:
                self.rejected_at.append(len(text))
                return {"kind": kind, "tokens": taken, "last_rejected": True, "complete": complete, "probes": probes}
            text += token
            complete = now_complete
        if complete:
            self.confirm_complete(text)
        return {"kind": kind, "tokens": taken, "last_rejected": False, "complete": complete, "probes": probes}

    def perturbed(self, tokens):
        rng = self.rng
        tokens = list(tokens)
        at = rng.randrange(len(tokens) + 1)
        op = rng.choice(["replace", "insert", "delete"] if at < len(tokens) else ["insert"])
        new = rng.choice(self.pool)
        if op == "replace":
            tokens[at] = new
        elif op == "insert":
            tokens.insert(at, new)
        else:
            del tokens[at]
        return tokens

    def walk(self, max_steps):
        """Mostly allowed tokens from the pool; ends at a refused one or after max_steps."""
        rng = self.rng
        text, tokens = b"", []
        for _ in range(max_steps):
            for _ in range(6):  # a few draws: early in a document few pool tokens fit
                candidates = rng.sample(self.pool, 12)
                allowed = [t for t in candidates if self.oracle.check(text + t)[0]]
                if allowed:
                    break
            token = rng.choice(allowed) if allowed and rng.random() < 0.95 else candidates[0]
            tokens.append(token)
            if token not in allowed:
                break
            text += token
        return self.label(tokens, "walk")

    def sequences(self, documents, perturbed, near_miss, walks):
        docs = self.documents(documents)
        texts = [text for _, text in docs]
        out = []
        for text in texts:
            tokens = cut(text, self.rng)
            out.append(self.label(tokens, "document"))
            self.pool.extend(t for t in tokens[:3] + [text[-self.rng.randint(3, 12):]] if t not in self.pool)
        for i in range(perturbed):
            out.append(self.label(self.perturbed(cut(texts[i % len(texts)], self.rng)), "perturbed"))
        for i in range(near_miss):
            value = json.loads(texts[i % len(texts)])  # a fresh copy to change
            style = self.rng.choice(["compact", "random"] if self.allow_ws else ["compact"])
            text = serialise(near_miss_document(value, self.rng), self.rng, self.allow_ws, style)
            out.append(self.label(cut(text, self.rng), "near-miss"))
        for _ in range(walks):
            out.append(self.walk(40))
        for text in EDGE_TEXTS.get(self.name, []):
            out.append(self.label(cut(text, self.rng), "edge"))
        return out


def encode_token(token):
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": token.hex()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--random-schemas", type=int, default=44)
    parser.add_argument("--out", type=Path, default=OUT, help="another file for a larger sweep than the committed one")
    args = parser.parse_args()
    check_oracle_examples()
    rng = random.Random(args.seed)
    base_pool = [t.encode("utf-8") for t in TRICKY_TOKENS] + TRICKY_BYTES + qwen3_json_tokens(rng, 150)
    named = [(name, schema) for name, schema in REALISTIC if uses_only_oracle_keywords(schema)]
    named += DEEP + LEAF_ARRAYS + [("extra_keys", EXTRA_KEYS)]
    named += [(f"random_{i}", random_root(rng, i)) for i in range(args.random_schemas)]
    cases, totals, rejected_at = [], dict.fromkeys(["sequences", "accepted", "rejected", "complete", "confirmed",
                                                     "probes", "probes_rejected"], 0), []
    for index, (name, schema) in enumerate(named):
        if not uses_only_oracle_keywords(schema):
            raise SystemExit(f"{name}: a keyword the oracle does not know")
        allow_ws = index % 5 != 4
        case = SchemaCase(name, schema, allow_ws, rng, list(base_pool))
        leaf_array = name.startswith("array_of_") or name == "extra_keys"
        sequences = case.sequences(documents=8, perturbed=12, near_miss=40 if leaf_array else 12, walks=6)
        table = sorted({t for s in sequences for t in s["tokens"] + [p[1] for p in s["probes"]]})
        index_of = {t: i for i, t in enumerate(table)}
        for s in sequences:
            totals["sequences"] += 1
            totals["rejected"] += s["last_rejected"]
            totals["accepted"] += len(s["tokens"]) - s["last_rejected"]
            totals["complete"] += s["complete"]
            totals["probes"] += len(s["probes"])
            totals["probes_rejected"] += sum(not p[2] for p in s["probes"])
            s["tokens"] = [index_of[t] for t in s["tokens"]]
            s["probes"] = [[step, index_of[t], int(allowed)] for step, t, allowed in s["probes"]]
        totals["confirmed"] += case.checked_complete
        rejected_at += case.rejected_at
        cases.append({"name": name, "schema": schema, "allow_whitespace": allow_ws,
                      "tokens": [encode_token(t) for t in table], "sequences": sequences})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/make_json_prefix_fixtures.py",
                   "format": "sequences[].tokens index the schema's tokens (a string, or {hex} where not UTF-8); "
                             "every token but a last_rejected last one is accepted; complete: the accepted text is "
                             "a whole valid document; probes: [step, token, allowed] for other tokens tried in the "
                             "state before token `step`",
                   "schemas": cases}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{len(cases)} schemas, {totals['sequences']} sequences, {totals['accepted']} accepted and "
          f"{totals['rejected']} rejected steps, {totals['complete']} complete ({totals['confirmed']} complete texts "
          f"confirmed by jsonschema); {totals['probes']} probes, {totals['probes_rejected']} refused; "
          f"{args.out.stat().st_size} bytes")
    buckets = [0, 1, 10, 30, 60, 100, 200, 400, 10**6]
    print("sequences' refused tokens by the length of the text before them:", ", ".join(
        f"{lo}-{hi - 1}: {sum(lo <= r < hi for r in rejected_at)}" for lo, hi in zip(buckets, buckets[1:])))


if __name__ == "__main__":
    main()
