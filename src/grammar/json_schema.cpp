// JSON Schema to GBNF: the compiler of what json_schema.h says is supported, and how.
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "grammar/gbnf_emit.h"
#include "grammar/json_schema_primitives.h"

namespace slab::grammar {

namespace {

using Json = nlohmann::ordered_json;
using detail::as_element;
using detail::CodePointSet;

constexpr int kMaxCount = 1000;
constexpr int kMaxDepth = 64;
constexpr size_t kMaxRules = 10000;
constexpr int kMaxIndent = 20;
constexpr double kMaxIntegerBound = 1e18;

const std::set<std::string> kAnnotations = {"title",    "description", "$schema",  "$id",
                                            "$comment", "default",     "examples", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kSupported = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "uniqueItems",
                                          "additionalItems"};
const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeywords = {"items", "prefixItems", "additionalItems", "minItems", "maxItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_pointer_token(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

[[noreturn]] void unsupported(const std::string& feature, const std::string& pointer) {
  throw GrammarError(std::string("unsupported JSON Schema feature '") + feature + "' at " + pointer);
}

[[noreturn]] void invalid(const std::string& what, const std::string& pointer) {
  throw GrammarError(std::string("invalid JSON Schema: ") + what + " at " + pointer);
}

// A primitive's body with its `ws` references dropped where whitespace is not allowed (the
// primitives hold no literal with a space in it).
std::string drop_ws_tokens(const std::string& body) {
  std::string out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find(' ', start);
    if (end == std::string::npos) end = body.size();
    std::string token = body.substr(start, end - start);
    if (token != "ws") out += (out.empty() ? "" : " ") + token;
    start = end + 1;
  }
  return out;
}

std::string seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    out += (out.empty() ? "" : " ") +
           (detail::binding_of(part) == detail::Binding::kAlternation ? std::string("( ") + part + " )" : part);
  }
  return out;
}

