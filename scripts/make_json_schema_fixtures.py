#!/usr/bin/env python3
"""Fixtures for the JSON Schema and regex to GBNF compilers (tests/fixtures/grammar/).

json_schema.json: for each schema (the realistic ones of json_schema_fixture_schemas.py and random
ones), valid documents (generated, checked valid with the jsonschema package, format checking
on) serialised compact (json.dumps separators (",", ":"), ensure_ascii False and True) and pretty
(indent=2), and invalid ones (mutations of valid documents that jsonschema rejects, each with the
keyword it fails, and syntactically broken JSON that json.loads rejects).

The generated documents follow the compiler's documented conventions, which are a subset of what
the schema allows: declared properties in schema order and extra ones after them, patterns
matching the whole string, integers without a fraction, pretty output at most 20 levels deep.

regex.json: (pattern, string, Python re.fullmatch result with re.ASCII, so that \\d and \\w are
ASCII as in ECMAScript); strings sampled from each pattern and mutated.

Runs offline on a dev machine (python3 with jsonschema and rfc3339-validator); the output is
committed and the C++ tests read it. Deterministic (seeded).
"""
import json
import random
import re
import re._constants as sre_c
import re._parser as sre_parse
import sys
import uuid
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_fixture_schemas import REALISTIC  # noqa: E402  (same directory)

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "grammar"
MAX_PRETTY_INDENT = 20  # the compiler's whitespace bound after a newline (kMaxIndent)

STRING_POOL = list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789") + list(".,:;!?-_/'\"\\#@()[]{}") + [
    "\n", "\t", "\u0001", "\u001f", "\u007f", "é", "ß", "ñ", "日", "本", "語", "ж", "😀", "🚀", "\u2028"]
REGEX_POOL = list("abcxyzABCXYZ0123456789 _-.:/#@\"\\\t\n{}[]()*+?|^$,") + ["é", "à", "ÿ", "日", "本", "語", "😀"]
CATEGORY_CHARS = {
    sre_c.CATEGORY_DIGIT: "0123456789",
    sre_c.CATEGORY_WORD: "abcxyzABCXYZ0123456789_",
    sre_c.CATEGORY_SPACE: " \t\n\r\f\v",
}


def validator(schema):
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


# ---- regex sampling (over Python's own parse of the pattern) ----

def category_chars(category):
    for positive, chars in CATEGORY_CHARS.items():
        if category == positive:
            return list(chars)
    negated = {sre_c.CATEGORY_NOT_DIGIT: sre_c.CATEGORY_DIGIT, sre_c.CATEGORY_NOT_WORD: sre_c.CATEGORY_WORD,
               sre_c.CATEGORY_NOT_SPACE: sre_c.CATEGORY_SPACE}[category]
    return [c for c in REGEX_POOL if c not in CATEGORY_CHARS[negated]]


def class_regex(items):
    parts = []
    for op, av in items:
        if op is sre_c.LITERAL:
            parts.append(re.escape(chr(av)))
        elif op is sre_c.RANGE:
            parts.append(re.escape(chr(av[0])) + "-" + re.escape(chr(av[1])))
        elif op is sre_c.CATEGORY:
            parts.append({sre_c.CATEGORY_DIGIT: r"\d", sre_c.CATEGORY_NOT_DIGIT: r"\D", sre_c.CATEGORY_WORD: r"\w",
                          sre_c.CATEGORY_NOT_WORD: r"\W", sre_c.CATEGORY_SPACE: r"\s",
                          sre_c.CATEGORY_NOT_SPACE: r"\S"}[av])
    return "".join(parts)


def sample_nodes(nodes, rng, out):
    for op, av in nodes:
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append(rng.choice([c for c in REGEX_POOL if c != chr(av)]))
        elif op is sre_c.ANY:
            out.append(rng.choice([c for c in REGEX_POOL if c != "\n"]))
        elif op is sre_c.IN:
            negated = av and av[0][0] is sre_c.NEGATE
            items = av[1:] if negated else av
            if negated:
                cls = re.compile("[^" + class_regex(items) + "]", re.ASCII)
                out.append(rng.choice([c for c in REGEX_POOL if cls.fullmatch(c)]))
                continue
            op2, av2 = rng.choice(items)
            if op2 is sre_c.LITERAL:
                out.append(chr(av2))
            elif op2 is sre_c.RANGE:
                out.append(chr(rng.randint(av2[0], av2[1])))
            else:
                out.append(rng.choice(category_chars(av2)))
        elif op is sre_c.CATEGORY:
            out.append(rng.choice(category_chars(av)))
        elif op is sre_c.BRANCH:
            sample_nodes(rng.choice(av[1]), rng, out)
        elif op is sre_c.SUBPATTERN:
            sample_nodes(av[3], rng, out)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
            low, high, sub = av
            high = low + 4 if high is sre_c.MAXREPEAT else min(high, low + 4)
            for _ in range(rng.randint(low, high)):
                sample_nodes(sub, rng, out)
        elif op is sre_c.AT:
            pass
        else:
            raise ValueError(f"sampler: unhandled regex node {op}")


