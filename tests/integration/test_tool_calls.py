#!/usr/bin/env python3
"""Tool calling and reasoning content through the official `openai` Python client, against the
real slabserve binary serving stories260K with real chat templates.

Usage: test_tool_calls.py SLABSERVE_BINARY TESTDATA_DIR
Exits 77 (ctest's "skipped") with a message when the openai package or the shared test data is
absent.

stories260K never calls a tool on its own, so calls here are forced (tool_choice required or a
named function: the grammar makes the model write a well-formed call, sampled at temperature 1)
and then parsed back from the model's text into tool_calls; reasoning is split from output a
regex forces into the <think> shape.
"""
import json
import os
import sys
import tempfile
import unittest
import urllib.request

from slabserve_process import SlabserveProcess, binary_and_testdata, import_or_skip, require_paths

openai = import_or_skip("openai")

BINARY, TESTDATA = binary_and_testdata()
MODEL_DIR = os.path.join(TESTDATA, "models", "stories260K")
TEMPLATES = os.path.join(TESTDATA, "chat-templates")
DEEPSEEK_R1 = os.path.join(TEMPLATES, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
QWEN3_CONFIG = os.path.join(TESTDATA, "tokenizers", "qwen3", "tokenizer_config.json")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 16},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a timezone",
    "parameters": {"type": "object", "properties": {"offset_hours": {"type": "integer", "minimum": -12,
                                                                       "maximum": 14}},
                   "required": ["offset_hours"], "additionalProperties": False}}}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]

# stories260K's context is 512 tokens of a 512-piece vocabulary: the real tool-use templates
# (Hermes-2-Pro, Mistral-Nemo) render two tools' JSON into 900-1200 tokens. These compact
# templates keep each family's call syntax, which is what the server detects and parses (the real
# templates' detection and rendering are unit-tested: test_tool_calls.cpp, test_chat_template.cpp).
HERMES_COMPACT = (
    "{% if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}{% endfor %}. "
    "Call one as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments }}}\n"
    "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MISTRAL_COMPACT = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
    "{% elif m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | tojson }}{{ eos_token }}"
    "{% else %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}")


def template_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False)
    f.write(text)
    f.close()
    return f.name


def check_call(test, call):
    test.assertTrue(call.id.startswith("call_"))
    test.assertEqual(call.type, "function")
    args = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        test.assertEqual(sorted(args), ["city", "unit"])
        test.assertIn(args["unit"], ("celsius", "fahrenheit"))
        test.assertLessEqual(len(args["city"]), 16)
    else:
        test.assertEqual(call.function.name, "get_time")
        test.assertTrue(-12 <= args["offset_hours"] <= 14)


class ToolCallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.template = template_file(HERMES_COMPACT)
        cls.server = SlabserveProcess(BINARY, MODEL_DIR, "--chat-template", cls.template)
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key="unused", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        os.unlink(cls.template)

    def test_required_and_named_calls_come_back_as_tool_calls(self):
        names = set()
        for seed in range(6):
            r = self.client.chat.completions.create(model="stories260K", messages=MESSAGES, tools=[WEATHER, TIME],
                                                    tool_choice="required", parallel_tool_calls=False,
                                                    temperature=1.0, seed=seed, max_tokens=300)
            choice = r.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
            self.assertEqual(len(choice.message.tool_calls), 1)
            self.assertIsNone(choice.message.content)
            check_call(self, choice.message.tool_calls[0])
            names.add(choice.message.tool_calls[0].function.name)
        # Parallel calls: this model never stops calling on its own, so the context ends it; every
        # complete call is parsed and valid, the unfinished last one stays text.
        r = self.client.chat.completions.create(model="stories260K", messages=MESSAGES, tools=[WEATHER, TIME],
                                                tool_choice="required", temperature=1.0, seed=1, max_tokens=300)
        self.assertIn(r.choices[0].finish_reason, ("tool_calls", "length"))
        self.assertGreaterEqual(len(r.choices[0].message.tool_calls), 2)
        for call in r.choices[0].message.tool_calls:
            check_call(self, call)
        named = self.client.chat.completions.create(
            model="stories260K", messages=MESSAGES, tools=[WEATHER, TIME], temperature=1.0, seed=9, max_tokens=300,
            tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False)
        self.assertEqual([c.function.name for c in named.choices[0].message.tool_calls], ["get_time"])
        check_call(self, named.choices[0].message.tool_calls[0])

    def test_auto_parses_the_calls_the_model_writes(self):
        # tool_choice auto forces nothing; a regex makes this model write what a tool-using model
        # would (text, then a Hermes call), and the server parses it out of the text.
        pattern = r'[a-z]{3,8}\n<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "[a-z]{2,8}", ' \
                  r'"unit": "celsius"\}\}\n</tool_call>'
        r = self.client.chat.completions.create(model="stories260K", messages=MESSAGES, tools=[WEATHER],
                                                temperature=1.0, seed=5, max_tokens=200,
                                                extra_body={"guided_regex": pattern})
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertRegex(choice.message.content, r"^[a-z]{3,8}$")
        self.assertEqual(len(choice.message.tool_calls), 1)
        check_call(self, choice.message.tool_calls[0])
        plain = self.client.chat.completions.create(model="stories260K", messages=MESSAGES, tools=[WEATHER],
                                                    tool_choice="none", temperature=1.0, seed=5, max_tokens=200,
                                                    extra_body={"guided_regex": pattern})
        self.assertIsNone(plain.choices[0].message.tool_calls)  # none: the same text is not parsed
        self.assertIn("<tool_call>", plain.choices[0].message.content)

    def test_streamed_calls_assemble_like_the_whole_response(self):
        kwargs = dict(model="stories260K", messages=MESSAGES, tools=[WEATHER], temperature=1.0, seed=4,
                      max_tokens=300, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                      parallel_tool_calls=False)
        whole = self.client.chat.completions.create(**kwargs).choices[0]
        calls = {}
        finish = None
        for chunk in self.client.chat.completions.create(stream=True, **kwargs):
            for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(delta_call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += delta_call.id or ""
                entry["name"] += (delta_call.function.name or "") if delta_call.function else ""
                entry["arguments"] += (delta_call.function.arguments or "") if delta_call.function else ""
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        self.assertEqual(finish, "tool_calls")
        self.assertEqual([(c["name"], json.loads(c["arguments"])) for c in calls.values()],
                         [(c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls])

    def test_a_conversation_with_tool_results_renders(self):
        messages = MESSAGES + [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temperature": 21})}]
        r = self.client.chat.completions.create(model="stories260K", messages=messages, tools=[WEATHER],
                                                max_tokens=8, temperature=0)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        tokens = self.post_json("/tokenize", {"messages": messages, "tools": [WEATHER]})["tokens"]
        prompt = self.post_json("/detokenize", {"tokens": tokens})["prompt"]
        self.assertIn('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"', prompt)
        self.assertIn('{"temperature": 21}', prompt)

    def post_json(self, path, body):
        request = urllib.request.Request(self.server.url + path, headers={"Content-Type": "application/json"},
                                         data=json.dumps(body).encode())
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    def test_refusals_name_the_field(self):
        cases = [({"tools": [{"type": "function", "function": {}}]}, "tools"),
                 ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tools"),
                 ({"tool_choice": "required"}, "tool_choice"),
                 ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}},
                  "tool_choice")]
        for extra, param in cases:
            with self.subTest(param=param, extra=extra):
                with self.assertRaises(openai.BadRequestError) as refused:
                    self.client.chat.completions.create(model="stories260K", messages=MESSAGES, max_tokens=4,
                                                        **extra)
                self.assertEqual(refused.exception.body["param"], param)


