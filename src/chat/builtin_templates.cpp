#include "chat/builtin_templates.h"

namespace slab::chat {
namespace {

struct BuiltinTemplate {
  const char* name;
  const char* source;
};

// Written for this project from each family's published prompt format; each renders system, user
// and assistant turns and add_generation_prompt the way the family's own template does (tests
// compare them with the real templates' outputs where the shared test data has them). Other roles
// are rendered like user turns with their own role name. scripts/make_chat_builtin_fixtures.py
// reads the sources below, between R"jinja( and )jinja", to render them with Python jinja2.
const BuiltinTemplate kBuiltinTemplates[] = {
    // ChatML: <|im_start|>role ... <|im_end|>, no system turn unless one is given
    {"chatml",
     R"jinja({%- for message in messages -%}
{{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%})jinja"},

    // Llama 2 chat: the system prompt sits in <<SYS>> inside the first [INST], every exchange is
    // its own <s>...</s> sequence.
    {"llama2",
     R"jinja({%- set ns = namespace(system='') -%}
{%- if messages and messages[0].role == 'system' -%}
{%- set ns.system = '<<SYS>>\n' ~ (messages[0].content | trim) ~ '\n<</SYS>>\n\n' -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
{%- if message.role == 'assistant' -%}
{{- ' ' ~ (message.content | trim) ~ ' ' ~ eos_token -}}
{%- else -%}
{{- bos_token ~ '[INST] ' ~ (ns.system if loop.first else '') ~ (message.content | trim) ~ ' [/INST]' -}}
{%- endif -%}
{%- endfor -%})jinja"},

    // Llama 3: a header per turn, contents trimmed, the BOS token before the first turn.
    {"llama3",
     R"jinja({%- for message in messages -%}
{%- if loop.first -%}{{- bos_token -}}{%- endif -%}
{{- '<|start_header_id|>' ~ message.role ~ '<|end_header_id|>\n\n' ~ (message.content | trim) ~ '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%})jinja"},

    // Mistral (v3 / Nemo): no system turn; the system prompt is prepended to the user message when
    // that message is the conversation's last, which is where the prompt is being asked for.
    {"mistral",
     R"jinja({%- if messages and messages[0].role == 'system' -%}
{%- set system = messages[0].content -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set turns = messages -%}
{%- endif -%}
{{- bos_token -}}
{%- for message in turns -%}
{%- if message.role == 'assistant' -%}
{{- message.content ~ eos_token -}}
{%- elif loop.last and system is defined -%}
{{- '[INST]' ~ system ~ '\n\n' ~ message.content ~ '[/INST]' -}}
{%- else -%}
{{- '[INST]' ~ message.content ~ '[/INST]' -}}
{%- endif -%}
{%- endfor -%})jinja"},

    // Gemma 2 / 3: user and model turns only; a system prompt becomes the start of the first turn.
    {"gemma",
     R"jinja({{- bos_token -}}
{%- if messages and messages[0].role == 'system' -%}
{%- set prefix = messages[0].content ~ '\n\n' -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set prefix = '' -%}
{%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
{%- set role = 'model' if message.role == 'assistant' else message.role -%}
{{- '<start_of_turn>' ~ role ~ '\n' ~ (prefix if loop.first else '') ~ (message.content | trim) ~ '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\n' -}}
{%- endif -%})jinja"},

    // Phi-3 / 3.5: <|role|> tags; an empty system prompt is left out, and a prompt that is not
    // asking for a reply ends with the EOS token.
    {"phi3",
     R"jinja({%- for message in messages -%}
{%- if message.role != 'system' or message.content -%}
{{- '<|' ~ message.role ~ '|>\n' ~ message.content ~ '<|end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|assistant|>\n' -}}
{%- else -%}
{{- eos_token -}}
{%- endif -%})jinja"},

    // Qwen 3: ChatML with reasoning. An assistant turn after the last user message carries its
    // reasoning in <think> (an empty block when it is the final turn); earlier ones lose it.
    // enable_thinking=false asks for an empty <think> block in the generation prompt.
    {"qwen",
     R"jinja({%- set ns = namespace(last_user=(messages | length) - 1) -%}
{%- for message in messages -%}
{%- if message.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
{%- if message.role == 'assistant' -%}
{%- set text = message.content ~ '' -%}
{%- if message.reasoning_content is string -%}
{%- set thought = message.reasoning_content -%}
{%- elif '</think>' in text -%}
{%- set thought = text.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
{%- set text = text.split('</think>')[-1].lstrip('\n') -%}
{%- else -%}
{%- set thought = '' -%}
{%- endif -%}
{%- if loop.index0 > ns.last_user and (loop.last or thought) -%}
{{- '<|im_start|>assistant\n<think>\n' ~ thought.strip('\n') ~ '\n</think>\n\n' ~ text.lstrip('\n') ~ '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>assistant\n' ~ text ~ '<|im_end|>\n' -}}
{%- endif -%}
{%- else -%}
{{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}
{{- '<think>\n\n</think>\n\n' -}}
{%- endif -%}
{%- endif -%})jinja"},
};

}  // namespace

std::optional<std::string_view> builtin_chat_template(std::string_view name) {
  for (const auto& t : kBuiltinTemplates)
    if (name == t.name) return t.source;
  return std::nullopt;
}

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> names;
  for (const auto& t : kBuiltinTemplates) names.emplace_back(t.name);
  return names;
}

std::string builtin_chat_template_list() {
  std::string list;
  for (const auto& t : kBuiltinTemplates) list += (list.empty() ? "" : ", ") + std::string(t.name);
  return list;
}

}  // namespace slab::chat