def sample_regex(pattern, rng):
    tree = sre_parse.parse(pattern)
    for _ in range(500):
        out = []
        sample_nodes(tree, rng, out)
        text = "".join(out)
        if re.fullmatch(pattern, text, re.ASCII):
            return text
    raise ValueError(f"could not sample a string matching {pattern!r}")


# ---- valid documents ----

class Generator:
    """Random instances of a schema, in the compiler's conventions."""

    def __init__(self, root, rng):
        self.root = root
        self.rng = rng

    def resolve(self, ref):
        if ref == "#":
            return self.root
        container, name = ref[2:].split("/", 1)
        return self.root[container][name.replace("~1", "/").replace("~0", "~")]

    def any_value(self, depth):
        rng = self.rng
        kinds = ["string", "integer", "number", "boolean", "null"] + (["object", "array"] if depth < 3 else [])
        kind = rng.choice(kinds)
        if kind == "object":
            return {self.string({}, 1, 8): self.any_value(depth + 1) for _ in range(rng.randint(0, 3))}
        if kind == "array":
            return [self.any_value(depth + 1) for _ in range(rng.randint(0, 3))]
        return self.typed({}, kind, depth)

    def string(self, schema, low=0, high=None):
        low = schema.get("minLength", low)
        high = schema.get("maxLength", high if high is not None else low + 12)
        return "".join(self.rng.choice(STRING_POOL) for _ in range(self.rng.randint(low, min(high, low + 12))))

    def formatted(self, fmt):
        rng = self.rng
        date = f"{rng.randint(1900, 2099):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        fraction = rng.choice(["", "." + str(rng.randint(0, 999999))])
        zone = rng.choice(["Z", "+05:30", "-08:00", "+00:00"])
        time = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}{fraction}{zone}"
        if fmt == "date":
            return date
        if fmt == "time":
            return time
        if fmt == "date-time":
            return date + "T" + time
        if fmt == "uuid":
            text = str(uuid.UUID(int=rng.getrandbits(128)))
            return text.upper() if rng.random() < 0.3 else text
        if fmt == "email":
            local = rng.choice(["john.doe", "a", "first_last+tag", "x-y.z"])
            return local + "@" + rng.choice(["example.com", "mail.example.org", "a1.co"])
        if fmt == "ipv4":
            return ".".join(str(rng.choice([0, 1, 9, 10, 99, 100, 199, 200, 249, 250, 255, rng.randint(0, 255)]))
                            for _ in range(4))
        raise ValueError(fmt)

    def integer(self, schema):
        rng = self.rng
        low, high = schema.get("minimum"), schema.get("maximum")
        if "exclusiveMinimum" in schema:
            low = schema["exclusiveMinimum"] + 1
        if "exclusiveMaximum" in schema:
            high = schema["exclusiveMaximum"] - 1
        if low is None and high is None:
            return rng.choice([0, rng.randint(-1000, 1000), rng.randint(-10**12, 10**12)])
        if high is None:
            return rng.choice([low, low + rng.randint(0, 1000), low + rng.randint(0, 10**9)])
        if low is None:
            return rng.choice([high, high - rng.randint(0, 1000)])
        return rng.choice([low, high, rng.randint(low, high)])

    def number(self, schema):
        rng = self.rng
        value = rng.choice([rng.randint(-1000, 1000), round(rng.uniform(-1000, 1000), rng.randint(0, 4)),
                            rng.uniform(-1, 1) * 1e-7, rng.uniform(-1, 1) * 1e22, 0, 0.5])
        if "minimum" in schema or "exclusiveMinimum" in schema:
            value = abs(value)
            if "exclusiveMinimum" in schema and value == 0:
                value = 0.25
        return value

    def typed(self, schema, kind, depth):
        rng = self.rng
        if kind == "string":
            if "format" in schema:
                return self.formatted(schema["format"])
            if "pattern" in schema:
                return sample_regex(schema["pattern"], rng)
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, depth)
        raise ValueError(kind)

    def object(self, schema, depth):
        rng = self.rng
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is None and additional in (None, True):
            return self.any_value(3) if False else {self.string({}, 1, 6): self.any_value(depth + 1)
                                                    for _ in range(rng.randint(0, 3))}
        required = set(schema.get("required", []))
        out = {}
        for key, sub in (properties or {}).items():
            if key in required or (depth < 5 and rng.random() < 0.6):
                out[key] = self.value(sub, depth + 1)
        if additional not in (None, False) and rng.random() < 0.6:
            for i in range(rng.randint(1, 2)):
                key = f"extra_{i}_{rng.choice(['x', 'é', 'q'])}"
                if key not in out and key not in (properties or {}):
                    out[key] = self.value({} if additional is True else additional, depth + 1)
        return out

    def array(self, schema, depth):
        rng = self.rng
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", {})
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + (4 if depth < 5 else 0))
        if items is False:
            high = min(high, len(prefix))
        count = rng.randint(low, min(high, low + 4)) if depth < 5 else low
        return [self.value(prefix[i] if i < len(prefix) else items, depth + 1) for i in range(count)]

    def value(self, schema, depth=0):
        rng = self.rng
        if schema is True or schema == {}:
            return self.any_value(depth)
        schema = {k: v for k, v in schema.items() if k not in ("title", "description", "default", "$schema",
                                                                "$defs", "definitions", "examples")}
        if "$ref" in schema:
            return self.value(self.resolve(schema["$ref"]), depth + 1)
        for keyword in ("allOf", "anyOf", "oneOf"):
            if keyword in schema:
                branches = schema[keyword]
                branch = branches[-1] if depth > 6 else rng.choice(branches)
                rest = {k: v for k, v in schema.items() if k != keyword}
                merged = dict(rest, **branch) if isinstance(branch, dict) else rest
                return self.value(merged, depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind is None:
            if {"properties", "additionalProperties", "required"} & schema.keys():
                kind = "object"
            elif {"items", "prefixItems", "minItems", "maxItems"} & schema.keys():
                kind = "array"
            elif {"minLength", "maxLength", "pattern", "format"} & schema.keys():
                kind = "string"
            elif {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & schema.keys():
                kind = "number"
            else:
                return self.any_value(depth)
        if isinstance(kind, list):
            kind = rng.choice(kind)
        return self.typed(schema, kind, depth)


# ---- invalid documents ----

def paths(doc, prefix=()):
    yield prefix, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from paths(value, prefix + (i,))


def replaced(doc, path, new):
    if not path:
        return new
    copy = json.loads(json.dumps(doc))
    target = copy
    for step in path[:-1]:
        target = target[step]
    if new is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return copy


DELETE = object()


def mutations(doc, rng):
    """Candidate edits of a valid document: (description, document)."""
    out = []
    for path, value in paths(doc):
        where = "/" + "/".join(str(p) for p in path)
        for other in (123, "text", True, None, [1], {"k": 1}):
            if type(other) is not type(value):
                out.append((f"wrong type at {where}", replaced(doc, path, other)))
        if isinstance(value, dict):
            for key in value:
                out.append((f"missing {key!r} at {where}", replaced(doc, path + (key,), DELETE)))
            out.append((f"extra key at {where}", replaced(doc, path, dict(value, unexpected_key=1))))
        if isinstance(value, int) and not isinstance(value, bool):
            for delta in (1, -1, 10**6, -10**6, 10**13):
                out.append((f"integer {value + delta} at {where}", replaced(doc, path, value + delta)))
            out.append((f"fraction at {where}", replaced(doc, path, value + 0.5)))
        if isinstance(value, float):
            out.append((f"negative at {where}", replaced(doc, path, -abs(value) - 1)))
        if isinstance(value, str):
            for bad in ("zzz-not-listed", "2024-13-45", "25:61:00Z", "not-a-uuid", "no-at-sign", "256.1.1.1",
                        value + "!", value[:-1], "x" * 300, ""):
                out.append((f"string {bad[:20]!r} at {where}", replaced(doc, path, bad)))
        if isinstance(value, list):
            if value:
                out.append((f"too many items at {where}", replaced(doc, path, value + [value[-1]] * 30)))
                out.append((f"one more item at {where}", replaced(doc, path, value + [value[-1]])))
            out.append((f"empty array at {where}", replaced(doc, path, [])))
    rng.shuffle(out)
    return out


def broken_json(text, rng):
    candidates = [text[:-1], text + ",", text[:len(text) // 2], text.replace(":", "=", 1), text.replace('"', "'"),
                  text.replace(",", ",,", 1), "[" + text, text + "}", text.replace('"', "", 1),
                  text.replace("[", "[,", 1), text.replace("{", "{,", 1)]
    out = []
    for candidate in candidates:
        if candidate == text:
            continue
        try:
            json.loads(candidate)
        except ValueError:
            out.append(candidate)
    rng.shuffle(out)
    return out[:3]


def serialisations(doc):
    out = [("compact", json.dumps(doc, separators=(",", ":"), ensure_ascii=False)),
           ("compact_ascii", json.dumps(doc, separators=(",", ":"), ensure_ascii=True)),
           ("pretty", json.dumps(doc, indent=2, ensure_ascii=False))]
    deepest = max(len(line) - len(line.lstrip(" ")) for line in out[2][1].split("\n"))
    return [(style, text) for style, text in out if style != "pretty" or deepest <= MAX_PRETTY_INDENT]


def schema_case(name, schema, rng):
    check = validator(schema)
    generator = Generator(schema, rng)
    docs = []
    seen = set()
    for _ in range(40):
        doc = generator.value(schema)
        errors = list(check.iter_errors(doc))
        if errors:
            raise SystemExit(f"{name}: generated an invalid document {doc!r}: {best_match(errors).message}")
        key = json.dumps(doc, sort_keys=False)
        if key not in seen:
            seen.add(key)
            docs.append(doc)
        if len(docs) >= 6:
            break
    valid = []
    for doc in docs:
        for style, text in serialisations(doc):
            if all(text != v["text"] for v in valid):
                valid.append({"style": style, "text": text})
    invalid = []
    by_keyword = {}
    for doc in docs[:3]:
        for what, mutated in mutations(doc, rng):
            errors = list(check.iter_errors(mutated))
            if not errors:
                continue
            keyword = best_match(errors).validator
            if keyword in ("oneOf",) or by_keyword.get(keyword, 0) >= 3:
                continue  # oneOf exclusivity is not compiled (documented); a few of each kind
            text = json.dumps(mutated, separators=(",", ":"), ensure_ascii=False)
            if any(text == i["text"] for i in invalid):
                continue
            by_keyword[keyword] = by_keyword.get(keyword, 0) + 1
            invalid.append({"text": text, "why": f"{keyword}: {what}"})
        for text in broken_json(json.dumps(doc, separators=(",", ":"), ensure_ascii=False), rng)[:2]:
            invalid.append({"text": text, "why": "not JSON"})
    return {"name": name, "schema": schema, "valid": valid, "invalid": invalid}


# ---- random schemas ----

PATTERNS = ["^[a-z]{2,6}$", "^[A-Z][a-z]+( [A-Z][a-z]+)?$", "^\\d{3}-\\d{2}$", "^(yes|no|maybe)$", "^#[0-9a-f]{6}$"]


def random_schema(rng, depth=0):
    kinds = ["string", "integer", "number", "boolean", "null", "enum"] + (
        ["object", "object", "array", "anyOf", "typelist"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        schema = {"type": "string"}
        variant = rng.choice(["plain", "length", "format", "pattern"])
        if variant == "length":
            low = rng.randint(0, 4)
            schema.update(minLength=low, maxLength=low + rng.randint(0, 8))
        elif variant == "format":
            schema["format"] = rng.choice(["date", "time", "date-time", "uuid", "email", "ipv4"])
        elif variant == "pattern":
            schema["pattern"] = rng.choice(PATTERNS)
        return schema
    if kind == "integer":
        schema = {"type": "integer"}
        if rng.random() < 0.7:
            low = rng.randint(-5000, 5000)
            schema["minimum"] = low
            if rng.random() < 0.7:
                schema["maximum"] = low + rng.choice([0, 1, 9, 10, 99, 1000, 123456])
        return schema
    if kind == "number":
        return rng.choice([{"type": "number"}, {"type": "number", "minimum": 0},
                           {"type": "number", "exclusiveMinimum": 0}])
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", 1, 2.5, None, True, "ünï", "a\"b", [1, 2], {"k": "v"}],
                                   rng.randint(1, 4))}
    if kind == "object":
        names = rng.sample(["id", "name", "value", "items", "meta", "count", "flag", "note"], rng.randint(1, 4))
        properties = {n: random_schema(rng, depth + 1) for n in names}
        schema = {"type": "object", "properties": properties,
                  "required": [n for n in names if rng.random() < 0.5]}
        schema["additionalProperties"] = rng.choice([False, False, True, {"type": "integer"}, None])
        if schema["additionalProperties"] is None:
            del schema["additionalProperties"]
        return schema
    if kind == "array":
        schema = {"type": "array", "items": random_schema(rng, depth + 1)}
        if rng.random() < 0.6:
            low = rng.randint(0, 2)
            schema.update(minItems=low, maxItems=low + rng.randint(0, 4))
        return schema
    if kind == "anyOf":
        return {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 0}, {"type": "null"}][
            :rng.randint(2, 3)]}
    return {"type": rng.sample(["string", "integer", "boolean", "null"], 2)}


