"""Is a byte string the beginning of a JSON document valid under a JSON Schema?

An independent reference for the grammar engine's token masks (make_json_prefix_fixtures.py
uses it to label token sequences). Written from JSON's syntax and the schema keywords'
meaning, in the conventions src/grammar/json_schema.cpp documents at its top, not from the
GBNF it emits:
- Whitespace: none before or after the document; in each gap inside an object or array (after
  `{` `[` `,` `:`, after a key, after a member's or an item's value) at most one run: nothing,
  one space, or a newline and then up to 20 spaces or tabs. With whitespace off: none at all.
- Objects: declared properties in schema order (required ones always, optional ones may be
  left out), then extra members where additionalProperties is true or a schema; an extra key
  never equals a declared one. No declared properties and additionalProperties absent or true:
  any object (keys may repeat).
- Strings spelled as JSON writers spell them: any escape in free text (json-char), but in
  enum/const values, declared keys and an extra key while it still spells the beginning of a
  declared key, no \\u escape of a printable ASCII character (U+0020..U+007F). Lengths count
  code points. Lone surrogates, raw control characters and invalid UTF-8 are never allowed.
- Numbers: integers without fraction or exponent and without leading zeros ("-0" only where
  no bound is given); bounded integers in canonical decimal; number minimum 0: no sign;
  exclusiveMinimum 0: a positive spelling (not 0.0, 0e5, ...).
- enum/const: the values as written (numbers as nlohmann::json prints them), whitespace as above
  between the tokens of an array or object value.

The parser is recursive descent over bytes that returns every position where a value may end
and whether the input ran out inside a value that could still be completed; memoised per text.
Every schema node must be satisfiable (the generator's schemas are).
"""
import re

MAX_INDENT = 20
ANNOTATIONS = {"title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated",
               "readOnly", "writeOnly", "$defs", "definitions"}
SHORT_ESCAPES = {ord('"'): 0x22, ord("\\"): 0x5C, ord("/"): 0x2F, ord("b"): 0x08, ord("f"): 0x0C, ord("n"): 0x0A,
                 ord("r"): 0x0D, ord("t"): 0x09}
HEX = b"0123456789abcdefABCDEF"

NUMBER_FORMS = {
    "any": re.compile(rb"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"),
    "nonnegative": re.compile(rb"(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"),
    "positive": re.compile(rb"([1-9][0-9]*(\.[0-9]+)?|0\.0*[1-9][0-9]*)([eE][-+]?[0-9]+)?"),
    "integer": re.compile(rb"-?(0|[1-9][0-9]*)"),
}
CANONICAL_INTEGER = re.compile(rb"0|-?[1-9][0-9]*")
NUMBER_BYTES = frozenset(b"0123456789.eE+-")


# ---- schema nodes (schema semantics, resolved once so that nodes can be memoised by id) ----

class Node:
    pass


class AnyValue(Node):
    pass


class Union(Node):
    def __init__(self, members):
        self.members = members


class Bytes(Node):  # exactly these bytes (true, false, null, a number of an enum/const)
    def __init__(self, data):
        self.data = data


class LiteralString(Node):  # one of these strings, strictly spelled
    def __init__(self, values):
        self.values = [[ord(c) for c in v] for v in values]


class String(Node):
    def __init__(self, min_length=0, max_length=None):
        self.min_length, self.max_length = min_length, max_length


class Number(Node):
    def __init__(self, form):
        self.form = form


class IntegerRange(Node):
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


class Object(Node):
    # properties: [(key, node, required)]; extra: node of extra members' values or None;
    # free_keys: extra keys are any string (no declared properties)
    def __init__(self, properties, extra, free_keys):
        self.properties, self.extra, self.free_keys = properties, extra, free_keys
        self.declared = [[ord(c) for c in key] for key, _, _ in properties]
        self.key_nodes = [LiteralString([key]) for key, _, _ in properties]


