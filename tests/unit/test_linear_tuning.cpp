// The per-microarchitecture linear blocking table and its text form (model/linear_tuning.h),
// and cpuid family/model naming (runtime/cpu_features.h).
#include <catch2/catch.hpp>

#include <stdexcept>

#include "kernels/linear_bf16.h"
#include "model/linear_tuning.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

CpuFeatures cpu(const char* vendor, int family, int model) {
  CpuFeatures f;
  f.vendor = vendor;
  f.family = family;
  f.model = model;
  return f;
}

}  // namespace

TEST_CASE("cpuid family and model name the microarchitecture", "[runtime]") {
  CHECK(cpu("AuthenticAMD", 0x17, 0x31).microarch() == "zen2");  // EPYC Rome
  CHECK(cpu("AuthenticAMD", 0x17, 0x01).microarch().empty());    // Zen (Naples)
  CHECK(cpu("AuthenticAMD", 0x19, 0x01).microarch() == "zen3");  // EPYC Milan
  CHECK(cpu("AuthenticAMD", 0x19, 0x11).microarch() == "zen4");  // EPYC Genoa
  CHECK(cpu("AuthenticAMD", 0x19, 0xa0).microarch() == "zen4");  // EPYC Bergamo
  CHECK(cpu("AuthenticAMD", 0x1a, 0x02).microarch() == "zen5");  // EPYC Turin
  CHECK(cpu("GenuineIntel", 6, 0x8f).microarch() == "sapphire_rapids");
  CHECK(cpu("GenuineIntel", 6, 0xcf).microarch() == "emerald_rapids");
  CHECK(cpu("GenuineIntel", 6, 0xad).microarch() == "granite_rapids");
  CHECK(cpu("GenuineIntel", 6, 0x55).microarch().empty());  // Skylake-SP: no entry
  const CpuFeatures& here = cpu_features();
  INFO(here.summary() << " family " << here.family << " model " << here.model);
  CHECK(here.family > 0);
}

TEST_CASE("every microarchitecture's blocking is valid and names its source", "[runtime]") {
  for (const CpuFeatures& f :
       {cpu("AuthenticAMD", 0x17, 0x31), cpu("AuthenticAMD", 0x19, 0x01), cpu("AuthenticAMD", 0x19, 0x11),
        cpu("AuthenticAMD", 0x1a, 0x02), cpu("GenuineIntel", 6, 0x8f), cpu("GenuineIntel", 6, 0xcf),
        cpu("GenuineIntel", 6, 0xad), cpu("GenuineIntel", 6, 0x55), cpu_features()}) {
    INFO(f.vendor << " family " << f.family << " model " << f.model);
    const LinearTuning t = linear_tuning_for(f);
    CHECK_NOTHROW(kern::check_linear_blocking(t.blocking));
    CHECK_FALSE(t.source.empty());
  }
}

TEST_CASE("Intel entries multiply BF16 in FP32, AMD entries with vdpbf16ps", "[runtime]") {
  // Measured: vdpbf16ps at one every two cycles on the Xeons, two FMAs a cycle (linear_tuning.cpp).
  for (const CpuFeatures& f :
       {cpu("GenuineIntel", 6, 0x8f), cpu("GenuineIntel", 6, 0xcf), cpu("GenuineIntel", 6, 0xa7)}) {
    INFO("model " << f.model);
    CHECK(linear_tuning_for(f).blocking.fp32_products);
  }
  for (const CpuFeatures& f : {cpu("AuthenticAMD", 0x19, 0x11), cpu("AuthenticAMD", 0x1a, 0x02)}) {
    INFO("family " << f.family);
    CHECK_FALSE(linear_tuning_for(f).blocking.fp32_products);
  }
}

TEST_CASE("linear blocking text round-trips and bad specs name the key", "[runtime]") {
  const kern::LinearBlocking d;
  CHECK(describe_linear_blocking(d) ==
        "k=512,tile=6x64,prefetch=on,amx=0,amxprefill=128,amxpf=16384,split=dynamic,dpf=0,products=dot");
  const kern::LinearBlocking b = parse_linear_blocking(
      "k=1024,tile=8x32,prefetch=off,amx=256,amxprefill=1000,amxpf=8192,split=static,dpf=4096,products=fma");
  CHECK(b.k_block_pairs == 512);
  CHECK(b.tile_rows == 8);
  CHECK(b.tile_panels == 1);
  CHECK_FALSE(b.prefetch);
  CHECK(b.amx_k_block == 256);
  CHECK(b.amx_prefill_min_m == 1000);
  CHECK(b.amx_prefetch_bytes == 8192);
  CHECK_FALSE(b.dynamic_split);
  CHECK(b.decode_prefetch_bytes == 4096);
  CHECK(b.fp32_products);
  CHECK(describe_linear_blocking(parse_linear_blocking(describe_linear_blocking(b))) == describe_linear_blocking(b));
  const kern::LinearBlocking partial = parse_linear_blocking("tile=4x64");
  CHECK(partial.tile_rows == 4);
  CHECK(partial.k_block_pairs == d.k_block_pairs);
  CHECK_THROWS_WITH(parse_linear_blocking("k=abc"), Catch::Contains("k wants a whole number"));
  CHECK_THROWS_WITH(parse_linear_blocking("k=513"), Catch::Contains("k must be even"));
  CHECK_THROWS_WITH(parse_linear_blocking("tile=6x48"), Catch::Contains("tile columns"));
  CHECK_THROWS_WITH(parse_linear_blocking("tile=7x64"), Catch::Contains("tile_rows"));
  CHECK_THROWS_WITH(parse_linear_blocking("prefetch=maybe"), Catch::Contains("prefetch must be on or off"));
  CHECK_THROWS_WITH(parse_linear_blocking("amx=40"), Catch::Contains("amx_k_block"));
  CHECK_THROWS_WITH(parse_linear_blocking("amxprefill=0"), Catch::Contains("amx_prefill_min_m"));
  CHECK_THROWS_WITH(parse_linear_blocking("amxpf=1000"), Catch::Contains("amx_prefetch_bytes"));
  CHECK_THROWS_WITH(parse_linear_blocking("amxprefill=x"), Catch::Contains("amxprefill wants a whole number"));
  CHECK_THROWS_WITH(parse_linear_blocking("split=random"), Catch::Contains("split must be dynamic or static"));
  CHECK_THROWS_WITH(parse_linear_blocking("dpf=100"), Catch::Contains("decode_prefetch_bytes"));
  CHECK_THROWS_WITH(parse_linear_blocking("dpf=4100"), Catch::Contains("decode_prefetch_bytes"));
  CHECK_THROWS_WITH(parse_linear_blocking("products=fast"), Catch::Contains("products must be dot or fma"));
  CHECK_THROWS_WITH(parse_linear_blocking("speed=11"), Catch::Contains("unknown key 'speed'"));
  CHECK_THROWS_WITH(parse_linear_blocking("k"), Catch::Contains("not key=value"));
}
