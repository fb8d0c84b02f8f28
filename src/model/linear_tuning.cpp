#include "model/linear_tuning.h"

#include <stdexcept>

namespace slab {

// Measured entries only; every other microarchitecture runs the defaults (kern::LinearBlocking's
// initialisers), first tuned on a Zen 5 machine before the dynamic split and the next-task
// prefetch. Figures: bench_linear_bf16 --sweep,
// bench/results/2026-11-26-blocking-sweeps/.
LinearTuning linear_tuning_for(const CpuFeatures& cpu) {
  const std::string arch = cpu.microarch();
  LinearTuning t;
  if (arch == "zen4") {
    // 2 cores, M = 128 and 512, TinyLlama's five shapes: K blocks of 2048 elements ran 1.02-1.09x
    // the 512 default on every row (the default's repeat within 1 %); a 64-column block of
    // K = 2048 is 256 KB, inside Zen 4's 1 MB L2, and skips the per-block store and reload of
    // the sums. The register tile and prefetch made no difference.
    t.blocking.k_block_pairs = 1024;
    t.source = "zen4 (measured: k=2048 1.02-1.09x)";
    return t;
  }
  if (arch == "zen5") {
    // 2 cores (EPYC, family 26 model 2), after the next-task prefetch: K blocks of 2048 ran
    // 1.02-1.05x the 512 default on 8 of TinyLlama's 10 rows (M = 128, 512; gate_up M = 128 and
    // down M = 128 level) and the BF16 prefill-512 1.05-1.09x (three alternating rounds). Zen 5's
    // L2 is 1 MB as Zen 4's, so the same reason holds: a 64-column block of K = 2048 is 256 KB.
    t.blocking.k_block_pairs = 1024;
    // Decode of 5..8 rows: the one-panel tile prefetching 8 KB ahead ran M = 8 1.25-1.32x and
    // M = 5..6 1.05-1.12x faster, three alternating rounds (6 KB level, 12 KB behind); without
    // it those rows read 60-94 % of the bandwidth where M <= 4 reads ~100 %. (On Zen 4, 4 KB ahead
    // was +7 % at high bandwidth and -6..12 % at low, so zen4 keeps it off.)
    t.blocking.decode_prefetch_bytes = 8192;
    t.source = "zen5 (measured: k=2048 1.05-1.09x prefill, dpf=8192 M=8 1.25-1.32x)";
    return t;
  }
  if (arch == "zen2") {
    // 2 cores (EPYC Rome, family 23 model 49; the AVX2 kernels): no candidate beyond the
    // run-to-run spread (bench_linear_bf16 --sweep, M = 128 and 512,
    // bench/results/2026-11-29-epyc-zen2-2c-scaling/). The AVX2 FP32 blocks cap K at 512
    // elements and keep their 6 x 16 tile, so k = 1024 and 2048 and the tile shapes run the same
    // code as the default: those rows read 0.86-1.21x of it, the spread; prefetch off 0.92-0.99x.
    t.source = "zen2 (measured: defaults best)";
    return t;
  }
  if (cpu.vendor == "GenuineIntel") {  // fp32_products touches only the AVX-512 BF16 path
    // A 2-core Xeon with AVX-512 BF16, AMX and AVX512-FP16 (family 6 model 167 as its KVM guest
    // reports it; 2026-11-30): vdpbf16ps zmm issued one every 2 cycles (1.7 G/s a core, 107
    // GFLOP/s) against two 512-bit FMAs a cycle (6.7 G/s, 215 GFLOP/s), so FP32 products double
    // the large-M peak; the tiles reach 66-74 % of it, 1.41-1.63x the dot product, and BF16
    // prefill-512 without AMX ran 1.38-1.51x on two cores
    // (bench/results/2026-11-30-xeon-2c-fp32-products). The 16-core Emerald Rapids device's
    // vdpbf16ps peak (26-71 GFLOP/s a core, 2026-11-27) fits the same rate; there FP32 products
    // ran prefill-512 1.49x the dot product on 16 threads, adjacent runs
    // (bench/results/2026-11-30-xeon-emr-16c-fp32-products). Its dot-product sweeps found no K
    // block or tile beyond the spread (2026-11-26 and 2026-11-27: gate_up 0.95-1.05x) and the
    // AMX K blocks ran 0.64-1.06x the whole-K default.
    t.blocking.fp32_products = true;
    // Decode of 5..8 rows on the same guest: the one-panel tile prefetching 8 KB ahead ran every
    // TinyLlama op 1.17-1.69x faster at M = 5 and 8 (40-52 % of the read bandwidth -> 51-73 %),
    // two rounds (bench/results/2026-11-30-xeon-2c-decode-prefetch), as on Zen 5; on the 16-core
    // device M = 5 went from 72-73 % of the bandwidth to 98-113 %, M = 8 from 63-64 % to 84-96 %.
    t.blocking.decode_prefetch_bytes = 8192;
    t.source = (arch.empty() ? std::string("intel") : arch) +
               " (measured: FP32 products, vdpbf16ps at half rate; dpf=8192 M=5..8 1.17-1.69x)";
    return t;
  }
  t.source = arch.empty() ? "defaults (unknown microarchitecture)" : "defaults (" + arch + " not measured)";
  return t;
}

std::string describe_linear_blocking(const kern::LinearBlocking& b) {
  return "k=" + std::to_string(2 * b.k_block_pairs) + ",tile=" + std::to_string(b.tile_rows) + "x" +
         std::to_string(32 * b.tile_panels) + ",prefetch=" + (b.prefetch ? "on" : "off") +
         ",amx=" + std::to_string(b.amx_k_block) + ",amxprefill=" + std::to_string(b.amx_prefill_min_m) +
         ",amxpf=" + std::to_string(b.amx_prefetch_bytes) + ",split=" + (b.dynamic_split ? "dynamic" : "static") +
         ",dpf=" + std::to_string(b.decode_prefetch_bytes) + ",products=" + (b.fp32_products ? "fma" : "dot");
}

kern::LinearBlocking parse_linear_blocking(const std::string& spec) {
  kern::LinearBlocking b;
  auto fail = [&spec](const std::string& why) {
    throw std::invalid_argument("linear blocking '" + spec + "': " + why);
  };
  auto number = [&fail](const std::string& key, const std::string& v) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size()) fail(key + " wants a whole number, got '" + v + "'");
    return n;
  };
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "k") {
      const int k = number(key, value);
      if (k % 2 != 0) fail("k must be even");
      b.k_block_pairs = k / 2;
    } else if (key == "tile") {
      const size_t x = value.find('x');
      if (x == std::string::npos) fail("tile wants ROWSxCOLUMNS, e.g. 6x64");
      b.tile_rows = number(key, value.substr(0, x));
      const int cols = number(key, value.substr(x + 1));
      if (cols != 32 && cols != 64) fail("tile columns must be 32 or 64");
      b.tile_panels = cols / 32;
    } else if (key == "prefetch") {
      if (value != "on" && value != "off") fail("prefetch must be on or off");
      b.prefetch = value == "on";
    } else if (key == "amx") {
      b.amx_k_block = number(key, value);
    } else if (key == "amxprefill") {
      b.amx_prefill_min_m = number(key, value);
    } else if (key == "amxpf") {
      b.amx_prefetch_bytes = number(key, value);
    } else if (key == "dpf") {
      b.decode_prefetch_bytes = number(key, value);
    } else if (key == "split") {
      if (value != "dynamic" && value != "static") fail("split must be dynamic or static");
      b.dynamic_split = value == "dynamic";
    } else if (key == "products") {
      if (value != "dot" && value != "fma") fail("products must be dot or fma");
      b.fp32_products = value == "fma";
    } else {
      fail("unknown key '" + key + "' (k, tile, prefetch, amx, amxprefill, amxpf, split, dpf, products)");
    }
  }
  try {
    kern::check_linear_blocking(b);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return b;
}

}  // namespace slab
