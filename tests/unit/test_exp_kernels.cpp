// The vectorised exponentials (kernels/exp_avx512.h) against std::exp in double precision, over
// every float of a dense grid of their ranges and at the special values the attention softmax
// feeds them (-inf for masked scores, 0 for a block's maximum).
#include <catch2/catch.hpp>

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/exp_avx512.h"
#include "runtime/cpu_features.h"

// GCC 12 reports the _mm512_undefined_ps() pass-through operand of the rounding intrinsics as
// "(may be) used uninitialized" once inlined here: a false positive (as in the kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

using namespace slab;

namespace {

enum class ExpKernel { general, nonpositive };

__attribute__((target("avx512f"))) std::vector<float> exp_of(ExpKernel k, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i + 16 <= x.size(); i += 16) {
    const __m512 v = _mm512_loadu_ps(x.data() + i);
    _mm512_storeu_ps(y.data() + i,
                     k == ExpKernel::general ? kern::detail::exp_avx512(v) : kern::detail::exp_nonpositive_avx512(v));
  }
  return y;
}

// x evenly over [lo, hi], a multiple of 16 values.
std::vector<float> grid(double lo, double hi) {
  constexpr int n = 1 << 18;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(lo + (hi - lo) * i / (n - 1));
  return x;
}

// The largest |y / e^x - 1| where e^x is a normal float.
double max_relative_error(ExpKernel k, double lo, double hi) {
  const std::vector<float> x = grid(lo, hi);
  const std::vector<float> y = exp_of(k, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    if (want < std::numeric_limits<float>::min()) continue;
    worst = std::fmax(worst, std::fabs(y[i] / want - 1.0));
  }
  return worst;
}

bool avx512_or_warn() {
  if (cpu_features().avx512f && cpu_features().os_zmm) return true;
  WARN("AVX-512 exponentials not tested: no AVX-512 on this CPU (" << cpu_features().summary() << ")");
  return false;
}

}  // namespace

TEST_CASE("exp_avx512 is within 2.5e-7 relative of e^x over [-87, 88]", "[kernels][exp]") {
  if (!avx512_or_warn()) return;
  CHECK(max_relative_error(ExpKernel::general, -87.0, 0.0) < 2.5e-7);
  CHECK(max_relative_error(ExpKernel::general, 0.0, 88.0) < 2.5e-7);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> y =
      exp_of(ExpKernel::general, {-inf, 0.0f, -200.0f, 200.0f, 1.0f, -1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == 1.0f);
  CHECK(y[2] == 0.0f);  // clamped to -104: below the smallest denormal
  CHECK(std::isfinite(y[3]));
}

// The attention softmax's exponential: its arguments are s - max <= 0 and old max - new max.
TEST_CASE("exp_nonpositive_avx512 is within 4e-7 relative of e^x over [-16, 0], 1.5e-6 below", "[kernels][exp]") {
  if (!avx512_or_warn()) return;
  CHECK(max_relative_error(ExpKernel::nonpositive, -16.0, 0.0) < 4e-7);
  CHECK(max_relative_error(ExpKernel::nonpositive, -87.3, -16.0) < 1.5e-6);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, 0.0f, -200.0f, -104.0f, -0.5f * std::log(2.0f), -1.5f * std::log(2.0f)};
  x.resize(16, 0.0f);
  const std::vector<float> y = exp_of(ExpKernel::nonpositive, x);
  CHECK(y[0] == 0.0f);  // a masked score
  CHECK(y[1] == 1.0f);  // the block's maximum: weight exactly 1
  CHECK(y[2] == 0.0f);
  CHECK(y[3] < 1e-44f);
  // Both ends of the reduced range: f = -1/2 (n = 0) and f = 1/2 (n = -2, rounded to even).
  CHECK(std::fabs(y[4] / std::exp(static_cast<double>(x[4])) - 1.0) < 4e-7);
  CHECK(std::fabs(y[5] / std::exp(static_cast<double>(x[5])) - 1.0) < 4e-7);
}
