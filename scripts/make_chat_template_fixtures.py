#!/usr/bin/env python3
"""Render chat-template fixtures with Python jinja2, set up exactly as transformers does.

Writes, under tests/fixtures/chat/:
  conversations.json          the conversations (messages, tools, extra kwargs)
  expected/<template>.json    per conversation x add_generation_prompt: rendered text or error
                              (and, for conversations without tools, the same with `tools` undefined)
  features.json               small hand-written templates, one language feature each

Templates are read from the shared test data (argument 1, default ../shared/testdata relative to
the repository root); they are never copied into the repository.

The environment comes from transformers' own helper (_compile_jinja_template), and rendering goes
through render_jinja_template after the normalisation apply_chat_template does (keys whose value
is None are dropped). strftime_now is pinned to FIXED_NOW, formatted in UTC; the C++ tests set
TZ=UTC and pass the same time.
"""
import datetime
import json
import lzma
import sys
from pathlib import Path

import jinja2
from transformers.utils import chat_template_utils as ctu

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "chat"
FIXED_NOW = 1721044800  # 2024-07-15 12:00:00 UTC


def strftime_fixed(fmt):
    return datetime.datetime.fromtimestamp(FIXED_NOW, datetime.timezone.utc).strftime(fmt)


def compile_template(source):
    template = ctu._compile_jinja_template(source)
    # Globals are looked up through a chain onto the environment's, so this pins the clock.
    template.environment.globals["strftime_now"] = strftime_fixed
    return template


def render(source, messages, tools, add_generation_prompt, special_tokens, kwargs, tools_undefined=False):
    """Returns {"output": str} or {"error": message, "raise_exception": bool}.

    tools_undefined: render as transformers does but leave `tools` out of the template's variables
    (what llama-server does for a request without tools) instead of passing tools=None.
    """
    try:
        template = compile_template(source)
        messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
        if tools_undefined:
            chat = ctu._alias_reasoning_fields(ctu._plain_template_data(messages))
            return {"output": template.render(messages=chat, documents=None, add_generation_prompt=add_generation_prompt,
                                              **{**special_tokens, **kwargs})}
        rendered, _ = ctu.render_jinja_template(
            conversations=[messages], tools=tools, chat_template=source,
            add_generation_prompt=add_generation_prompt, **{**special_tokens, **kwargs})
        return {"output": rendered[0]}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises the base class itself; jinja2's own errors are subclasses.
        return {"error": str(e), "raise_exception": type(e) is jinja2.exceptions.TemplateError}
    except Exception as e:  # Python-level errors inside the template (TypeError, ...)
        return {"error": f"{type(e).__name__}: {e}", "raise_exception": False}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "description": "Days ahead", "default": 0},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Filters"},
            },
            "required": ["query"],
        },
    },
}

CONVERSATIONS = [
    {"name": "user_only", "messages": [{"role": "user", "content": "Hello!"}]},
    {"name": "system_user", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"}]},
    {"name": "multi_turn", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke.\nMake it short."}]},
    {"name": "multi_turn_no_system", "messages": [
        {"role": "user", "content": "  padded question  "},
        {"role": "assistant", "content": "An answer."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome."}]},
    {"name": "tools_call_and_result", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a1b2c3d4e", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21 degrees in Paris."},
        {"role": "user", "content": "And tomorrow?"}]},
    {"name": "tools_string_arguments", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Tokyo and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "f5g6h7i8j", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}},
            {"id": "k9l0m1n2o", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "f5g6h7i8j", "content": "sunny"},
        {"role": "tool", "tool_call_id": "k9l0m1n2o", "content": "rain"}]},
    {"name": "tools_only_defined", "tools": [SEARCH_TOOL], "messages": [
        {"role": "user", "content": "Find papers on KV caches."}]},
    {"name": "empty_content", "messages": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "?"}]},
    {"name": "unicode", "messages": [
        {"role": "system", "content": "Réponds en français. 🙂"},
        {"role": "user", "content": "你好，世界！ Привет 👋🏽 — \"quotes\" 'single' \\ back\ttab"},
        {"role": "assistant", "content": "こんにちは 🌸"},
        {"role": "user", "content": "ünïcödé ✓"}]},
    {"name": "non_alternating", "messages": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"}]},
    {"name": "assistant_first", "messages": [
        {"role": "assistant", "content": "I start."},
        {"role": "user", "content": "OK"}]},
    {"name": "reasoning", "kwargs": {"enable_thinking": False}, "messages": [
        {"role": "user", "content": "Think about 3*7."},
        {"role": "assistant", "content": "<think>\n3*7 is 21.\n</think>\n\n21",},
        {"role": "user", "content": "And 4*5?"},
        {"role": "assistant", "content": "20", "reasoning_content": "4*5=20"}]},
    {"name": "kwargs_thinking_on", "kwargs": {"enable_thinking": True}, "messages": [
        {"role": "user", "content": "Hi there"}]},
]