# ---- regex fixture ----

REGEX_PATTERNS = [
    r"[a-z]+", r"\d{3}-\d{4}", r"(foo|bar)baz?", r"a{2,4}b*", r"(?:ab)+c", r"[^0-9\s]{1,5}", r"\w+@\w+\.com",
    r"(0|[1-9][0-9]*)(\.[0-9]+)?", r"-?\d+", r"[A-Fa-f0-9]{6}", r"\.\*\+\?", r"[\]\[\-]+", r"x{3}|y+", r"(a|b|)c",
    r"(a*)*b", r"(a?b?)+c", r"((ab)|(cd))*", r"[\u00e0-\u00ff]+", r"日本+語?", r"😀{1,2}x", r".{2,3}", r"[.]", r"a.c",
    r"\t\n", r"[\x41-\x43]+", r"(?P<year>\d{4})-(?P<month>\d{2})", r"^abc$", r"a|", r"(|a)b", r"[^a]", r"\W\S\D",
    r"[\d\s]+", r"\{\}", r"a{2}?b+?c*?", r"[a-c-]+", r"\/\\d", r"[\\]+", r"\"q\"", r"x{0}y", r"(ab){2,3}",
    r"[^\n]*", r"(\d+,)*\d+", r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", r"((a|b)c)?d", r"[^\]]", r"é{2}|ß",
]