class MistralFormatTest(unittest.TestCase):
    def test_forced_calls_in_mistral_format(self):
        template = template_file(MISTRAL_COMPACT)
        server = SlabserveProcess(BINARY, MODEL_DIR, "--chat-template", template)
        try:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
            r = client.chat.completions.create(model="stories260K", messages=MESSAGES, tools=[WEATHER, TIME],
                                               tool_choice="required", parallel_tool_calls=False, temperature=1.0,
                                               seed=2, max_tokens=300)
            self.assertEqual(r.choices[0].finish_reason, "tool_calls")
            for call in r.choices[0].message.tool_calls:
                check_call(self, call)
        finally:
            server.stop()
            os.unlink(template)


class ReasoningTest(unittest.TestCase):
    def run_split(self, template, parser, pattern, seed):
        server = SlabserveProcess(BINARY, MODEL_DIR, "--chat-template", template, "--reasoning-parser", parser)
        try:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
            kwargs = dict(model="stories260K", messages=MESSAGES, temperature=1.0, seed=seed, max_tokens=200,
                          extra_body={"guided_regex": pattern})
            whole = client.chat.completions.create(**kwargs).choices[0]
            streamed = {"reasoning": "", "content": ""}
            for chunk in client.chat.completions.create(stream=True, **kwargs):
                if chunk.choices:
                    delta = chunk.choices[0].delta
                    streamed["reasoning"] += getattr(delta, "reasoning_content", None) or ""
                    streamed["content"] += delta.content or ""
            return whole, streamed
        finally:
            server.stop()

    def test_deepseek_r1_prompt_opens_the_block(self):
        whole, streamed = self.run_split(DEEPSEEK_R1, "deepseek_r1", r"[a-z ]{4,20}\n</think>\n\n[a-z]{2,10}", 1)
        reasoning = whole.message.model_extra["reasoning_content"]
        self.assertRegex(reasoning, r"^[a-z ]{4,20}\n$")
        self.assertRegex(whole.message.content, r"^[a-z]{2,10}$")
        self.assertEqual(streamed, {"reasoning": reasoning, "content": whole.message.content})

    def test_qwen3_output_opens_the_block(self):
        with open(QWEN3_CONFIG) as f:
            template = json.load(f)["chat_template"]
        with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
            f.write(template)
        try:
            whole, streamed = self.run_split(f.name, "qwen3", r"<think>\n[a-z ]{4,20}\n</think>\n\n[a-z]{2,10}", 2)
        finally:
            os.unlink(f.name)
        reasoning = whole.message.model_extra["reasoning_content"]
        self.assertRegex(reasoning, r"^\n?[a-z ]{4,20}\n$")
        self.assertRegex(whole.message.content, r"^[a-z]{2,10}$")
        self.assertNotIn("think>", whole.message.content + reasoning)
        self.assertEqual(streamed, {"reasoning": reasoning, "content": whole.message.content})


if __name__ == "__main__":
    for path in (MODEL_DIR, DEEPSEEK_R1, QWEN3_CONFIG):
        require_paths(path)
    unittest.main(argv=sys.argv[:1], verbosity=2)