GENERIC_SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def special_tokens_of(config):
    """transformers' special_tokens_map: the token attributes that are set, as strings."""
    names = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
    tokens = {}
    for name in names:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            tokens[name] = str(value)
    return tokens


def load_templates(testdata):
    templates = []
    for name in ["llama3.1", "qwen3"]:
        config = json.loads((testdata / "tokenizers" / name / "tokenizer_config.json").read_text())
        templates.append((name, config["chat_template"], special_tokens_of(config)))
    config = json.loads(lzma.open(testdata / "tokenizers" / "gemma3" / "tokenizer_config.json.xz").read())
    templates.append(("gemma3", config["chat_template"], special_tokens_of(config)))
    for path in sorted((testdata / "chat-templates").glob("*.jinja")):
        templates.append((path.stem, path.read_text(), GENERIC_SPECIAL_TOKENS))
    return templates


# Hand-written templates, one feature each: (name, template, context). Context keys become
# template variables as they are (no transformers normalisation).
FEATURES = [
    # --- output and whitespace control
    ("text_only", "hello world", {}),
    ("trailing_newline_dropped", "line\n", {}),
    ("two_trailing_newlines", "line\n\n", {}),
    ("crlf_text", "a\r\nb\rc", {}),
    ("print_string", "{{ s }}", {"s": "x<y>&"}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\n  y", {}),
    ("lstrip_not_for_vars", "  {{ 'v' }}\n", {}),
    ("lstrip_text_before", "a {% if true %}b{% endif %} c", {}),
    ("minus_left", "a  \n  {{- 'b' }}", {}),
    ("minus_right", "{{ 'a' -}}  \n  b", {}),
    ("minus_block", "x\n  {%- if true -%}\n  y  \n{%- endif -%}\n  z", {}),
    ("plus_block", "  {%+ if true %}\nx{% endif +%}\ny", {}),
    ("comment", "a{# comment #}b\n{# c2 #}\nc  {#- c3 -#}  d", {}),
    ("comment_lstrip", "x\n    {# note #}\ny", {}),
    ("raw_block", "{% raw %}{{ not parsed }}{% endraw %}", {}),
    ("var_end_newline_kept", "{{ 'a' }}\nb", {}),
    # --- literals and printing (Python repr)
    ("repr_list", "{{ ['a', 1, 2.5, true, none, [\"x\"]] }}", {}),
    ("repr_dict", "{{ {'k': 'v', 'n': 1, 'l': [1]} }}", {}),
    ("repr_tuple", "{{ (1, 'a') }} {{ (1,) }} {{ () }}", {}),
    ("repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'bs\\\\'] }}", {}),
    ("repr_unicode", "{{ ['é', '你好', '🙂'] }}", {}),
    ("print_bool_none", "{{ true }} {{ false }} {{ none }} {{ True }} {{ None }}", {}),
    ("print_numbers", "{{ 1 }} {{ 1.0 }} {{ 2.50 }} {{ 1e3 }} {{ 1_000 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-7 }} {{ 123456789012345678.0 }}", {}),
    ("print_json_values", "{{ d }} {{ d.f }} {{ d.i }} {{ d.b }} {{ d.n }} {{ d.l }}", {"d": {"f": 3.0, "i": 3, "b": False, "n": None, "l": [1, "x", None]}}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\x41\\u00e9' }}", {}),
    ("adjacent_strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("print_tuple_expr", "{{ 1, 2 }}", {}),
    # --- operators
    ("arith_int", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("arith_float", "{{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 1 + 1.5 }} {{ 2 ** 0.5 }} {{ 2 ** -1 }}", {}),
    ("unary", "{{ -3 }} {{ - -3 }} {{ +3 }} {{ -x }} {{ not true }}", {"x": 4}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ (1 + 2) ~ 3 }} {{ 1 ~ 2 * 3 }} {{ 10 - 2 - 3 }}", {}),
    ("string_ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 'n' ~ 1 ~ none ~ true }}", {}),
    ("list_ops", "{{ [1, 2] + [3] }} {{ [0] * 3 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ [1,2] == [1,2] }} {{ 1 > 0 > -1 }} {{ none == none }}", {}),
    ("in_operator", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ not 'a' in 'abc' }}", {}),
    ("logic", "{{ true and false }} {{ true or false }} {{ none or 'dflt' }} {{ 'x' and 'y' }} {{ 0 or [] }} {{ not none }}", {}),
    ("ternary", "{{ 'y' if x else 'n' }} {{ 'y' if not x else 'n' }} [{{ 'only' if false }}]", {"x": 1}),
    ("ternary_nested", "{{ 'a' if n == 1 else 'b' if n == 2 else 'c' }}", {"n": 2}),
    ("tilde_concat", "{{ 1 ~ 2 }} {{ 'x' ~ [1] }} {{ undefined_name ~ 'y' }}", {}),
    ("percent_format", "{{ '%s-%d' % ('a', 3) }} {{ 'v=%s' % 5 }} {{ '%05.2f|%x|%r' % (3.14159, 255, 'q') }}", {}),
    # --- subscripts and slices
    ("subscript", "{{ l[0] }} {{ l[-1] }} {{ d['k'] }} {{ d.k }} {{ s[1] }} {{ s[-1] }} {{ l[1][0] }}", {"l": [1, ["n"], 3], "d": {"k": "v"}, "s": "héllo"}),
    ("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[::2] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[-10:2] }}", {"l": [1, 2, 3, 4, 5]}),
    ("string_slices", "{{ s[::-1] }} {{ s[1:3] }} {{ s[:-1] }} {{ s[-3:] }}", {"s": "añb日c"}),
    ("missing_key", "[{{ d.nope }}][{{ d['nope'] }}][{{ l[10] }}]{{ d.nope is defined }}", {"d": {"a": 1}, "l": [1]}),
    ("attr_of_none", "[{{ n.x }}]", {"n": None}),
    ("dict_method_vs_key", "{{ d.items() | list }} {{ d['items'] }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }}", {"d": {"a": 1, "items": "key"}}),
    # --- control flow
    ("if_elif_else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}other{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}x{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x % 3 == 0 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", {}),
    ("for_dict", "{% for k in d %}{{ k }}{% endfor %} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for (a, b) in [(5, 6)] %}{{ a * b }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in [1, 2] %}{{ loop.index }}{{ a }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("for_string_iter", "{% for c in 'añ🙂' %}[{{ c }}]{% endfor %}", {}),
    ("for_undefined_iter", "{% for x in nothing %}x{% else %}none{% endfor %}", {}),
    ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("range_forms", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}", {}),
    ("loop_scope", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("if_scope_leaks", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    # --- set
    ("set_basic", "{% set a = 1 %}{% set b = a + 1 %}{{ a }}{{ b }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = ['x', 'y'] %}{{ c }}{{ d }}", {}),
    ("set_block", "{% set body %}\nhello {{ name }}\n{% endset %}[{{ body }}]", {"name": "bob"}),
    ("set_block_filter", "{% set body | upper %}abc{% endset %}{{ body }}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for x in [1, 2, 3] %}{% set ns.count = ns.count + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", {}),
    ("namespace_dict_arg", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c }}", {}),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict([('k', 'v')]) }}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    # --- macros
    ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ top }}{% endmacro %}{{ m() }}", {"top": "T"}),
    ("macro_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", {}),
    ("macro_missing_arg", "{% macro m(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro_whitespace", "{%- macro m(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n{{ m(1) }}{{ m(2) }}", {}),
    ("macro_default_expr", "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ 1 + 1 }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}", {}),
    ("filter_block", "{% filter upper %}abc {{ 'def' }}{% endfilter %}", {}),
    ("generation_block", "{% generation %}kept{% endgeneration %}", {}),
    # --- filters
    ("filter_trim", "[{{ '  a b \\n' | trim }}][{{ 'xxaxx' | trim('x') }}]", {}),
    ("filter_case", "{{ 'aBc' | upper }} {{ 'aBc' | lower }} {{ 'hello wORLD' | capitalize }} {{ 'hello wORLD-x y(z' | title }}", {}),
    ("filter_length", "{{ [1, 2] | length }} {{ 'añb' | length }} {{ {'a': 1} | count }} {{ nothing | length }}", {}),
    ("filter_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }}", {}),
    ("filter_join", "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ users | join(', ', attribute='name') }}", {"users": [{"name": "x"}, {"name": "y"}]}),
    ("filter_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("filter_default", "{{ nothing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | d('n') }} {{ 0 | d('z', boolean=true) }}", {}),
    ("filter_items_list", "{{ d | items | list }} {{ 'ab' | list }} {{ d | list }}", {"d": {"x": 1, "y": [2]}}),
    ("filter_string_int_float", "{{ 3 | string }} {{ [1] | string }} {{ '42' | int }} {{ 'x' | int }} {{ '3.5' | float }} {{ 3 | float }} {{ 3.9 | int }} {{ 'x' | int(7) }} {{ '0x1A' | int(0, 16) }} {{ '12abc' | float }}", {}),
    ("filter_tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ [1.0, none, true] | tojson }}", {"d": {"b": [1, {"z": "ü"}], "a": {}, "c": []}}),
    ("filter_tojson_args", "{{ d | tojson(true) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(indent='\\t') }}", {"d": {"b": "日本", "a": 1}}),
    ("filter_safe", "{{ '<b>' | safe }}", {}),
    ("filter_selectattr", "{{ users | selectattr('active') | map(attribute='name') | list }} {{ users | rejectattr('active') | map(attribute='name') | join(',') }} {{ users | selectattr('role', 'equalto', 'admin') | list | length }} {{ users | selectattr('role', '==', 'user') | map(attribute='name') | first }}", {"users": [{"name": "a", "active": True, "role": "admin"}, {"name": "b", "active": False, "role": "user"}, {"name": "c", "role": "user"}]}),
    ("filter_select", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ users | selectattr('x', 'defined') | list | length }}", {"users": [{"x": 1}, {}]}),
    ("filter_map", "{{ ['a', 'b'] | map('upper') | list }} {{ users | map(attribute='missing', default='?') | list }} {{ [1.5, 2.5] | map('int') | list }}", {"users": [{"n": 1}]}),
    ("filter_unique", "{{ [1, 2, 1, 3, 2] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }}", {}),
    ("filter_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('> ') }}", {}),
    ("filter_round_abs", "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ -3 | abs }} {{ -2.5 | abs }} {{ 7 | round }}", {}),
    ("filter_sort_reverse", "{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ users | sort(attribute='n') | map(attribute='n') | list }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }}", {"users": [{"n": 2}, {"n": 1}]}),
    ("filter_batch_wordcount", "{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 'x') | list }} {{ 'one two  three' | wordcount }}", {}),
    ("filter_dictsort", "{{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }}", {"d": {"b": 1, "a": 3, "C": 2}}),
    ("filter_sum_min_max", "{{ [1, 2, 3] | sum }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ users | sum(attribute='n') }}", {"users": [{"n": 2}, {"n": 5}]}),
    ("filter_misc", "{{ '<&>' | e }} {{ 'abc' | center(7) }}|{{ [1, 2] | string | length }}", {}),
    ("filter_chain_on_undefined", "[{{ nothing | trim }}][{{ nothing | upper }}][{{ nothing | list }}]", {}),
    # --- tests
    ("tests_types", "{{ 'a' is string }}{{ 1 is string }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ l is sequence }}{{ 'a' is sequence }}{{ d is sequence }}", {"d": {}, "l": []}),
    ("tests_numbers", "{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ true is integer }}{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}", {}),
    ("tests_values", "{{ none is none }}{{ 0 is none }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is defined }}", {"x": 1, "n": None}),
    ("tests_compare", "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ 1 is in [1] }}{{ 'a' is sameas 'a' }}", {}),
    ("tests_strings", "{{ 'abc' is lower }}{{ 'aBc' is lower }}{{ 'ABC' is upper }}{{ range is callable }}{{ 'x' is callable }}{{ 'x'.upper is callable }}", {}),
    ("tests_is_not", "{{ x is not none }}{{ x is not string }}{{ y is not defined }}", {"x": 1}),
    # --- string methods
    ("str_strip", "[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xxaxy'.strip('xy') }}][{{ '\\n\\ta\\n'.rstrip('\\n') }}]", {}),
    ("str_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ ' a b '.split(' ') }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}", {}),
    ("str_startswith", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}{{ 'hello'.endswith(('x', 'y')) }}{{ 'hello'.startswith('l', 2) }}", {}),
    ("str_methods", "{{ 'a-b'.replace('-', '+') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ ', '.join(['x', 'y']) }} {{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ 'hello'.index('e') }} {{ 'hello'.rfind('l') }}", {}),
    ("str_format", "{{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{{literal}}'.format() }}", {}),
    ("str_predicates", "{{ '123'.isdigit() }}{{ 'ab'.isalpha() }}{{ 'a1'.isalnum() }}{{ '  '.isspace() }}{{ 'Ab'.islower() }}{{ 'AB'.isupper() }}", {}),
    ("str_misc", "{{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4, '.') }}|{{ 'ab'.rjust(4) }} {{ '5'.zfill(3) }} {{ 'a=b=c'.partition('=') }} {{ 'aBc'.swapcase() }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}", {}),
    ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.get('a', 0) }}", {"d": {"a": 1, "b": 2}}),
    ("list_methods", "{{ l.index(2) }} {{ l.count(1) }}", {"l": [1, 2, 1]}),
    # --- truthiness
    ("truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, {'a': 1}, none, 0.0, 0.1] %}{{ 'T' if v else 'F' }}{% endfor %}{{ 'T' if nothing else 'F' }}", {}),
    # --- globals
    ("raise_exception", "{{ raise_exception('Custom failure: ' ~ 42) }}", {}),
    ("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M %d %b %Y %A %B') }}", {}),
    ("joiner_cycler", "{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}", {}),
    # --- more printing and operator corners
    ("float_repr_edges", "{{ 1e16 }} {{ 0.0001 }} {{ 1e-5 }} {{ 123.456 }} {{ -0.0 }} {{ 1/3 }} {{ 2**62 }} {{ 10/4 }} {{ 'x' ~ 1.0 ~ 2.50 }} {{ 3 * 1.0 }} {{ 7 // 2.0 }} {{ 2 ** 0 }} {{ 0.1 * 3 }}", {}),
    ("str_format_specs", "{{ '{:02d}|{:>5}|{:.2f}|{!r}|{:<4}|{:^7}|{:*^7}|{:+d}|{:x}|{:.1%}|{:5.1f}|{:,}'.format(5, 'ab', 3.14159, 'x', 'l', 'mid', 'c', 3, 255, 0.256, 2.25, 7) }}", {}),
    ("filter_binds_tighter_than_ternary", "{{ 'a' if false else 'b' | upper }} {{ -1 | abs }} {{ not none is none }} {{ 1 + 2 | string }}", {}),
    ("dictsort_loop", "{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}", {"d": {"b": 2, "a": 1}}),
    ("default_on_missing_attr", "{{ x.y | default('z') }} {{ (x.y or 'w') }} {{ 'abc'[5] is defined }} {{ [1,2][1:][0] }}", {"x": {}}),
    ("string_ordering", "{{ 'é' < 'z' }} {{ 'Z' < 'a' }} {{ [1, 'a'] < [1, 'b'] }}", {}),
    ("percent_more", "{{ '%d%%' % 50 }} {{ '%.1f' % 2.25 }} {{ '%5s|%-5s|' % ('a', 'b') }} {{ '%s' % none }}", {}),
    ("tojson_indent_nested", "{{ [1, [2, 3]] | tojson(indent=2) }}|{{ {'a': [1, 2], 'b': {'c': none}} | tojson(indent=4) }}", {}),
    ("dict_views", "{{ d.items() }} {{ d.keys() }} {{ d.values() }}", {"d": {"b": 2, "a": 1}}),
    ("string_chain", "{% set t = 'a b c' %}{{ t.split(' ')[-1] }} {{ t.split()|length }} {{ t.upper().lower() }} {{ ['b', 'a'] | sort | join('-') }} {{ [3, 1] | max }}", {}),
    ("macro_caller_undefined", "{% macro m() %}{{ caller is defined }}{% endmacro %}{{ m() }}", {}),
    ("set_in_generation_scope", "{% set x = 1 %}{% generation %}{% set x = 2 %}{{ x }}{% endgeneration %}{{ x }}", {}),
    ("whitespace_mix", "<{%- if true %} a {% endif -%}>\n  {%- for i in [1, 2] %}\n    {{ i }}\n  {%- endfor %}\n{# c #}  end", {}),
    ("lstrip_after_text_on_line", "x {% if true %}y{% endif %}\n  {% if true %}z{% endif %}", {}),
    ("unicode_methods", "{{ 'ÉCOLE'.lower() }} {{ 'straße'.upper() }} {{ '  ü  '.strip() }} {{ 'a\u00a0b'.split() }}", {}),
    ("messages_reversed_search", "{% for m in messages|reverse %}{% if m.role == 'user' %}{{ m.content }}{% break %}{% endif %}{% endfor %}", {"messages": [{"role": "user", "content": "first"}, {"role": "user", "content": "last"}, {"role": "assistant", "content": "a"}]}),
    ("err_macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("err_macro_unknown_kwarg", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}", {}),
    ("real_llama31_idioms", "{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = '26 Jul 2024' %}{%- endif %}{%- endif %}{{ date_string }}|{{ builtin_tools | reject('equalto', 'code_interpreter') | join(', ') }}|{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}{{ system_message }}|{{ messages | length }}", {"builtin_tools": ["code_interpreter", "brave_search", "wolfram_alpha"], "messages": [{"role": "system", "content": "  sys  "}, {"role": "user", "content": "u"}]}),
    ("real_typescript_macro", """{%- macro render_type(spec, required, is_nullable=false) -%}
    {%- if spec.type == "array" -%}
        {%- if spec['items'] -%}{{- render_type(spec['items'], required) + "[]" }}{%- else -%}{{- "any[]" }}{%- endif -%}
    {%- elif spec.type is defined and spec.type is iterable and spec.type is not string -%}
        {%- for t in spec.type -%}{{- render_type({"type": t}, required) -}}{%- if not loop.last -%}{{- " | " }}{%- endif -%}{%- endfor -%}
    {%- elif spec.enum -%}
        {%- for v in spec.enum -%}{{- v | tojson -}}{%- if not loop.last -%}{{- " | " }}{%- endif -%}{%- endfor -%}
    {%- elif spec.type == "object" -%}
        {{- "{\\n" }}{%- for name, p in spec.properties.items() -%}{{- name }}{%- if name not in (spec.required or []) -%}?{%- endif -%}: {{ render_type(p, required) }}{%- if not loop.last -%},{% endif %}{{- "\\n" }}{%- endfor -%}{{- "}" }}
    {%- elif spec.type in ["string", "number", "boolean"] -%}{{- spec.type }}{%- if is_nullable %} | null{% endif -%}
    {%- else -%}{{- "any" }}
    {%- endif -%}
{%- endmacro -%}
{%- for tool in tools %}
type {{ tool.function.name }} = (_: {{ render_type(tool.function.parameters, tool.function.parameters.required or [], true) }}) => any;
{% endfor %}""", {"tools": [{"function": {"name": "get_weather", "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}, "unit": {"enum": ["c", "f"]}, "tags": {"type": "array", "items": {"type": "string"}}, "raw": {"type": "array"}}}}}]}),
    ("real_qwen25_tool_loop", "{%- for message in messages %}{%- if message.role == 'tool' %}{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}<|im_start|>user{%- endif %}\n<tool_response>\n{{ message.content }}\n</tool_response>{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}<|im_end|>\n{%- endif %}{%- elif message.role == 'assistant' %}{%- for tool_call in message.tool_calls %}{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}\n<tool_call>\n{\"name\": \"{{ tool_call.name }}\", \"arguments\": {{ tool_call.arguments | tojson }}}\n</tool_call>{%- endfor %}{%- endif %}{%- endfor %}", {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {"x": "ü", "n": [1, 2.5]}}}, {"name": "b", "arguments": {}}]}, {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}]}),
    ("real_harmony_namespace", "{%- set last_tool_call = namespace(name=none) %}{%- for m in messages %}{%- if m.tool_calls %}{%- set last_tool_call.name = m.tool_calls[0].function.name %}{%- elif m.role == 'tool' %}{%- if last_tool_call.name is none %}{{- raise_exception('Message has tool role, but there was no previous assistant message with a tool call!') }}{%- endif %}<|start|>functions.{{ last_tool_call.name }}{%- endif %}{%- endfor %}{%- if reasoning_effort is not defined %}{%- set reasoning_effort = 'medium' %}{%- endif %}|{{ 'Reasoning: ' + reasoning_effort }}", {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "lookup"}}]}, {"role": "tool", "content": "x"}]}),
    ("real_harmony_raise", "{%- set last = namespace(name=none) %}{%- for m in messages %}{%- if m.role == 'tool' and last.name is none %}{{- raise_exception('Message has tool role, but there was no previous assistant message with a tool call!') }}{%- endif %}{%- endfor %}", {"messages": [{"role": "tool", "content": "x"}]}),
    # --- errors jinja2 raises
    ("err_unknown_filter", "{{ 1 | no_such_filter }}", {}),
    ("err_unclosed_block", "{% if true %}x", {}),
    ("err_unexpected_end", "{% endfor %}", {}),
    ("err_bad_expr", "{{ 1 + }}", {}),
    ("err_attr_of_undefined", "{{ nothing.attr }}", {}),
    ("err_call_undefined", "{{ nothing() }}", {}),
    ("err_add_str_int", "{{ 'a' + 1 }}", {}),
    ("err_list_append", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("err_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_undefined_arith", "{{ nothing + 1 }}", {}),
    ("err_tojson_undefined", "{{ nothing | tojson }}", {}),
    ("err_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_include", "{% include 'other.j2' %}", {}),
    # --- shapes from real templates
    ("real_last_user_index", "{% set ns = namespace(last=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.last }}{% for m in messages[::-1] %}{% set idx = (messages|length - 1) - loop.index0 %}{{ idx }}{% endfor %}", {"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "tool"}]}),
    ("real_content_parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for part in m.content %}{% if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image' %}<img>{% endif %}{% endfor %}{% endif %}\n{% endfor %}", {"messages": [{"content": "plain"}, {"content": [{"type": "text", "text": "t1"}, {"type": "image"}, {"type": "text", "text": "t2"}]}]}),
    ("real_tool_args", "{% for tc in calls %}{% if tc.arguments is string %}{{ tc.arguments }}{% else %}{{ tc.arguments | tojson }}{% endif %}\n{% endfor %}", {"calls": [{"arguments": "{\"a\": 1}"}, {"arguments": {"b": [1, 2], "c": "ü"}}]}),
    ("real_split_think", "{% set c = content %}{% if '</think>' in c %}{% set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}{% set c = c.split('</think>')[-1].lstrip('\\n') %}{% endif %}[{{ r }}][{{ c }}]", {"content": "<think>\nhmm\n</think>\n\nanswer"}),
    ("real_messages_slicing", "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set rest = messages[1:] %}{% else %}{% set sys = '' %}{% set rest = messages %}{% endif %}{{ sys }}|{{ rest | length }}|{{ rest | map(attribute='role') | join(',') }}", {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}),
    ("real_deep_indent", "{%- for m in messages %}\n    {%- if m.role == 'user' %}\n        {{- '<u>' + m.content }}\n    {%- else %}\n        {{- '<a>' + m.content }}\n    {%- endif %}\n{%- endfor %}\n", {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}),
]


def render_feature(template, context):
    try:
        env = compile_template("").environment
        return {"output": env.from_string(template).render(**context)}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e), "raise_exception": type(e) is jinja2.exceptions.TemplateError}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "raise_exception": False}


