#!/usr/bin/env python3
"""Render how Python jinja2 treats `none` and undefined values, for tests/fixtures/chat/none_undefined.json.

Every filter, test and str/dict/list method the slabserve template engine implements, applied to
`none` and to an undefined name (and, for methods and some filters, given them as arguments),
plus the operators, subscripts and statements templates use on them. Each row records jinja2's
output, or that it raised and the exception class. The environment is transformers' own (see
make_chat_template_fixtures.py): ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, its
tojson and raise_exception.

The lists of names below mirror the engine's tables (src/chat/filters.cpp kFilters,
src/chat/tests_and_methods.cpp kTests and k*Methods): a name added there belongs here too.
"""
import json
from pathlib import Path

import jinja2
from transformers.utils import chat_template_utils as ctu

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "chat" / "none_undefined.json"

# The two subjects: a literal none (what a request's missing tools become) and a name nobody set.
SUBJECTS = {"none": "none", "undefined": "nothing"}

# Filter -> argument lists to try. Filters that return generators or iterators are listed with
# `| list` so the table shows their items, not a generator's repr.
FILTERS = {
    "abs": [""], "attr": ["('x')"], "batch": ["(2)"], "capitalize": [""], "center": ["(5)"],
    "count": [""], "d": ["", "('x')"], "default": ["", "('x')", "('x', true)"], "dictsort": [""],
    "e": [""], "escape": [""], "first": [""], "float": ["", "(1.5)"], "forceescape": [""],
    "format": ["", "(1)"], "indent": ["", "(2, true)"], "int": ["", "(7)"], "items": [""],
    "join": ["", "(',')", "(',', 'x')"], "last": [""], "length": [""], "list": [""], "lower": [""],
    "map": ["('upper')", "(attribute='x')", "(attribute='x', default='d')"], "max": [""], "min": [""],
    "reject": ["", "('defined')"], "rejectattr": ["('x')", "('x', 'defined')"],
    "replace": ["('o', '0')"], "reverse": [""], "round": [""], "safe": [""],
    "select": ["", "('defined')"], "selectattr": ["('x')", "('x', 'defined')", "('x', 'equalto', 1)"],
    "sort": ["", "(attribute='x')"], "string": [""], "sum": ["", "(attribute='x')"], "title": [""],
    "tojson": ["", "(indent=2)"], "trim": [""], "unique": [""], "upper": [""], "wordcount": [""],
}
ITERATOR_FILTERS = {"batch", "items", "map", "reject", "rejectattr", "reverse", "select", "selectattr", "unique"}

# Test -> argument lists ("" for none; "(...)" call form).
TESTS = {
    "boolean": [""], "callable": [""], "defined": [""], "divisibleby": ["(2)"], "eq": ["(none)", "(1)"],
    "equalto": ["(none)"], "==": ["(none)"], "escaped": [""], "even": [""], "false": [""], "filter": [""],
    "float": [""], "ge": ["(1)"], ">=": ["(none)"], "gt": ["(1)"], ">": ["(none)"], "greaterthan": ["(1)"],
    "in": ["([none])", "('abc')", "({'k': 1})"], "integer": [""], "iterable": [""], "le": ["(1)"],
    "<=": ["(none)"], "lower": [""], "lt": ["(1)"], "<": ["(none)"], "lessthan": ["(1)"], "mapping": [""],
    "ne": ["(none)", "(1)"], "!=": ["(1)"], "none": [""], "number": [""], "odd": [""],
    "sameas": ["(none)"], "sequence": [""], "string": [""], "test": [""], "true": [""],
    "undefined": [""], "upper": [""],
}

STRING_METHODS = [
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace",
    "upper", "lower", "title", "capitalize", "format", "join", "find", "rfind", "index", "rindex",
    "count", "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper",
    "center", "ljust", "rjust", "zfill", "partition", "rpartition", "swapcase", "removeprefix",
    "removesuffix", "casefold"]
DICT_METHODS = ["items", "keys", "values", "get", "copy"]
LIST_METHODS = ["index", "count", "copy"]

# Methods given none / undefined as an argument: receiver, method, argument patterns (@ = subject).
METHOD_ARGS = [
    ("s", "strip", "(@)"), ("s", "lstrip", "(@)"), ("s", "rstrip", "(@)"), ("s", "split", "(@)"),
    ("s", "rsplit", "(@)"), ("s", "split", "(' ', @)"), ("s", "splitlines", "(@)"),
    ("s", "startswith", "(@)"), ("s", "endswith", "(@)"), ("s", "replace", "(@, 'x')"),
    ("s", "replace", "('o', @)"), ("s", "join", "(@)"),
    ("s", "find", "(@)"), ("s", "rfind", "(@)"), ("s", "index", "(@)"), ("s", "rindex", "(@)"),
    ("s", "count", "(@)"), ("s", "center", "(@)"), ("s", "center", "(9, @)"), ("s", "ljust", "(@)"),
    ("s", "rjust", "(@)"), ("s", "zfill", "(@)"), ("s", "partition", "(@)"),
    ("s", "rpartition", "(@)"), ("s", "removeprefix", "(@)"), ("s", "removesuffix", "(@)"),
    ("d", "get", "(@)"), ("d", "get", "('k', @)"), ("d", "get", "('missing', @)"),
    ("l", "index", "(@)"), ("l", "count", "(@)"),
]