class Array(Node):
    def __init__(self, prefix, rest, min_items, max_items):
        self.prefix, self.rest, self.min_items, self.max_items = prefix, rest, min_items, max_items

    def item(self, i):
        return self.prefix[i] if i < len(self.prefix) else self.rest


class ConstArray(Node):
    def __init__(self, items):
        self.items = items


class ConstObject(Node):
    def __init__(self, members):  # [(LiteralString key, node)]
        self.members = members


class Ref(Node):
    def __init__(self, builder, target):
        self.builder, self.target, self.node = builder, target, None

    def resolve(self):
        if self.node is None:
            self.node = self.builder.resolve(self.target)
        return self.node


class SchemaNodes:
    """Turns a schema (the keyword subset the fixtures use) into nodes."""

    def __init__(self, root):
        self.root_schema = root
        self.refs = {}
        self.any = AnyValue()
        # Any JSON value: objects with any keys (repeats too), arrays of anything.
        self.any_value = Union([Object([], self.any, True), Array([], self.any, 0, None), String(), Number("any"),
                                Bytes(b"true"), Bytes(b"false"), Bytes(b"null")])
        self.root = self.build(root)

    def resolve(self, target):
        if target == "#":
            return self.build(self.root_schema)
        container, name = target[2:].split("/", 1)
        return self.build(self.root_schema[container][name.replace("~1", "/").replace("~0", "~")])

    def constant(self, value):
        if isinstance(value, str):
            return LiteralString([value])
        if isinstance(value, bool) or value is None:
            return Bytes({True: b"true", False: b"false", None: b"null"}[value])
        if isinstance(value, int):
            return Bytes(str(value).encode())
        if isinstance(value, float):
            assert value == 2.5, "only 2.5 is known to print alike in nlohmann::json and Python"
            return Bytes(b"2.5")
        if isinstance(value, list):
            return ConstArray([self.constant(v) for v in value])
        return ConstObject([(LiteralString([k]), self.constant(v)) for k, v in value.items()])

    def build(self, schema):
        if schema is True:
            return self.any
        schema = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
        if "$ref" in schema:
            target = schema["$ref"]
            if target not in self.refs:
                self.refs[target] = Ref(self, target)
            return self.refs[target]
        if "anyOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            return Union([self.build(dict(rest, **branch)) for branch in schema["anyOf"]])
        if "const" in schema:
            return self.constant(schema["const"])
        if "enum" in schema:
            return Union([self.constant(v) for v in schema["enum"]])
        types = schema.get("type")
        if types is None:
            if not schema:
                return self.any
            raise ValueError(f"the oracle needs a type in {schema}")
        types = types if isinstance(types, list) else [types]
        nodes = [self.typed(schema, t) for t in types]
        return nodes[0] if len(nodes) == 1 else Union(nodes)

    def typed(self, schema, kind):
        if kind == "string":
            return String(schema.get("minLength", 0), schema.get("maxLength"))
        if kind == "boolean":
            return Union([Bytes(b"true"), Bytes(b"false")])
        if kind == "null":
            return Bytes(b"null")
        if kind == "integer":
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if lo is None and hi is None:
                return Number("integer")
            return IntegerRange(lo, hi)
        if kind == "number":
            exclusive_minimum = schema.get("exclusiveMinimum")
            if exclusive_minimum == 0 and not isinstance(exclusive_minimum, bool):
                return Number("positive")
            return Number("nonnegative" if schema.get("minimum") == 0 else "any")
        if kind == "object":
            properties = schema.get("properties")
            additional = schema.get("additionalProperties")
            if properties is None and additional in (None, True):
                return Object([], self.any, True)
            required = set(schema.get("required", []))
            members = [(key, self.build(sub), key in required) for key, sub in (properties or {}).items()]
            extra = None
            if additional is not None and additional is not False:
                extra = self.any if additional is True else self.build(additional)
            return Object(members, extra, properties is None)
        if kind == "array":
            prefix = [self.build(s) for s in schema.get("prefixItems", [])]
            items = schema.get("items", True)
            rest = None if items is False else self.build(items)
            return Array(prefix, rest, schema.get("minItems", 0), schema.get("maxItems"))
        raise ValueError(kind)


