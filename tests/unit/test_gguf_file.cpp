// The GGUF container reader: every metadata type, tensor infos and alignment, and one clear
// refusal for each kind of truncated or inconsistent file (and no read past the end on any prefix).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "gguf_writer.h"
#include "runtime/gguf_file.h"
#include "safetensors_writer.h"
#include "test_paths.h"

using Catch::Contains;
using namespace slab;
using namespace slab::test;

namespace {

GgufFile parse(const std::string& bytes, const std::string& source = "mem.gguf") {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), source);
}

GgufBuilder every_type_file() {
  GgufBuilder b;
  b.kv_raw("k.u8", 0, GgufBuilder::pod(uint8_t{200}))
      .kv_raw("k.i8", 1, GgufBuilder::pod(int8_t{-7}))
      .kv_raw("k.u16", 2, GgufBuilder::pod(uint16_t{65000}))
      .kv_raw("k.i16", 3, GgufBuilder::pod(int16_t{-30000}))
      .kv_u32("k.u32", 4000000000u)
      .kv_i32("k.i32", -2000000000)
      .kv_f32("k.f32", 0.25f)
      .kv_bool("k.bool", true)
      .kv_str("k.str", "héllo")
      .kv_u64("k.u64", 1ull << 40)
      .kv_raw("k.i64", 11, GgufBuilder::pod(int64_t{-(1ll << 40)}))
      .kv_f64("k.f64", -1.5)
      .kv_str_array("k.strs", {"a", "", "ccc"})
      .kv_pod_array<float>("k.floats", 6, {1.0f, -2.0f})
      .kv_raw("k.nested", 9,
              GgufBuilder::pod(uint32_t{9}) + GgufBuilder::pod(uint64_t{2}) + GgufBuilder::pod(uint32_t{4}) +
                  GgufBuilder::pod(uint64_t{1}) + GgufBuilder::pod(uint32_t{7}) + GgufBuilder::pod(uint32_t{4}) +
                  GgufBuilder::pod(uint64_t{0}));
  b.tensor_f32("a", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.tensor("b", {32}, 8, std::string(34, '\x01'));  // one Q8_0 block
  return b;
}

}  // namespace

TEST_CASE("gguf: metadata of every value type and tensor infos are read as written", "[gguf]") {
  const std::string bytes = every_type_file().bytes();  // the parsed file points into it
  const GgufFile f = parse(bytes);
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  CHECK(f.get_int("k.u8") == 200);
  CHECK(f.get_int("k.i8") == -7);
  CHECK(f.get_int("k.u16") == 65000);
  CHECK(f.get_int("k.i16") == -30000);
  CHECK(f.get_int("k.u32") == 4000000000ll);
  CHECK(f.get_int("k.i32") == -2000000000);
  CHECK(f.get_float("k.f32") == 0.25);
  CHECK(f.get_bool("k.bool") == true);
  CHECK(f.get_string("k.str") == "héllo");
  CHECK(f.get_int("k.u64") == (1ll << 40));
  CHECK(f.get_int("k.i64") == -(1ll << 40));
  CHECK(f.get_float("k.f64") == -1.5);
  CHECK(f.get_float("k.u32") == 4e9);  // integers read as numbers too
  CHECK_FALSE(f.get_int("absent").has_value());
  const GgufValue* strs = f.get_array("k.strs", {GgufValueType::string});
  REQUIRE(strs != nullptr);
  REQUIRE(strs->items.size() == 3);
  CHECK(strs->items[2].text == "ccc");
  CHECK(strs->items[1].text.empty());
  const GgufValue* floats = f.get_array("k.floats");
  REQUIRE(floats->items.size() == 2);
  CHECK(floats->items[1].real == -2.0);
  const GgufValue* nested = f.get_array("k.nested", {GgufValueType::array});
  REQUIRE(nested->items.size() == 2);
  REQUIRE(nested->items[0].items.size() == 1);
  CHECK(nested->items[0].items[0].integer == 7);
  CHECK(nested->items[1].items.empty());

  REQUIRE(f.tensors().size() == 2);
  const GgufTensorInfo* a = f.find_tensor("a");
  REQUIRE(a != nullptr);
  CHECK(a->dims == std::vector<int64_t>{3, 2});
  CHECK(a->shape() == std::vector<int64_t>{2, 3});
  CHECK(a->type == GgmlType::f32);
  CHECK(a->bytes == 24);
  float v[6];
  std::memcpy(v, a->data, sizeof v);
  CHECK(v[5] == 6.0f);
  const GgufTensorInfo* b = f.find_tensor("b");
  CHECK(b->type == GgmlType::q8_0);
  CHECK(b->bytes == 34);
  CHECK(b->offset == 32);  // 24 bytes of "a" padded to the alignment
  CHECK(b->data[0] == 1);
}