// A JSON string holding exactly this text.
std::string json_string_literal(const std::string& text) { return detail::json_string_content_gbnf(text, true); }

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

  std::string compile() {
    std::string root_expression = visit(root_, "#", "root", 0);
    // The rule made for the root schema itself is written as `root` (nothing else refers to it).
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      if (it->first == root_expression && it->first == "s-root") {
        root_expression = it->second;
        rules_.erase(it);
        break;
      }
    }
    return finish(root_expression);
  }

  // The grammar of any JSON object.
  std::string any_object() { return use("json-object"); }

  std::string finish(const std::string& root_expression) {
    std::string out = std::string("root ::= ") + root_expression + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    for (const auto& [name, body] : detail::kJsonPrimitives) {
      if (used_primitives_.count(name)) out += name + " ::= " + without_whitespace_rule(body) + "\n";
    }
    if (used_primitives_.count("ws"))
      out += std::string("ws ::= ( \" \" | \"\\n\" [ \\t]{0,") + std::to_string(kMaxIndent) + "} )?\n";
    return out;
  }

 private:
  // Marks a primitive rule (and those it uses) as needed; returns its name.
  std::string use(const std::string& name) {
    if (name == "ws" && !options_.allow_whitespace) return {};
    if (!used_primitives_.insert(name).second) return name;
    auto found = detail::kJsonPrimitiveDependencies.find(name);
    if (found != detail::kJsonPrimitiveDependencies.end()) {
      for (const auto& dependency : found->second) use(dependency);
    }
    return name;
  }

  std::string ws() { return use("ws"); }

  std::string without_whitespace_rule(const std::string& body) const {
    return options_.allow_whitespace ? body : drop_ws_tokens(body);
  }

  std::string unique_name(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (word) {
        base += c;
      } else if (!base.empty() && base.back() != '-') {
        base += '-';
      }
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty() || base == "root" || base.rfind("json-", 0) == 0 || base == "ws") base = std::string("s-") + base;
    if (base.size() > 60) base.resize(60);
    std::string name = base;
    for (int suffix = 2; !names_.insert(name).second; ++suffix) name = base + "-" + std::to_string(suffix);
    return name;
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    if (rules_.size() >= kMaxRules) {
      throw GrammarError(std::string("JSON Schema too large: more than ") + std::to_string(kMaxRules) +
                         " grammar rules");
    }
    std::string name = unique_name(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  // A rule unless the expression is already a single element.
  std::string element(const std::string& hint, const std::string& expression) {
    if (detail::binding_of(expression) == detail::Binding::kElement) return expression;
    return add_rule(hint, expression);
  }

  static int count_keyword(const Json& schema, const char* key, const std::string& pointer) {
    if (!schema.contains(key)) return -1;
    const Json& value = schema[key];
    if (!value.is_number_integer() &&
        !(value.is_number_float() && std::floor(value.get<double>()) == value.get<double>())) {
      invalid(std::string("'") + key + "' is not an integer", pointer);
    }
    double count = value.get<double>();
    if (count < 0) invalid(std::string("'") + key + "' is negative", pointer);
    if (count > kMaxCount) {
      throw GrammarError(std::string("JSON Schema '") + key + "' of " + value.dump() + " is above the limit of " +
                         std::to_string(kMaxCount) + " at " + pointer);
    }
    return static_cast<int>(count);
  }

  std::string visit(const Json& schema, const std::string& pointer, const std::string& name, int depth) {
    if (depth > kMaxDepth) {
      throw GrammarError(std::string("JSON Schema nested deeper than ") + std::to_string(kMaxDepth) + " at " + pointer);
    }
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return use("json-value");
      invalid("schema 'false' matches nothing", pointer);
    }
    if (!schema.is_object()) invalid("a schema must be an object or a boolean", pointer);
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.count(key)) continue;
      if (!kSupported.count(key)) unsupported(key, pointer);
      if (key == "uniqueItems" && value != false) unsupported("uniqueItems", pointer);
    }
    Json constraints = Json::object();  // the keywords that constrain, annotations dropped
    for (const auto& [key, value] : schema.items()) {
      if (!kAnnotations.count(key)) constraints[key] = value;
    }

    if (constraints.contains("$ref")) {
      for (const auto& [key, value] : constraints.items()) {
        if (key != "$ref") unsupported(std::string("$ref beside '") + key + "'", pointer);
      }
      return reference(constraints["$ref"], pointer + "/$ref", depth);
    }
    if (constraints.contains("allOf")) {
      const Json& members = constraints["allOf"];
      if (!members.is_array() || members.empty()) invalid("'allOf' must be a non-empty array", pointer);
      if (members.size() > 1) unsupported("allOf with more than one schema", pointer + "/allOf");
      Json rest = constraints;
      rest.erase("allOf");
      return visit(merge(rest, members[0], pointer + "/allOf/0"), pointer + "/allOf/0", name, depth + 1);
    }
    if (constraints.contains("anyOf") || constraints.contains("oneOf")) {
      if (constraints.contains("anyOf") && constraints.contains("oneOf")) unsupported("anyOf beside oneOf", pointer);
      std::string keyword = constraints.contains("anyOf") ? "anyOf" : "oneOf";
      const Json& branches = constraints[keyword];
      if (!branches.is_array() || branches.empty())
        invalid(std::string("'") + keyword + "' must be a non-empty array", pointer);
      Json rest = constraints;
      rest.erase(keyword);
      std::string body;
      for (size_t i = 0; i < branches.size(); ++i) {
        std::string branch_pointer = pointer + "/" + keyword + "/" + std::to_string(i);
        std::string branch =
            visit(merge(rest, branches[i], branch_pointer), branch_pointer, name + "-" + std::to_string(i), depth + 1);
        body += (body.empty() ? "" : " | ") + branch;
      }
      return element(name, body);
    }
    if (constraints.contains("const")) return element(name, json_value_literal(constraints["const"]));
    if (constraints.contains("enum")) {
      const Json& values = constraints["enum"];
      if (!values.is_array() || values.empty()) invalid("'enum' must be a non-empty array", pointer);
      std::string body;
      for (const auto& value : values) body += (body.empty() ? "" : " | ") + as_element(json_value_literal(value));
      return element(name, body);
    }

    std::vector<std::string> types;
    if (constraints.contains("type")) {
      const Json& type = constraints["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const auto& t : type) {
          if (!t.is_string()) invalid("'type' must hold type names", pointer);
          types.push_back(t.get<std::string>());
        }
      } else {
        invalid("'type' must be a type name or a non-empty list of them", pointer);
      }
    } else {
      auto has_any = [&](const std::set<std::string>& keys) {
        for (const auto& key : keys) {
          if (constraints.contains(key)) return true;
        }
        return false;
      };
      if (has_any(kObjectKeywords)) types.push_back("object");
      if (has_any(kArrayKeywords)) types.push_back("array");
      if (has_any(kStringKeywords)) types.push_back("string");
      if (has_any(kNumberKeywords)) types.push_back("number");
      if (types.empty()) return use("json-value");
    }
    std::string body;
    for (const auto& type : types) {
      std::string typed = typed_value(constraints, type, pointer, types.size() > 1 ? name + "-" + type : name, depth);
      body += (body.empty() ? "" : " | ") + typed;
    }
    return element(name, body);
  }

  // Keywords beside a combinator applied to one of its branches.
  static Json merge(const Json& outer, const Json& branch, const std::string& pointer) {
    if (branch.is_boolean()) {
      if (!branch.get<bool>()) invalid("schema 'false' matches nothing", pointer);
      return outer.empty() ? Json(true) : outer;
    }
    if (outer.empty()) return branch;
    if (!branch.is_object()) invalid("a schema must be an object or a boolean", pointer);
    Json merged = outer;
    for (const auto& [key, value] : branch.items()) {
      if (merged.contains(key) && !kAnnotations.count(key))
        unsupported(std::string("'") + key + "' both beside and inside a combinator", pointer);
      merged[key] = value;
    }
    return merged;
  }

  std::string reference(const Json& ref, const std::string& pointer, int depth) {
    if (!ref.is_string()) invalid("'$ref' must be a string", pointer);
    const std::string target = ref.get<std::string>();
    auto known = references_.find(target);
    if (known != references_.end()) return known->second;
    const Json* schema = nullptr;
    std::string hint;
    std::string target_pointer;
    if (target == "#") {
      schema = &root_;
      hint = "schema-root";
      target_pointer = "#";
    } else {
      for (const std::string container : {"$defs", "definitions"}) {
        std::string prefix = std::string("#/") + container + "/";
        if (target.rfind(prefix, 0) != 0) continue;
        std::string key = target.substr(prefix.size());
        if (key.find('/') != std::string::npos) break;
        key = unescape_pointer_token(key);
        if (!root_.contains(container) || !root_[container].is_object() || !root_[container].contains(key)) {
          invalid(std::string("'$ref' to a missing definition '") + target + "'", pointer);
        }
        schema = &root_[container][key];
        hint = std::string("def-") + key;
        target_pointer = target;
      }
    }
    if (!schema) unsupported(std::string("$ref to '") + target + "'", pointer);
    std::string rule = unique_name(hint);
    references_[target] = rule;
    size_t index = rules_.size();
    rules_.emplace_back(rule, "");
    rules_[index].second = visit(*schema, target_pointer, rule + "-value", depth + 1);
    return rule;
  }

  // A JSON value written as the given one (whitespace allowed between its tokens).
  std::string json_value_literal(const Json& value) {
    if (value.is_string()) return json_string_literal(value.get<std::string>());
    if (value.is_array()) {
      std::string out = seq({"\"[\"", ws()});
      for (size_t i = 0; i < value.size(); ++i) {
        out = seq({out, i ? seq({"\",\"", ws()}) : "", as_element(json_value_literal(value[i])), ws()});
      }
      return seq({out, "\"]\""});
    }
    if (value.is_object()) {
      std::string out = seq({"\"{\"", ws()});
      bool first = true;
      for (const auto& [key, member] : value.items()) {
        out = seq({out, first ? "" : seq({"\",\"", ws()}), json_string_literal(key), ws(), "\":\"", ws(),
                   as_element(json_value_literal(member)), ws()});
        first = false;
      }
      return seq({out, "\"}\""});
    }
    return detail::gbnf_literal(value.dump());
  }

  std::string typed_value(const Json& schema, const std::string& type, const std::string& pointer,
                          const std::string& name, int depth) {
    if (type == "string") return string_value(schema, pointer, name);
    if (type == "integer") return integer_value(schema, pointer, name);
    if (type == "number") return number_value(schema, pointer);
    if (type == "boolean") return use("json-boolean");
    if (type == "null") return use("json-null");
    if (type == "object") return object_value(schema, pointer, name, depth);
    if (type == "array") return array_value(schema, pointer, name, depth);
    invalid(std::string("unknown type '") + type + "'", pointer + "/type");
  }

  std::string string_value(const Json& schema, const std::string& pointer, const std::string& name) {
    int min_length = count_keyword(schema, "minLength", pointer);
    int max_length = count_keyword(schema, "maxLength", pointer);
    bool has_length = min_length >= 0 || max_length >= 0;
    if (schema.contains("format")) {
      if (!schema["format"].is_string()) invalid("'format' must be a string", pointer);
      std::string format = schema["format"].get<std::string>();
      auto found = detail::kJsonFormats.find(format);
      if (found == detail::kJsonFormats.end()) unsupported(std::string("format '") + format + "'", pointer + "/format");
      if (schema.contains("pattern")) unsupported("format beside pattern", pointer);
      if (has_length) unsupported("format beside minLength/maxLength", pointer);
      for (const auto& dependency : found->second.second) use(dependency);
      return add_rule(name, std::string("\"\\\"\" ") + found->second.first + " \"\\\"\"");
    }
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) invalid("'pattern' must be a string", pointer);
      if (has_length) unsupported("pattern beside minLength/maxLength", pointer);
      std::string content;
      try {
        content = detail::regex_to_gbnf_expression(schema["pattern"].get<std::string>(),
                                                   detail::RegexTarget::kJsonStringContent, "json-nonascii-escape");
      } catch (const GrammarError& e) {
        throw GrammarError(std::string("unsupported JSON Schema feature 'pattern' at ") + pointer +
                           "/pattern: " + e.what());
      }
      if (content.find("json-nonascii-escape") != std::string::npos) use("json-nonascii-escape");
      return add_rule(name, seq({"\"\\\"\"", content == "\"\"" ? "" : content, "\"\\\"\""}));
    }
    use("json-char");
    if (!has_length) return use("json-string");
    if (max_length >= 0 && min_length > max_length) invalid("minLength above maxLength", pointer);
    int min = std::max(min_length, 0);
    if (max_length == 0) return detail::gbnf_literal("\"\"");
    return add_rule(name, std::string("\"\\\"\" json-char") + detail::quantifier_suffix(min, max_length) + " \"\\\"\"");
  }

  // The bound as a number, or nullopt; draft-4 boolean exclusive* turn minimum/maximum exclusive.
  static std::optional<double> bound(const Json& schema, const char* key, const std::string& pointer) {
    if (!schema.contains(key)) return std::nullopt;
    const Json& value = schema[key];
    if (value.is_boolean()) return std::nullopt;
    if (!value.is_number()) invalid(std::string("'") + key + "' must be a number", pointer);
    return value.get<double>();
  }

  std::string integer_value(const Json& schema, const std::string& pointer, const std::string& name) {
    std::optional<double> lo;
    std::optional<double> hi;
    auto raise_lo = [&](double v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower_hi = [&](double v) { hi = hi ? std::min(*hi, v) : v; };
    bool draft4_exclusive_min = schema.contains("exclusiveMinimum") && schema["exclusiveMinimum"] == true;
    bool draft4_exclusive_max = schema.contains("exclusiveMaximum") && schema["exclusiveMaximum"] == true;
    if (auto v = bound(schema, "minimum", pointer)) raise_lo(draft4_exclusive_min ? std::floor(*v) + 1 : std::ceil(*v));
    if (auto v = bound(schema, "maximum", pointer)) lower_hi(draft4_exclusive_max ? std::ceil(*v) - 1 : std::floor(*v));
    if (auto v = bound(schema, "exclusiveMinimum", pointer)) raise_lo(std::floor(*v) + 1);
    if (auto v = bound(schema, "exclusiveMaximum", pointer)) lower_hi(std::ceil(*v) - 1);
    if (!lo && !hi) return use("json-integer");
    for (const auto& v : {lo, hi}) {
      if (v && std::fabs(*v) > kMaxIntegerBound) unsupported("integer bound beyond +-10^18", pointer);
    }
    if (lo && hi && *lo > *hi) invalid("integer bounds admit no value", pointer);
    std::optional<int64_t> low;
    std::optional<int64_t> high;
    if (lo) low = static_cast<int64_t>(*lo);
    if (hi) high = static_cast<int64_t>(*hi);
    return add_rule(name, detail::integer_range_gbnf(low, high));
  }

  std::string number_value(const Json& schema, const std::string& pointer) {
    bool nonnegative = false;
    bool positive = false;
    for (const auto& [key, value] : schema.items()) {
      if (!kNumberKeywords.count(key)) continue;
      if (key == "minimum" && value.is_number() && value.get<double>() == 0) {
        nonnegative = true;
      } else if (key == "exclusiveMinimum" && value.is_number() && value.get<double>() == 0) {
        positive = true;
      } else if ((key == "exclusiveMinimum" || key == "exclusiveMaximum") && value == false) {
        continue;
      } else if (key == "exclusiveMinimum" && value == true && schema.contains("minimum") && schema["minimum"] == 0) {
        positive = true;
      } else {
        unsupported(std::string("number ") + key + " " + value.dump() + " (only minimum 0 and exclusiveMinimum 0)",
                    pointer + "/" + key);
      }
    }
    if (positive) return use("json-positive-number");
    if (nonnegative) return use("json-nonnegative-number");
    return use("json-number");
  }

  std::string object_value(const Json& schema, const std::string& pointer, const std::string& name, int depth) {
    const bool has_properties = schema.contains("properties");
    const Json properties = has_properties ? schema["properties"] : Json::object();
    if (!properties.is_object()) invalid("'properties' must be an object", pointer);
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) invalid("'required' must be an array", pointer);
      for (const auto& key : schema["required"]) {
        if (!key.is_string()) invalid("'required' must hold strings", pointer);
        if (!properties.contains(key.get<std::string>())) {
          unsupported(std::string("required property '") + key.get<std::string>() + "' not declared in properties",
                      pointer + "/required");
        }
        required.insert(key.get<std::string>());
      }
    }
    const Json* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    if (!has_properties && (!additional || *additional == true)) return use("json-object");

    std::string extra_member;
    if (additional && *additional != false) {
      std::string value = *additional == true
                              ? use("json-value")
                              : visit(*additional, pointer + "/additionalProperties", name + "-additional", depth + 1);
      std::vector<std::string> declared;
      for (const auto& [key, property] : properties.items()) declared.push_back(key);
      std::string key = declared.empty() ? use("json-string") : key_not_declared(declared, name + "-additional-key");
      extra_member = add_rule(name + "-additional-kv", seq({key, ws(), "\":\"", ws(), value, ws()}));
    }
    std::vector<std::pair<std::string, bool>> members;  // member rule, required
    for (const auto& [key, property] : properties.items()) {
      std::string value = visit(property, pointer + "/properties/" + pointer_token(key), name + "-" + key, depth + 1);
      std::string member =
          add_rule(name + "-" + key + "-kv", seq({json_string_literal(key), ws(), "\":\"", ws(), value, ws()}));
      members.emplace_back(member, required.count(key) > 0);
    }
    // tail[i]: members i.. after at least one member; first[i]: members i.. with none before.
    const std::string comma = seq({"\",\"", ws()});
    std::string tail = extra_member.empty() ? "" : std::string("( ") + seq({comma, extra_member}) + " )*";
    std::string first = extra_member.empty() ? "" : std::string("( ") + seq({extra_member, tail}) + " )?";
    for (size_t i = members.size(); i-- > 0;) {
      const auto& [member, is_required] = members[i];
      std::string piece = seq({comma, member});
      std::string next_tail = is_required ? seq({piece, tail}) : seq({std::string("( ") + piece + " )?", tail});
      std::string with_member = seq({member, tail});
      std::string next_first = is_required     ? with_member
                               : first.empty() ? std::string("( ") + with_member + " )?"
                                               : with_member + " | " + first;
      tail = i > 0 && detail::binding_of(next_tail) != detail::Binding::kElement ? add_rule(name + "-tail", next_tail)
                                                                                 : next_tail;
      first = detail::binding_of(next_first) != detail::Binding::kElement ? add_rule(name + "-from", next_first)
                                                                          : next_first;
    }
    return add_rule(name, seq({"\"{\"", ws(), first, "\"}\""}));
  }

  // A JSON string other than the declared keys (so that an extra key cannot repeat one): a trie
  // of the keys' characters, each node a rule; a character off the trie frees the rest of the
  // string. Keys spelled with needless \\u escapes of ASCII characters are not admitted.
  std::string key_not_declared(const std::vector<std::string>& keys, const std::string& hint) {
    struct Node {
      std::map<uint32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const auto& key : keys) {
      size_t node = 0;
      for (size_t pos = 0; pos < key.size();) {
        uint32_t cp = detail::next_code_point(key, pos);
        auto found = trie[node].children.find(cp);
        if (found == trie[node].children.end()) {
          trie[node].children.emplace(cp, trie.size());
          node = trie.size();
          trie.emplace_back();
        } else {
          node = found->second;
        }
      }
      trie[node].terminal = true;
    }
    use("json-char");
    const std::string key_rule = unique_name(hint);
    std::vector<std::string> rules(trie.size());
    for (auto& rule : rules) rule = unique_name(hint + "-trie");
    for (size_t i = 0; i < trie.size(); ++i) {
      std::string body;
      CodePointSet others = CodePointSet::range(0, 0x10FFFF).minus(CodePointSet::range(0xD800, 0xDFFF));
      for (const auto& [cp, child] : trie[i].children) {
        std::string text;
        detail::append_utf8(text, cp);
        body += (body.empty() ? "" : " | ") + seq({detail::json_string_content_gbnf(text), rules[child]});
        others = others.minus(CodePointSet::single(cp));
      }
      std::string other = detail::json_string_char_gbnf(others, "json-nonascii-escape");
      if (other.find("json-nonascii-escape") != std::string::npos) use("json-nonascii-escape");
      body += (body.empty() ? "" : " | ") + seq({as_element(other), "json-char*", "\"\\\"\""});
      if (!trie[i].terminal) body += " | \"\\\"\"";
      if (rules_.size() >= kMaxRules) {
        throw GrammarError("JSON Schema too large: more than " + std::to_string(kMaxRules) + " grammar rules");
      }
      rules_.emplace_back(rules[i], body);
    }
    rules_.emplace_back(key_rule, seq({"\"\\\"\"", rules[0]}));
    return key_rule;
  }

  std::string array_value(const Json& schema, const std::string& pointer, const std::string& name, int depth) {
    Json prefix = Json::array();
    const Json* rest = nullptr;  // the schema of items after the prefix; nullptr: any
    std::string rest_pointer;
    if (schema.contains("prefixItems")) {
      prefix = schema["prefixItems"];
      if (schema.contains("items")) rest = &schema["items"], rest_pointer = pointer + "/items";
    } else if (schema.contains("items") && schema["items"].is_array()) {
      prefix = schema["items"];
      if (schema.contains("additionalItems"))
        rest = &schema["additionalItems"], rest_pointer = pointer + "/additionalItems";
    } else if (schema.contains("items")) {
      rest = &schema["items"], rest_pointer = pointer + "/items";
    }
    if (!prefix.is_array()) invalid("'prefixItems' must be an array", pointer);
    int min_items = std::max(count_keyword(schema, "minItems", pointer), 0);
    int max_items = count_keyword(schema, "maxItems", pointer);  // -1: unbounded
    if (max_items >= 0 && min_items > max_items) invalid("minItems above maxItems", pointer);
    const int prefix_count = static_cast<int>(prefix.size());
    const bool rest_allowed = !(rest && *rest == false);
    if (!rest_allowed && min_items > prefix_count) invalid("minItems beyond prefixItems with no other items", pointer);

    const std::string comma = seq({"\",\"", ws()});
    std::string tail;  // the items after the prefix
    if (rest_allowed && (max_items < 0 || max_items > prefix_count)) {
      std::string item = rest ? visit(*rest, rest_pointer, name + "-item", depth + 1) : use("json-value");
      std::string item_ws = seq({item, ws()});
      int rest_min = std::max(min_items - prefix_count, 0);
      int rest_max = max_items < 0 ? -1 : max_items - prefix_count;
      if (prefix_count == 0) {
        std::string more = std::string("( ") + seq({comma, item_ws}) + " )" +
                           detail::quantifier_suffix(std::max(rest_min - 1, 0), rest_max < 0 ? -1 : rest_max - 1);
        tail = seq({item_ws, rest_max == 1 ? "" : more});
        if (rest_min == 0) tail = std::string("( ") + tail + " )?";
      } else {
        tail = std::string("( ") + seq({comma, item_ws}) + " )" + detail::quantifier_suffix(rest_min, rest_max);
      }
    }
    for (int i = prefix_count; i-- > 0;) {
      if (max_items >= 0 && i >= max_items) {
        tail.clear();
        continue;
      }
      std::string item =
          visit(prefix[i], pointer + "/prefixItems/" + std::to_string(i), name + "-" + std::to_string(i), depth + 1);
      std::string piece = seq({i > 0 ? comma : "", item, ws(), tail});
      tail = i >= min_items ? std::string("( ") + piece + " )?" : piece;
    }
    return add_rule(name, seq({"\"[\"", ws(), tail, "\"]\""}));
  }

  const Json& root_;
  const JsonSchemaOptions& options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_ = {"root", "ws"};
  std::set<std::string> used_primitives_;
  std::map<std::string, std::string> references_;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return SchemaCompiler(schema, options).compile();
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options) {
  return json_schema_to_gbnf(nlohmann::ordered_json(schema), options);
}

std::string json_object_gbnf(const JsonSchemaOptions& options) {
  const Json empty = Json::object();
  SchemaCompiler compiler(empty, options);
  return compiler.finish(compiler.any_object());
}

}  // namespace slab::grammar
