#!/usr/bin/env python3
"""Chat templates in the real server: the built-in named templates (--chat-template chatml, ...),
a tool-use-only template serving requests without tools, the 400 a model without a template gives,
and templates nested too deeply, refused at start-up (naming the file) or per request (400).

Usage: test_chat_templates.py SLABSERVE_BINARY TESTDATA_DIR
Exits 77 (ctest's "skipped") when the shared stories260K model is absent.
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from hostile_clients import post_json  # noqa: E402
from slabserve_process import SlabserveProcess, binary_and_testdata, require_paths  # noqa: E402

BINARY, TESTDATA = binary_and_testdata()
MODEL_DIR = os.path.join(TESTDATA, "models", "stories260K")
HERMES = os.path.join(TESTDATA, "chat-templates", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")
require_paths(MODEL_DIR)

BUILTIN_NAMES = ["chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "qwen"]
CHAT = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 4}


def rendered_prompt(port, messages):
    """The prompt the server's template renders for `messages`, through /tokenize and /detokenize."""
    status, body = post_json(port, "/tokenize", {"messages": messages})
    assert status == 200, body
    status, text = post_json(port, "/detokenize", {"tokens": body["tokens"]})
    assert status == 200, text
    return text["prompt"]


def serve(*extra):
    return SlabserveProcess(BINARY, MODEL_DIR, *extra)


def start_failure(*extra):
    """Runs `slabserve serve` expecting it to refuse to start: (exit code, output)."""
    proc = subprocess.run([BINARY, "serve", "--model", MODEL_DIR, "--host", "127.0.0.1", "--port", "1", *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    return proc.returncode, proc.stdout.decode(errors="replace")


def template_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False)
    f.write(text)
    f.close()
    return f.name


class ChatTemplateServerTest(unittest.TestCase):
    def test_builtin_templates_serve_chat(self):
        for name in BUILTIN_NAMES:
            with self.subTest(template=name):
                server = serve("--chat-template", name)
                try:
                    status, body = post_json(server.port, "/v1/chat/completions", CHAT)
                    self.assertEqual(status, 200, body)
                    self.assertEqual(body["choices"][0]["message"]["role"], "assistant")
                    if name == "chatml":
                        self.assertEqual(rendered_prompt(server.port, CHAT["messages"]),
                                         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                         "<|im_start|>assistant\n")
                finally:
                    self.assertEqual(server.stop(), 0)

    def test_tool_use_template_without_tools(self):
        # Hermes-2-Pro's tool_use template loops over `tools` unconditionally: rendered with `tools`
        # left undefined when a request has none (transformers' tools=None raises TypeError).
        server = serve("--chat-template", HERMES)
        try:
            prompt = rendered_prompt(server.port, CHAT["messages"])  # a 200 from /tokenize
            self.assertIn("Here are the available tools: <tools>  </tools>", prompt)
            self.assertTrue(prompt.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), prompt)
            # Rendered, but its tool preamble alone (630 tokens of stories260K's 512-piece
            # vocabulary) is longer than the model's 512-token context: the 400 says so.
            status, body = post_json(server.port, "/v1/chat/completions", CHAT)
            self.assertEqual(status, 400, body)
            self.assertIn("maximum context length", body["error"]["message"])
        finally:
            server.stop()

    def test_model_without_template_names_the_flag_and_the_builtins(self):
        server = serve()
        try:
            status, body = post_json(server.port, "/v1/chat/completions", CHAT)
            self.assertEqual(status, 400, body)
            message = body["error"]["message"]
            self.assertIn("--chat-template", message)
            self.assertIn(", ".join(BUILTIN_NAMES), message)
        finally:
            server.stop()

    def test_unknown_template_name_is_refused_listing_the_builtins(self):
        code, output = start_failure("--chat-template", "no-such-template")
        self.assertNotEqual(code, 0)
        self.assertIn("no-such-template", output)
        self.assertIn(", ".join(BUILTIN_NAMES), output)

    def test_template_nested_too_deeply_is_refused_at_start_naming_the_file(self):
        path = template_file("{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}")
        try:
            code, output = start_failure("--chat-template", path)
            self.assertNotEqual(code, 0)
            self.assertIn(path, output)
            self.assertIn("nested too deeply", output)
        finally:
            os.unlink(path)

    def test_runaway_recursion_while_rendering_is_a_400(self):
        blocks = "{% if true %}{% for x in [1] %}" * 60
        ends = "{% endfor %}{% endif %}" * 60
        path = template_file("{% macro f(n) %}" + blocks + "{{ f(n + 1) }}" + ends + "{% endmacro %}{{ f(0) }}")
        server = serve("--chat-template", path)
        try:
            status, body = post_json(server.port, "/v1/chat/completions", CHAT)
            self.assertEqual(status, 400, body)
            self.assertIn("recursion too deep", body["error"]["message"])
            # The server is still there.
            status, _ = post_json(server.port, "/v1/chat/completions", CHAT)
            self.assertEqual(status, 400)
        finally:
            self.assertEqual(server.stop(), 0)
            os.unlink(path)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