TEST_CASE("gguf: a custom general.alignment places the data section and offsets", "[gguf]") {
  GgufBuilder b(2, 64);
  b.kv_u32("general.alignment", 64);
  b.tensor_f32("x", {4}, {1, 2, 3, 4}).tensor_f32("y", {2}, {7, 8});
  const std::string bytes = b.bytes();
  const GgufFile f = parse(bytes);
  CHECK(f.version() == 2);
  CHECK(f.alignment() == 64);
  const GgufTensorInfo* y = f.find_tensor("y");
  CHECK(y->offset == 64);
  CHECK(reinterpret_cast<const char*>(y->data) - bytes.data() == static_cast<ptrdiff_t>(bytes.size() - 64));
  float v;
  std::memcpy(&v, y->data + 4, 4);
  CHECK(v == 8.0f);
}

TEST_CASE("gguf: typed reads refuse a key of another type naming the key and both types", "[gguf]") {
  const std::string bytes = every_type_file().bytes();  // the parsed file points into it
  const GgufFile f = parse(bytes, "model.gguf");
  REQUIRE_THROWS_WITH(f.get_int("k.str"),
                      Contains("model.gguf") && Contains("'k.str'") && Contains("integer") && Contains("string"));
  REQUIRE_THROWS_WITH(f.get_string("k.u32"), Contains("'k.u32'") && Contains("u32"));
  REQUIRE_THROWS_WITH(f.get_array("k.floats", {GgufValueType::string}), Contains("'k.floats'") && Contains("f32"));
  REQUIRE_THROWS_WITH(f.get_bool("k.u8"), Contains("'k.u8'") && Contains("bool"));
}

TEST_CASE("gguf: every truncation of a valid file is refused without reading past the end", "[gguf]") {
  const std::string bytes = every_type_file().bytes();
  // Each prefix is copied into its own exactly-sized buffer, so ASan would catch an over-read.
  // The last tensor's 34 bytes are followed by 30 bytes of padding, which a file may lack.
  for (size_t n = 0; n < bytes.size() - 30; ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    INFO("prefix of " << n << " bytes");
    REQUIRE_THROWS_WITH(GgufFile::parse(prefix.data(), prefix.size(), "cut.gguf"), Contains("cut.gguf"));
  }
}

TEST_CASE("gguf: broken headers are refused with a message naming what was expected", "[gguf]") {
  SECTION("wrong magic") {
    REQUIRE_THROWS_WITH(parse("GGML" + std::string(20, '\0')), Contains("mem.gguf") && Contains("not a GGUF file"));
  }
  SECTION("version 1") {
    REQUIRE_THROWS_WITH(parse(GgufBuilder(1).bytes()), Contains("version 1") && Contains("expected 2 or 3"));
  }
  SECTION("a huge key/value count") {
    std::string b = GgufBuilder().bytes();
    const uint64_t huge = 1ull << 60;
    std::memcpy(b.data() + 16, &huge, 8);
    REQUIRE_THROWS_WITH(parse(b), Contains("truncated") && Contains("metadata entries"));
  }
  SECTION("an array longer than the file") {
    GgufBuilder g;
    g.kv_raw("tokenizer.ggml.tokens", 9, GgufBuilder::pod(uint32_t{8}) + GgufBuilder::pod(uint64_t{1} << 50));
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'tokenizer.ggml.tokens'") && Contains("does not fit"));
  }
  SECTION("an unknown value type") {
    GgufBuilder g;
    g.kv_raw("x", 13, "");
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'x'") && Contains("unknown value type 13"));
  }
  SECTION("a bool that is neither 0 nor 1") {
    GgufBuilder g;
    g.kv_raw("flag", 7, "\x05");
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'flag'") && Contains("not 0 or 1"));
  }
  SECTION("arrays nested too deep") {
    std::string v;
    for (int i = 0; i < 6; ++i) v += GgufBuilder::pod(uint32_t{9}) + GgufBuilder::pod(uint64_t{1});
    GgufBuilder g;
    g.kv_raw("deep", 9, v);
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'deep'") && Contains("nested deeper"));
  }
  SECTION("a duplicate key") {
    GgufBuilder g;
    g.kv_u32("a", 1).kv_u32("a", 2);
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'a' appears twice"));
  }
  SECTION("an alignment that is not a power of two") {
    GgufBuilder g;
    g.kv_u32("general.alignment", 24);
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'general.alignment'") && Contains("power of two"));
  }
}

