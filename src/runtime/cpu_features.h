#pragma once
// What the CPU this process runs on can execute: cpuid leaves 1, 7 (subleaves 0 and 1) and
// xgetbv(XCR0) for the operating system's support of the ymm/zmm/tile register state. Detected
// once at start-up; kernels are compiled per function for their target ISA and chosen from these
// flags, so the binary never executes an instruction the machine lacks.
#include <string>

namespace slab {

struct CpuFeatures {
  // Raw instruction-set flags (cpuid), each already masked by OS support of its register state.
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // Operating-system support (XCR0) of the register state.
  bool os_ymm = false;  // XMM|YMM state enabled
  bool os_zmm = false;  // opmask, ZMM_Hi256, Hi16_ZMM enabled
  bool os_amx = false;  // XTILECFG|XTILEDATA enabled (Linux also needs arch_prctl permission)

  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...
  std::string brand;   // processor brand string, trimmed
  int family = 0;      // cpuid leaf 1 display family (base + extended) and model
  int model = 0;

  // The core microarchitecture from vendor, family and model: "zen2", "zen3", "zen4", "zen5",
  // "sapphire_rapids", "emerald_rapids", "granite_rapids", or "" when not one of those.
  std::string microarch() const;

  // The AVX-512 BF16 kernels need all of avx512f/bw/vl/bf16 and zmm state.
  bool has_avx512_bf16_kernels() const { return avx512f && avx512bw && avx512vl && avx512_bf16 && os_zmm; }
  // The AVX-512 quantized linear kernels (kernels/linear_quant.h) need VNNI besides.
  bool has_avx512_quant_kernels() const { return has_avx512_bf16_kernels() && avx512_vnni; }
  // The AVX2 kernels need avx2 + fma + f16c and ymm state.
  bool has_avx2_kernels() const { return avx2 && fma && f16c && os_ymm; }

  // One line, e.g. "AMD EPYC: avx2 fma avx512f avx512bw avx512vl avx512_bf16 avx512_vnni (zmm
  // state on); no amx".
  std::string summary() const;
};

// Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM) once per process;
// true when the CPU has AMX tiles, XCR0 enables them and the kernel granted the permission.
bool enable_amx_tiles();
// The AMX-BF16 linear path may run: amx_bf16, the AVX-512 BF16 kernels (its epilogue) and
// enable_amx_tiles().
bool amx_bf16_usable();
// The AMX-INT8 quantized linear path may run: amx_int8, the AVX-512 quantized kernels (its
// epilogue and activation rows) and enable_amx_tiles().
bool amx_int8_usable();

// Runs cpuid/xgetbv (cheap); use cpu_features() for the cached copy.
CpuFeatures detect_cpu_features();

// The process-wide detection result, computed on first use.
const CpuFeatures& cpu_features();

}  // namespace slab