# ---- string pieces ----

def utf8_continuation_range(lead, index):
    """The allowed range of continuation byte `index` (1-based) after a UTF-8 lead byte."""
    if index == 1:
        special = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
        if lead in special:
            return special[lead]
    return 0x80, 0xBF


def utf8_length(lead):
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def free_range(lo, hi, excluded):
    """Some value of lo..hi lies outside every excluded (lo, hi) range."""
    points = [lo]
    for elo, ehi in excluded:
        points.append(ehi + 1)
    for v in points:
        if lo <= v <= hi and not any(elo <= v <= ehi for elo, ehi in excluded):
            return True
    return False


def hex_prefix_range(digits, width=4):
    value = int(digits, 16) if digits else 0
    shift = 4 * (width - len(digits))
    return value << shift, ((value + 1) << shift) - 1


def encodings(cp):
    """Every strict spelling of a code point inside a JSON string, hex digits lower case."""
    out = []
    if cp == 0x22:
        return [b'\\"']
    if cp == 0x5C:
        return [b"\\\\"]
    if cp >= 0x20:
        out.append(chr(cp).encode("utf-8"))
    if cp == 0x2F:
        out.append(b"\\/")
    if cp < 0x20:
        short = {0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}.get(cp)
        if short:
            out.append(short)
    if cp < 0x20 or cp >= 0x80:
        if cp <= 0xFFFF:
            out.append(b"\\u%04x" % cp)
        else:
            v = cp - 0x10000
            out.append(b"\\u%04x\\u%04x" % (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)))
    return out


def spelling_starts_with(spelling, tail):
    if len(tail) > len(spelling):
        return False
    for at, (s, t) in enumerate(zip(spelling, tail)):
        hex_digit = spelling.startswith(b"\\u") and at % 6 >= 2  # \uXXXX or \uXXXX\uXXXX
        if s == t or (hex_digit and chr(s) in "abcdef" and t == s - 32):
            continue
        return False
    return True


def tail_completes(tail, strict):
    """An unfinished character (the scanner checked its bytes so far) can be finished as any code
    point; strict: as one that is not a needless \\u escape of printable ASCII."""
    if tail[0] != 0x5C or len(tail) < 3:
        return True  # raw UTF-8 that the scanner found valid so far, `\` or `\u`
    digits = tail[2:6]
    if len(digits) < 4:
        excluded = [(0xDC00, 0xDFFF)] + ([(0x20, 0x7F)] if strict else [])
        return free_range(*hex_prefix_range(digits.decode()), excluded)
    low = tail[8:12]  # after the high surrogate: `\`, `\u`, `\uD`...
    if len(tail) < 9:
        return True
    lo, hi = hex_prefix_range(low.decode())
    return lo <= 0xDFFF and hi >= 0xDC00