TEST_CASE("gguf: inconsistent tensor infos are refused naming the tensor", "[gguf]") {
  SECTION("an unsupported tensor type") {
    GgufBuilder g;
    g.tensor("blk.0.attn_q.weight", {256}, 10, std::string(84, '\0'));
    REQUIRE_THROWS_WITH(parse(g.bytes()),
                        Contains("'blk.0.attn_q.weight'") && Contains("Q2_K") && Contains("not supported"));
  }
  SECTION("a type id ggml does not define") {
    GgufBuilder g;
    g.tensor("t", {4}, 77, std::string(16, '\0'));
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'t'") && Contains("type 77"));
  }
  SECTION("a row length that is not a whole number of blocks") {
    GgufBuilder g;
    g.tensor("q", {48}, 8, std::string(68, '\0'));
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'q'") && Contains("row length 48") && Contains("32"));
  }
  SECTION("data past the end of the file") {
    GgufBuilder g;
    g.tensor_f32("w", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
    std::string b = g.bytes();
    b.resize(b.size() - 4);
    REQUIRE_THROWS_WITH(parse(b), Contains("'w'") && Contains("extends past the end") && Contains("F32"));
  }
  SECTION("zero or five dimensions, or a zero dimension") {
    GgufBuilder g0, g5, gz;
    g0.tensor("z", {}, 0, "");
    g5.tensor("f", {1, 1, 1, 1, 1}, 0, std::string(4, '\0'));
    gz.tensor("e", {4, 0}, 0, "");
    REQUIRE_THROWS_WITH(parse(g0.bytes()), Contains("'z'") && Contains("0 dimensions"));
    REQUIRE_THROWS_WITH(parse(g5.bytes()), Contains("'f'") && Contains("5 dimensions"));
    REQUIRE_THROWS_WITH(parse(gz.bytes()), Contains("'e'") && Contains("dimension 0"));
  }
  SECTION("an offset off the alignment") {
    std::string b = GgufBuilder().tensor_f32("m", {1}, {1}).bytes();
    // The offset is the last u64 of the one tensor info, just before the padding to 32.
    const size_t info_end = 4 + 4 + 8 + 8 + (8 + 1) + 4 + 8 + 4 + 8;
    const uint64_t bad = 4;
    std::memcpy(b.data() + info_end - 8, &bad, 8);
    REQUIRE_THROWS_WITH(parse(b), Contains("'m'") && Contains("offset 4") && Contains("alignment 32"));
  }
  SECTION("a name used twice") {
    GgufBuilder g;
    g.tensor_f32("d", {1}, {1}).tensor_f32("d", {1}, {2});
    REQUIRE_THROWS_WITH(parse(g.bytes()), Contains("'d'") && Contains("appears twice"));
  }
}

TEST_CASE("gguf: a file on disk is mapped and errors name its path", "[gguf]") {
  TempDir tmp;
  write_file(tmp / "ok.gguf", every_type_file().bytes());
  const GgufFile f = GgufFile::open(tmp / "ok.gguf");
  CHECK(f.source() == (tmp / "ok.gguf").string());
  float v;
  std::memcpy(&v, f.find_tensor("a")->data, 4);
  CHECK(v == 1.0f);
  write_file(tmp / "short.gguf", "GGUF");
  REQUIRE_THROWS_WITH(GgufFile::open(tmp / "short.gguf"),
                      Contains((tmp / "short.gguf").string()) && Contains("truncated"));
}

TEST_CASE("gguf: the stories260K file parses with its llama metadata", "[gguf]") {
  const auto path = testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
  if (path.empty()) return;
  const GgufFile f = GgufFile::open(path);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_int("llama.block_count") == 5);
  CHECK(f.tensors().size() == 48);
  CHECK(f.get_array("tokenizer.ggml.tokens", {GgufValueType::string})->items.size() == 512);
  CHECK(f.find_tensor("blk.0.attn_k.weight")->shape() == std::vector<int64_t>{32, 64});
}