def main():
    testdata = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "testdata"
    (OUT / "expected").mkdir(parents=True, exist_ok=True)
    conversations = [{"name": c["name"], "messages": c["messages"], "tools": c.get("tools"),
                      "kwargs": c.get("kwargs", {})} for c in CONVERSATIONS]
    write_json(OUT / "conversations.json", {"now": FIXED_NOW, "conversations": conversations})

    for name, source, special_tokens in load_templates(testdata):
        cases = []
        for conv in conversations:
            for agp in (False, True):
                result = render(source, conv["messages"], conv["tools"], agp, special_tokens, conv["kwargs"])
                case = {"conversation": conv["name"], "add_generation_prompt": agp, **result}
                if conv["tools"] is None:  # what the same conversation gives with `tools` undefined
                    case["tools_undefined"] = render(source, conv["messages"], None, agp, special_tokens,
                                                     conv["kwargs"], tools_undefined=True)
                cases.append(case)
        write_json(OUT / "expected" / f"{name}.json", {
            "template": name, "special_tokens": special_tokens, "cases": cases})
        errors = sum("error" in c for c in cases)
        print(f"{name}: {len(cases)} cases, {errors} errors")

    features = []
    for name, template, context in FEATURES:
        features.append({"name": name, "template": template, "context": context,
                         **render_feature(template, context)})
    write_json(OUT / "features.json", {"now": FIXED_NOW, "features": features})
    print(f"features: {len(features)}")


def write_json(path, data):
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