class Parse:
    def __init__(self, nodes, text, allow_whitespace):
        self.nodes, self.text, self.n, self.allow_ws = nodes, text, len(text), allow_whitespace
        self.memo = {}
        self.strings = {}

    # -- combinators: each piece maps a position to (end positions, ran out with a completion) --

    def seq(self, p, pieces):
        positions, partial = {p}, False
        for piece in pieces:
            after = set()
            for q in positions:
                ends, ran_out = piece(q)
                after |= ends
                partial |= ran_out
            positions = after
            if not positions:
                break
        return positions, partial

    def lit(self, data):
        def piece(p):
            got = self.text[p:p + len(data)]
            if got == data:
                return {p + len(data)}, False
            if p + len(got) == self.n and data.startswith(got):
                return set(), True
            return set(), False
        return piece

    def ws(self, p):
        ends = {p}
        if not self.allow_ws or p >= self.n:
            return ends, self.allow_ws
        if self.text[p] == 0x20:
            ends.add(p + 1)
        elif self.text[p] == 0x0A:
            q = p + 1
            ends.add(q)
            while q < self.n and q - p - 1 < MAX_INDENT and self.text[q] in b" \t":
                q += 1
                ends.add(q)
        return ends, False

    def separator(self, first):
        return (lambda p: ({p}, False)) if first else (lambda p: self.seq(p, [self.lit(b","), self.ws]))

    # -- values --

    def value(self, node, p):
        key = ("v", id(node), p)
        if key not in self.memo:
            self.memo[key] = self.value_uncached(node, p)
        return self.memo[key]

    def value_uncached(self, node, p):
        if isinstance(node, Ref):
            return self.value(node.resolve(), p)
        if isinstance(node, AnyValue):
            return self.value(self.nodes.any_value, p)
        if isinstance(node, Union):
            ends, partial = set(), False
            for member in node.members:
                e, pt = self.value(member, p)
                ends |= e
                partial |= pt
            return ends, partial
        if isinstance(node, Bytes):
            return self.lit(node.data)(p)
        if isinstance(node, (String, LiteralString)):
            return self.string(node, p)
        if isinstance(node, (Number, IntegerRange)):
            return self.number(node, p)
        if isinstance(node, Object):
            return self.seq(p, [self.lit(b"{"), self.ws, lambda q: self.members(node, 0, True, q), self.lit(b"}")])
        if isinstance(node, Array):
            return self.seq(p, [self.lit(b"["), self.ws, lambda q: self.items(node, 0, q), self.lit(b"]")])
        if isinstance(node, ConstArray):
            pieces = [self.lit(b"["), self.ws]
            for i, item in enumerate(node.items):
                pieces += ([self.lit(b","), self.ws] if i else []) + [lambda q, item=item: self.value(item, q), self.ws]
            return self.seq(p, pieces + [self.lit(b"]")])
        if isinstance(node, ConstObject):
            pieces = [self.lit(b"{"), self.ws]
            for i, (key, member) in enumerate(node.members):
                pieces += ([self.lit(b","), self.ws] if i else []) + [
                    lambda q, key=key: self.string(key, q), self.ws, self.lit(b":"), self.ws,
                    lambda q, member=member: self.value(member, q), self.ws]
            return self.seq(p, pieces + [self.lit(b"}")])
        raise TypeError(node)

    def members(self, node, i, first, p):
        key = ("m", id(node), i, first, p)
        if key in self.memo:
            return self.memo[key]
        ends, partial = set(), False
        rest = node.properties[i:]
        if not any(required for _, _, required in rest):
            ends.add(p)
        for j, (_, value, required) in enumerate(rest):
            key_node = node.key_nodes[i + j]
            e, pt = self.member(p, first, lambda q, key_node=key_node: self.string(key_node, q), value,
                                lambda q, next_i=i + j + 1: self.members(node, next_i, False, q))
            ends |= e
            partial |= pt
            if required:
                break
        else:
            if node.extra is not None:
                e, pt = self.extra_members(node, first, p)
                ends |= e
                partial |= pt
        self.memo[key] = ends, partial
        return ends, partial

    def extra_members(self, node, first, p):
        key = ("x", id(node), first, p)
        if key in self.memo:
            return self.memo[key]
        e, partial = self.member(p, first, lambda q: self.extra_key(node, q), node.extra,
                                 lambda q: self.extra_members(node, False, q))
        ends = {p} | e
        self.memo[key] = ends, partial
        return ends, partial

    def member(self, p, first, key, value, then):
        """One `separator key ws : ws value ws` from p (key: a parser), then `then` from each place
        it can end: (ends, partial) over both."""
        e, partial = self.seq(p, [self.separator(first), key, self.ws, self.lit(b":"), self.ws,
                                  lambda q: self.value(value, q), self.ws])
        ends = set()
        for q in e:
            e2, pt2 = then(q)
            ends |= e2
            partial |= pt2
        return ends, partial

    def items(self, node, i, p):
        key = ("i", id(node), i, p)
        if key in self.memo:
            return self.memo[key]
        ends, partial = set(), False
        if i >= node.min_items:
            ends.add(p)
        item = node.item(i)
        if item is not None and (node.max_items is None or i < node.max_items):
            e, pt = self.seq(p, [self.separator(i == 0), lambda q: self.value(item, q), self.ws])
            partial |= pt
            for q in e:
                e2, pt2 = self.items(node, i + 1, q)
                ends |= e2
                partial |= pt2
        self.memo[key] = ends, partial
        return ends, partial

    # -- numbers --

    def number(self, node, p):
        run_end = p
        while run_end < self.n and self.text[run_end] in NUMBER_BYTES:
            run_end += 1
        ends = {q for q in range(p + 1, run_end + 1) if self.number_complete(node, self.text[p:q])}
        partial = run_end == self.n and self.number_viable(node, self.text[p:run_end])
        return ends, partial

    @staticmethod
    def number_complete(node, digits):
        if isinstance(node, Number):
            return NUMBER_FORMS[node.form].fullmatch(digits) is not None
        if not CANONICAL_INTEGER.fullmatch(digits):
            return False
        value = int(digits)
        return (node.lo is None or value >= node.lo) and (node.hi is None or value <= node.hi)

    @staticmethod
    def number_viable(node, digits):
        if isinstance(node, Number):
            # Each unfinished spelling ends in a sign, `-`, `.`, `e`, a leading 0 (positive form)
            # or `0.0*`: one of these endings finishes it.
            return any(NUMBER_FORMS[node.form].fullmatch(digits + end) for end in (b"", b"1", b".1"))
        if not digits:
            return True
        negative = digits.startswith(b"-")
        magnitude = digits[1:] if negative else digits
        if magnitude and not re.fullmatch(rb"0|[1-9][0-9]*", magnitude):
            return False
        lo, hi = node.lo, node.hi
        if negative:  # magnitudes 1..-lo, at least -hi
            mlo, mhi = max(1, -hi if hi is not None else 1), (-lo if lo is not None else None)
        else:
            mlo, mhi = max(0, lo if lo is not None else 0), hi
        if mhi is not None and mhi < mlo:
            return False
        if not magnitude:
            return True
        if magnitude == b"0":
            return not negative and mlo == 0
        start = int(magnitude)
        for scale in range(0, 25):  # magnitudes spelled magnitude + `scale` more digits
            first, last = start * 10 ** scale, (start + 1) * 10 ** scale - 1
            if last >= mlo and (mhi is None or first <= mhi):
                return True
        return False

    # -- strings --

    def scan_string(self, p):
        """Decodes the JSON string at p: (code points, needless \\u escapes of printable ASCII
        per code point, how it stops: ("closed", end) | ("eof", unfinished bytes) | ("error",))."""
        if p in self.strings:
            return self.strings[p]
        text, n = self.text, self.n
        chars, needless = [], []
        q = p + 1
        result = None
        while result is None:
            if q >= n:
                result = ("eof", b"")
                break
            b = text[q]
            if b == 0x22:
                result = ("closed", q + 1)
            elif b < 0x20:
                result = ("error",)
            elif b == 0x5C:
                if q + 1 >= n:
                    result = ("eof", text[q:])
                elif text[q + 1] in SHORT_ESCAPES:
                    chars.append(SHORT_ESCAPES[text[q + 1]])
                    needless.append(False)
                    q += 2
                elif text[q + 1] == ord("u"):
                    cp, length, status = self.unicode_escape(q)
                    if status != "ok":
                        result = ("eof", text[q:]) if status == "eof" else ("error",)
                    else:
                        chars.append(cp)
                        needless.append(0x20 <= cp <= 0x7F)
                        q += length
                else:
                    result = ("error",)
            elif b < 0x80:
                chars.append(b)
                needless.append(False)
                q += 1
            else:
                length = utf8_length(b)
                if not length:
                    result = ("error",)
                    break
                for k in range(1, length):
                    if q + k >= n:
                        result = ("eof", text[q:])
                        break
                    lo, hi = utf8_continuation_range(b, k)
                    if not lo <= text[q + k] <= hi:
                        result = ("error",)
                        break
                if result is None:
                    chars.append(ord(text[q:q + length].decode("utf-8")))
                    needless.append(False)
                    q += length
        self.strings[p] = chars, needless, result
        return self.strings[p]

    def unicode_escape(self, q):
        """The \\u escape (or surrogate pair) at q: (code point, length, "ok" | "eof" | "error")."""
        text = self.text

        def hex_digits(at):
            got = text[at:at + 4]
            if not all(c in HEX for c in got):
                return None, "error"
            return got, "ok" if len(got) == 4 else "eof"

        digits, status = hex_digits(q + 2)
        if status != "ok":
            if status == "eof" and not free_range(*hex_prefix_range(digits.decode()), [(0xDC00, 0xDFFF)]):
                status = "error"
            return None, 0, status
        high = int(digits, 16)
        if 0xDC00 <= high <= 0xDFFF:
            return None, 0, "error"
        if not 0xD800 <= high <= 0xDBFF:
            return high, 6, "ok"
        joiner = text[q + 6:q + 8]
        if joiner != b"\\u"[:len(joiner)]:
            return None, 0, "error"
        if len(joiner) < 2:
            return None, 0, "eof"
        digits, status = hex_digits(q + 8)
        if status == "error":
            return None, 0, "error"
        lo, hi = hex_prefix_range(digits.decode())
        if hi < 0xDC00 or lo > 0xDFFF:
            return None, 0, "error"
        if status == "eof":
            return None, 0, "eof"
        return 0x10000 + ((high - 0xD800) << 10) + (int(digits, 16) - 0xDC00), 12, "ok"

    def string(self, node, p):
        if p >= self.n:
            return set(), True
        if self.text[p] != 0x22:
            return set(), False
        chars, needless, (stop, *detail) = self.scan_string(p)
        if stop == "error":
            return set(), False
        if isinstance(node, String):
            over = node.max_length is not None and len(chars) + (1 if stop == "eof" and detail[0] else 0) > \
                node.max_length
            if stop == "closed":
                ok = node.min_length <= len(chars) and not over
                return ({detail[0]} if ok else set()), False
            return set(), not over and (not detail[0] or tail_completes(detail[0], strict=False))
        # LiteralString: one of the values, no needless escapes
        if any(needless):
            return set(), False
        k = len(chars)
        if stop == "closed":
            return ({detail[0]} if chars in node.values else set()), False
        tail = detail[0]
        for value in node.values:
            if value[:k] != chars:
                continue
            if not tail or (len(value) > k and any(spelling_starts_with(s, tail) for s in encodings(value[k]))):
                return set(), True
        return set(), False

    def extra_key(self, node, p):
        if node.free_keys:
            return self.string(String(), p)
        if p >= self.n:
            return set(), True
        if self.text[p] != 0x22:
            return set(), False
        chars, needless, (stop, *detail) = self.scan_string(p)
        if stop == "error":
            return set(), False

        def on_declared(k):  # the first k characters begin some declared key
            return any(key[:k] == chars[:k] for key in node.declared if len(key) >= k)

        if any(needless[k] and on_declared(k) for k in range(len(chars))):
            return set(), False
        if stop == "closed":
            return ({detail[0]} if chars not in node.declared else set()), False
        tail = detail[0]
        return set(), not tail or tail_completes(tail, strict=on_declared(len(chars)))


class Oracle:
    def __init__(self, schema, allow_whitespace=True):
        self.nodes = SchemaNodes(schema)
        self.allow_whitespace = allow_whitespace

    def check(self, text):
        """(viable, complete): text is the beginning of / the whole of a document."""
        parse = Parse(self.nodes, text, self.allow_whitespace)
        ends, partial = parse.value(self.nodes.root, 0)
        complete = len(text) in ends
        return partial or complete, complete

    def is_viable_prefix(self, text):
        return self.check(text)[0]