def regex_cases(rng):
    cases = []
    for pattern in REGEX_PATTERNS:
        strings = {""}
        for _ in range(6):
            strings.add(sample_regex(pattern, rng))
        sample = sorted(strings)[-1]
        strings.update({"\n", sample + "\n", sample[:1] + "\n" + sample[1:]})  # `.` and classes vs newline
        for text in list(strings):
            for _ in range(4):
                chars = list(text)
                op = rng.choice(["insert", "delete", "replace", "double"])
                i = rng.randint(0, len(chars))
                if op == "insert" or not chars:
                    chars.insert(i, rng.choice(REGEX_POOL))
                elif op == "delete":
                    del chars[min(i, len(chars) - 1)]
                elif op == "replace":
                    chars[min(i, len(chars) - 1)] = rng.choice(REGEX_POOL)
                else:
                    chars = chars + chars
                strings.add("".join(chars))
        cases.append({"pattern": pattern, "strings": [
            {"text": s, "match": re.fullmatch(pattern, s, re.ASCII) is not None} for s in sorted(strings)]})
    return cases


def main():
    rng = random.Random(20261123)
    cases = [schema_case(name, schema, rng) for name, schema in REALISTIC]
    for i in range(16):
        cases.append(schema_case(f"random_{i}", random_schema(rng), rng))
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "json_schema.json", "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/make_json_schema_fixtures.py", "schemas": cases}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    regex = regex_cases(rng)
    with open(OUT / "regex.json", "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/make_json_schema_fixtures.py", "cases": regex}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    valid = sum(len(c["valid"]) for c in cases)
    invalid = sum(len(c["invalid"]) for c in cases)
    strings = sum(len(c["strings"]) for c in regex)
    print(f"{len(cases)} schemas ({len(REALISTIC)} realistic), {valid} valid and {invalid} invalid documents; "
          f"{len(regex)} regex patterns, {strings} strings")


if __name__ == "__main__":
    main()
