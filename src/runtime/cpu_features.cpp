#include "runtime/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace slab {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// xgetbv is only legal when cpuid says OSXSAVE; the caller checks.
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

bool bit(uint32_t reg, int b) { return ((reg >> b) & 1u) != 0; }

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(' ');
  return s.substr(first, last - first + 1);
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  const Regs r0 = cpuid(0, 0);
  const uint32_t max_leaf = r0.eax;
  char vendor[13] = {};
  std::memcpy(vendor + 0, &r0.ebx, 4);
  std::memcpy(vendor + 4, &r0.edx, 4);
  std::memcpy(vendor + 8, &r0.ecx, 4);
  f.vendor = vendor;

  const uint32_t max_ext = cpuid(0x80000000u, 0).eax;
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i + 0, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    f.brand = trim(brand);
  }
  if (max_leaf < 1) return f;

  const Regs r1 = cpuid(1, 0);
  const int base_family = static_cast<int>(r1.eax >> 8 & 0xf);
  const int base_model = static_cast<int>(r1.eax >> 4 & 0xf);
  f.family = base_family == 0xf ? base_family + static_cast<int>(r1.eax >> 20 & 0xff) : base_family;
  f.model = (base_family == 0xf || base_family == 0x6) ? (static_cast<int>(r1.eax >> 16 & 0xf) << 4) + base_model
                                                       : base_model;
  const bool osxsave = bit(r1.ecx, 27);
  uint64_t xcr0 = 0;
  if (osxsave) xcr0 = xgetbv0();
  f.os_ymm = (xcr0 & 0x6) == 0x6;                // SSE | AVX state
  f.os_zmm = f.os_ymm && (xcr0 & 0xE0) == 0xE0;  // opmask | ZMM_Hi256 | Hi16_ZMM
  f.os_amx = (xcr0 & 0x60000) == 0x60000;        // XTILECFG | XTILEDATA

  f.sse42 = bit(r1.ecx, 20);
  f.fma = bit(r1.ecx, 12) && f.os_ymm;
  f.avx = bit(r1.ecx, 28) && f.os_ymm;
  f.f16c = bit(r1.ecx, 29) && f.os_ymm;

  if (max_leaf >= 7) {
    const Regs r7 = cpuid(7, 0);
    f.avx2 = bit(r7.ebx, 5) && f.os_ymm;
    f.avx512f = bit(r7.ebx, 16) && f.os_zmm;
    f.avx512dq = bit(r7.ebx, 17) && f.os_zmm;
    f.avx512bw = bit(r7.ebx, 30) && f.os_zmm;
    f.avx512vl = bit(r7.ebx, 31) && f.os_zmm;
    f.avx512_vnni = bit(r7.ecx, 11) && f.os_zmm;
    f.amx_bf16 = bit(r7.edx, 22) && f.os_amx;
    f.amx_tile = bit(r7.edx, 24) && f.os_amx;
    f.amx_int8 = bit(r7.edx, 25) && f.os_amx;
    if (r7.eax >= 1) {
      const Regs r71 = cpuid(7, 1);
      f.avx_vnni = bit(r71.eax, 4) && f.os_ymm;
      f.avx512_bf16 = bit(r71.eax, 5) && f.os_zmm;
    }
  }
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_cpu_features();
  return features;
}

bool enable_amx_tiles() {
  // Linux (5.16+) keeps the 8 KB tile data state off until a process asks for it; the first tile
  // instruction without the permission is a SIGILL. Asked once; the answer holds for every thread.
  static const bool granted = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.os_amx) return false;
    constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long bitmask = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
    return (bitmask >> kXfeatureXtiledata & 1ul) != 0;
  }();
  return granted;
}

bool amx_bf16_usable() {
  const CpuFeatures& f = cpu_features();
  return f.amx_bf16 && f.has_avx512_bf16_kernels() && enable_amx_tiles();
}

bool amx_int8_usable() {
  const CpuFeatures& f = cpu_features();
  return f.amx_int8 && f.has_avx512_quant_kernels() && enable_amx_tiles();
}

std::string CpuFeatures::microarch() const {
  if (vendor == "AuthenticAMD") {
    if (family == 0x17 && model >= 0x30) return "zen2";  // below: Zen and Zen+
    if (family == 0x19) {  // Zen 3 and Zen 4 share family 25; Zen 4 models are 0x10-0x1f, 0x60-0x7f, 0xa0-0xaf
      const bool zen4 = (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) ||
                        (model >= 0xa0 && model <= 0xaf);
      return zen4 ? "zen4" : "zen3";
    }
    if (family == 0x1a) return "zen5";
    return "";
  }
  if (vendor == "GenuineIntel" && family == 6) {
    if (model == 0x8f) return "sapphire_rapids";
    if (model == 0xcf) return "emerald_rapids";
    if (model == 0xad || model == 0xae) return "granite_rapids";
  }
  return "";
}

std::string CpuFeatures::summary() const {
  std::string s = brand.empty() ? (vendor.empty() ? std::string("unknown cpu") : vendor) : brand;
  s += ":";
  const std::pair<const char*, bool> flags[] = {{"sse4.2", sse42},
                                                {"avx", avx},
                                                {"avx2", avx2},
                                                {"fma", fma},
                                                {"f16c", f16c},
                                                {"avx512f", avx512f},
                                                {"avx512bw", avx512bw},
                                                {"avx512vl", avx512vl},
                                                {"avx512dq", avx512dq},
                                                {"avx512_bf16", avx512_bf16},
                                                {"avx512_vnni", avx512_vnni},
                                                {"avx_vnni", avx_vnni},
                                                {"amx_tile", amx_tile},
                                                {"amx_bf16", amx_bf16},
                                                {"amx_int8", amx_int8}};
  for (const auto& [name, on] : flags) {
    if (on) {
      s += ' ';
      s += name;
    }
  }
  s += os_zmm ? " (zmm state on)" : " (zmm state off)";
  s += "; kernels: ";
  s += has_avx512_bf16_kernels() ? "avx512_bf16" : (has_avx2_kernels() ? "avx2" : "scalar");
  if (amx_bf16) s += os_amx ? " (amx tile state on)" : " (amx tile state off)";
  return s;
}

}  // namespace slab
