#!/usr/bin/env python3
"""The official `openai` Python client against the real slabserve binary on 127.0.0.1.

Usage: test_openai_client.py SLABSERVE_BINARY TESTDATA_DIR
Exits 77 (ctest's "skipped") with a message when the openai package or the shared test data
is absent.
"""
import json
import os
import sys
import unittest

from slabserve_process import SlabserveProcess, binary_and_testdata, import_or_skip, require_paths

openai = import_or_skip("openai")

BINARY, TESTDATA = binary_and_testdata()
MODEL_DIR = os.path.join(TESTDATA, "models", "stories260K")
TEMPLATE = os.path.join(TESTDATA, "chat-templates", "microsoft-Phi-3.5-mini-instruct.jinja")


class Server(SlabserveProcess):
    def __init__(self, *extra):
        super().__init__(BINARY, MODEL_DIR, *extra)

    def client(self, api_key="unused"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0)


class OpenAIClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--chat-template", TEMPLATE)
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_models(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], ["stories260K"])

    def test_completion_and_stream_agree(self):
        whole = self.client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=30,
                                               temperature=0)
        self.assertEqual(whole.object, "text_completion")
        self.assertTrue(0 < whole.usage.completion_tokens <= 30)
        self.assertIn(whole.choices[0].finish_reason, ("stop", "length"))
        chunks = list(self.client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=30,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, whole.choices[0].text)
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)

    def test_n_logprobs_and_stop(self):
        r = self.client.completions.create(model="stories260K", prompt="Lily", max_tokens=10, n=2, seed=3,
                                           temperature=1.0, logprobs=2)
        self.assertEqual(len(r.choices), 2)
        for choice in r.choices:
            self.assertEqual(len(choice.logprobs.tokens), len(choice.logprobs.token_logprobs))
            self.assertTrue(all(lp <= 0 for lp in choice.logprobs.token_logprobs))
            self.assertTrue(all(len(top) == 2 for top in choice.logprobs.top_logprobs))
        free = self.client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=60,
                                              temperature=0).choices[0].text
        cut = free.index(".")
        stopped = self.client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=60,
                                                 temperature=0, stop=["."])
        self.assertEqual(stopped.choices[0].text, free[:cut])
        self.assertEqual(stopped.choices[0].finish_reason, "stop")

    def test_chat_stream_with_usage(self):
        messages = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A story, please."}]
        whole = self.client.chat.completions.create(model="stories260K", messages=messages, max_tokens=20,
                                                    temperature=0)
        self.assertEqual(whole.choices[0].message.role, "assistant")
        chunks = list(self.client.chat.completions.create(model="stories260K", messages=messages, max_tokens=20,
                                                          temperature=0, stream=True,
                                                          stream_options={"include_usage": True}))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, whole.choices[0].message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finishes, [whole.choices[0].finish_reason])
        self.assertEqual(chunks[-1].usage.total_tokens, whole.usage.total_tokens)

    def test_structured_output_parses_into_pydantic_models(self):
        from typing import List, Literal, Optional

        from pydantic import BaseModel, Field

        class Forecast(BaseModel):
            city: str = Field(max_length=12)
            days: int = Field(ge=1, le=14)
            unit: Literal["celsius", "fahrenheit"]
            hours: Optional[List[int]]

        messages = [{"role": "user", "content": "The weather in Paris for three days, please."}]
        for seed in range(6):
            r = self.client.chat.completions.parse(model="stories260K", messages=messages, response_format=Forecast,
                                                   temperature=1.0, seed=seed, max_tokens=400)
            choice = r.choices[0]
            self.assertEqual(choice.finish_reason, "stop", choice.message.content)
            self.assertIsInstance(choice.message.parsed, Forecast)  # the SDK validated it
            self.assertTrue(1 <= choice.message.parsed.days <= 14)
            self.assertEqual(list(json.loads(choice.message.content)), ["city", "days", "unit", "hours"])
        # Streamed: the deltas add up to one valid document.
        schema = {"type": "json_schema", "json_schema": {"name": "forecast", "schema": Forecast.model_json_schema()}}
        chunks = list(self.client.chat.completions.create(model="stories260K", messages=messages, temperature=1.0,
                                                          seed=7, max_tokens=400, stream=True, response_format=schema))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "stop")
        Forecast.model_validate_json(text)

    def test_guided_fields_of_vllm_and_llama_server(self):
        choice = self.client.completions.create(model="stories260K", prompt="Is it raining?", max_tokens=20,
                                                temperature=1.0, seed=1,
                                                extra_body={"guided_choice": ["yes", "no", "don't know"]})
        self.assertIn(choice.choices[0].text, ["yes", "no", "don't know"])
        self.assertEqual(choice.choices[0].finish_reason, "stop")
        regex = self.client.completions.create(model="stories260K", prompt="A date:", max_tokens=30, temperature=1.0,
                                               seed=2, extra_body={"guided_regex": r"20[0-9]{2}-[01][0-9]-[0-3][0-9]"})
        self.assertRegex(regex.choices[0].text, r"^20[0-9]{2}-[01][0-9]-[0-3][0-9]$")
        grammar = self.client.completions.create(model="stories260K", prompt="Count:", max_tokens=30, temperature=1.0,
                                                 seed=3, extra_body={"grammar": 'root ::= "one" ("," " "? "two"){1,3}'})
        self.assertRegex(grammar.choices[0].text, r"^one(, ?two){1,3}$")
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 9}},
                  "required": ["n"], "additionalProperties": False}
        for field in ("guided_json", "json_schema"):
            r = self.client.completions.create(model="stories260K", prompt="JSON:", max_tokens=60, temperature=1.0,
                                               seed=4, extra_body={field: schema})
            self.assertIn(json.loads(r.choices[0].text)["n"], range(5, 10))
        with self.assertRaises(openai.BadRequestError) as refused:
            self.client.completions.create(model="stories260K", prompt="x", max_tokens=5,
                                           extra_body={"guided_json": {"type": "object", "not": {}}})
        self.assertIn("'not'", str(refused.exception))

    def test_errors_are_typed(self):
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model="stories260K", prompt="x", temperature=-1)
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="gpt-nope", prompt="x")
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model="stories260K", messages=[])


class ApiKeyTest(unittest.TestCase):
    def test_key_is_required(self):
        server = Server("--api-key", "k3y")
        try:
            with self.assertRaises(openai.AuthenticationError):
                server.client("wrong").models.list()
            self.assertEqual(len(server.client("k3y").models.list().data), 1)
        finally:
            server.stop()


if __name__ == "__main__":
    require_paths(MODEL_DIR)
    unittest.main(argv=[sys.argv[0], "-v"])