# Filters given none / undefined as an argument.
FILTER_ARGS = [
    ("l", "join", "(@)"), ("s", "default", "(@)"), ("nothing", "default", "(@)"),
    ("s", "replace", "(@, 'x')"), ("s", "center", "(@)"), ("s", "indent", "(@)"),
    ("s", "trim", "(@)"), ("l", "map", "(attribute=@)"), ("l", "selectattr", "(@)"),
    ("l", "tojson", "(indent=@)"), ("l", "sort", "(attribute=@)"), ("l", "batch", "(2, @)"),
    ("s", "int", "(@)"), ("s", "float", "(@)"), ("s", "round", "(@)"),
]

# Operators, subscripts, attributes and statements (@ = subject).
EXPRESSIONS = [
    "{{ @ }}", "[{{ @ }}]", "{{ @ ~ 'x' }}", "{{ 'x' ~ @ }}", "{{ @ + 1 }}", "{{ @ + 'x' }}",
    "{{ @ * 2 }}", "{{ -@ }}", "{{ not @ }}", "{{ @ and 'y' }}", "{{ @ or 'y' }}",
    "{{ 'y' if @ else 'n' }}", "{{ @ == none }}", "{{ @ != none }}", "{{ @ == nothing }}",
    "{{ @ < 1 }}", "{{ @ in [none] }}", "{{ 'a' in @ }}", "{{ @.x }}", "{{ @['x'] }}",
    "{{ @[0] }}", "{{ @[1:] }}", "{{ @.x is defined }}", "{{ @.x.y }}", "{{ @() }}",
    "{{ [@] }}", "{{ {'a': @} }}", "{{ [@] | tojson }}", "{{ {'a': @} | tojson }}",
    "{{ (@,) }}", "{{ '%s' % @ }}", "{{ '%s' % (@,) }}", "{{ '<{}>'.format(@) }}",
    "{% for x in @ %}x{% else %}empty{% endfor %}", "{% for k, v in @ %}x{% endfor %}",
    "{% if @ %}t{% else %}f{% endif %}", "{% set a = @ %}[{{ a }}]{{ a is none }}",
    "{% set ns = namespace(v=@) %}[{{ ns.v }}]", "{{ range(@) | list }}",
    "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m(@) }}{{ m() }}", "{{ @.items() }}",
    "{{ @.get('x') }}", "{{ @ is none or @ is not defined }}", "{{ (@ or []) | length }}",
    "{{ (@ or '') ~ '!' }}", "{{ @ | default(none) is none }}",
    "{% for t in @ | default([]) %}{{ t }}{% endfor %}ok",
]


def rows():
    """(name, template) pairs; names are unique and stable."""
    out = []
    for subject_name, subject in SUBJECTS.items():
        for name, variants in FILTERS.items():
            for args in variants:
                tail = " | list" if name in ITERATOR_FILTERS else ""
                out.append((f"filter {name}{args} on {subject_name}", f"{{{{ {subject} | {name}{args}{tail} }}}}"))
        for name, variants in TESTS.items():
            for args in variants:
                if name.isidentifier() and name != "in":
                    template = f"{{{{ {subject} is {name}{args} }}}}|{{{{ {subject} is not {name}{args} }}}}"
                else:  # operator-named tests are only reachable through select / reject
                    extra = ", " + args[1:-1] if args else ""
                    template = f"{{{{ [{subject}] | select('{name}'{extra}) | list | length }}}}"
                out.append((f"test {name}{args} on {subject_name}", template))
        for name in dict.fromkeys(STRING_METHODS + DICT_METHODS + LIST_METHODS):
            out.append((f"method {name}() on {subject_name}", f"{{{{ {subject}.{name}() }}}}"))
        for receiver, name, pattern in METHOD_ARGS:
            args = pattern.replace("@", subject)
            out.append((f"{receiver}.{name}{pattern} with {subject_name}", f"{{{{ {receiver}.{name}{args} }}}}"))
        for value, name, pattern in FILTER_ARGS:
            args = pattern.replace("@", subject)
            tail = " | list" if name in ITERATOR_FILTERS else ""
            out.append((f"{value} | {name}{pattern} with {subject_name}", f"{{{{ {value} | {name}{args}{tail} }}}}"))
        for pattern in EXPRESSIONS:
            out.append((f"{pattern} with {subject_name}", pattern.replace("@", subject)))
    return out


CONTEXT = {"s": "  hello world  ", "d": {"k": "v", "n": None}, "l": [{"x": 2}, {"x": None}, {"y": 1}]}


def render(env, template):
    try:
        return {"output": env.from_string(template).render(**CONTEXT)}
    except Exception as e:  # jinja2 and Python errors alike: the class is what the table records
        return {"error": f"{type(e).__name__}: {e}", "error_class": type(e).__name__}


def main():
    env = ctu._compile_jinja_template("").environment
    assert isinstance(env, jinja2.sandbox.ImmutableSandboxedEnvironment)
    table = []
    for name, template in rows():
        table.append({"name": name, "template": template, **render(env, template)})
    OUT.write_text(json.dumps({"context": CONTEXT, "rows": table}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    errors = sum("error" in r for r in table)
    print(f"none_undefined: {len(table)} rows, {errors} raise in jinja2")


if __name__ == "__main__":
    main()
