#include "engine/token_selection.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/sampling_rows.h"
#include "runtime/cpu_features.h"

namespace slab {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// top_k streams the row in chunks of this many logits: one chunk's indices fit in L1.
constexpr size_t kChunk = 4096;

// The nucleus search stops refining its bracket once this few logits lie above it: sorting
// them costs less than another pass over a 100k+ row.
constexpr size_t kFewSurvivors = 2048;

// Kernel masses carry ~1e-6 relative error; a bracket must hold this much more than top_p of
// the total so that the exact (double) cumulative sum over the survivors surely reaches top_p.
constexpr double kMassMargin = 1e-5;

struct RankOrder {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// Below this many survivors std::sort is as fast as the radix sort's three passes and tables.
constexpr size_t kRadixSortFrom = 1024;

// The float's bits mapped so that unsigned order is descending float order.
uint32_t descending_key(float f) {
  if (f == 0.0f) f = 0.0f;  // -0 ties with +0, as the comparison-based order has it
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// Sorts ids (ascending on entry) into rank order: a stable LSD radix sort of the logits' keys in
// three 11-bit digits, so equal logits keep their ascending ids. A flat distribution's nucleus
// can hold most of the vocabulary; std::sort of 50k ids took ~4 ms, this ~0.3 ms.
void radix_sort_rank_order(std::vector<int32_t>& ids, const float* logits, std::vector<uint64_t>& a,
                           std::vector<uint64_t>& b) {
  constexpr int kDigitBits = 11;
  constexpr uint32_t kBuckets = 1u << kDigitBits;
  const size_t n = ids.size();
  a.resize(n);
  b.resize(n);
  std::vector<uint32_t> counts(3 * kBuckets, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = descending_key(logits[ids[i]]);
    a[i] = (uint64_t{key} << 32) | static_cast<uint32_t>(ids[i]);
    for (int d = 0; d < 3; ++d) ++counts[d * kBuckets + ((key >> (d * kDigitBits)) & (kBuckets - 1))];
  }
  for (int d = 0; d < 3; ++d) {
    uint32_t* c = counts.data() + d * kBuckets;
    uint32_t sum = 0;
    for (uint32_t k = 0; k < kBuckets; ++k) {
      const uint32_t here = c[k];
      c[k] = sum;
      sum += here;
    }
    const int shift = 32 + d * kDigitBits;
    for (size_t i = 0; i < n; ++i) b[c[(a[i] >> shift) & (kBuckets - 1)]++] = a[i];
    a.swap(b);
  }
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(a[i] & 0xffffffffu);
}

struct Scratch {
  std::vector<int32_t> top;      // top_k's result
  std::vector<int32_t> indices;  // indices at or above a threshold
  DrawCandidates candidates;
  std::vector<uint64_t> radix_a, radix_b;  // (key, id) pairs of the survivors' sort
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

kern::Isa best_sampling_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_bf16_kernels()) return kern::Isa::avx512_bf16;
  if (f.has_avx2_kernels()) return kern::Isa::avx2;
  return kern::Isa::scalar;
}

const std::vector<int32_t>& TokenSelector::top_k(std::span<const float> logits, size_t k) {
  const size_t n = logits.size();
  k = std::min(k, n);
  std::vector<int32_t>& top = scratch().top;
  std::vector<int32_t>& indices = scratch().indices;
  top.clear();
  if (k == 0) return top;
  const RankOrder before{logits.data()};
  // Keep the best k of everything seen so far; logits below the k-th best cannot enter.
  auto shrink = [&] {
    if (top.size() <= k) return;
    std::nth_element(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k - 1), top.end(), before);
    top.resize(k);
  };
  float threshold = kNegInf;
  indices.resize(std::max(indices.size(), kChunk));
  // A short first chunk sets a first threshold early; each shrink after that costs about as much
  // as the k + slack values it goes through, and the threshold only rises.
  const size_t slack = k + 256;
  size_t base = 0;
  size_t len = std::min({n, 4 * k + 256, kChunk});
  while (base < n) {
    const size_t got = kern::indices_at_or_above(logits.data() + base, len, threshold, indices.data(), isa_);
    for (size_t j = 0; j < got; ++j) top.push_back(static_cast<int32_t>(base) + indices[j]);
    if (top.size() >= k + slack) {
      shrink();
      threshold = logits[static_cast<size_t>(top[k - 1])];  // nth_element put the k-th best there
    }
    base += len;
    len = std::min(kChunk, n - base);
  }
  shrink();
  std::sort(top.begin(), top.end(), before);
  return top;
}

float TokenSelector::nucleus_threshold(std::span<const float> logits, float max, float temperature, float top_p,
                                       double* total) {
  // Thresholds at probability ratios 2^-0.5 .. 2^-64 below the top token, in logit units.
  float thresholds[kern::kMaxThresholds];
  size_t counts[kern::kMaxThresholds];
  double masses[kern::kMaxThresholds];
  const double ln2 = std::log(2.0);
  for (int j = 0; j < kern::kMaxThresholds; ++j) {
    thresholds[j] = static_cast<float>(max - temperature * ln2 * std::ldexp(0.5, j));
  }
  float above = max;        // a threshold known to hold too little (the top token alone may suffice)
  float reached = kNegInf;  // one known to hold enough; -inf: the whole vocabulary
  for (int pass = 0; pass < 4; ++pass) {
    *total = kern::tail_masses(logits.data(), logits.size(), max, 1.0f / temperature, thresholds, kern::kMaxThresholds,
                               counts, masses, isa_);
    const double target = (top_p + kMassMargin) * *total;
    int first = -1;
    for (int j = 0; j < kern::kMaxThresholds && first < 0; ++j) {
      if (masses[j] >= target) first = j;
    }
    if (first < 0) {
      if (pass == 0) return kNegInf;  // a tail longer than 2^-64: everything competes
      break;                          // refining found nothing new: keep the bracket
    }
    reached = thresholds[first];
    if (first > 0) above = thresholds[first - 1];
    if (counts[first] <= kFewSurvivors || !(above > reached)) break;
    // Eight evenly spaced thresholds inside (reached, above]; the last is `reached` itself.
    for (int j = 0; j < kern::kMaxThresholds; ++j) {
      thresholds[j] = above - (above - reached) * static_cast<float>(j + 1) / kern::kMaxThresholds;
    }
    thresholds[kern::kMaxThresholds - 1] = reached;
  }
  return reached;
}

const DrawCandidates& TokenSelector::candidates(std::span<const float> logits, float temperature, int top_k,
                                                float top_p, float min_p) {
  DrawCandidates& c = scratch().candidates;
  c.whole_vocab = false;
  c.tokens.clear();
  c.weights.clear();
  const size_t n = logits.size();
  const bool use_top_k = top_k > 0 && static_cast<size_t>(top_k) < n;
  double total = 0.0;  // the softmax denominator the probabilities are relative to; 0: survivors'
  float max = 0.0f;
  if (use_top_k) {
    c.tokens = this->top_k(logits, static_cast<size_t>(top_k));
    max = logits[static_cast<size_t>(c.tokens[0])];
  } else {
    if (top_p >= 1.0f && min_p <= 0.0f) {
      c.whole_vocab = true;
      return c;
    }
    max = kern::row_max(logits.data(), n, isa_);
    float threshold = kNegInf;
    if (min_p > 0.0f && max > kNegInf) {
      // p >= min_p · p_top  <=>  l >= max + T ln(min_p); a little lower, the exact test follows.
      const double at = max + temperature * std::log(static_cast<double>(min_p));
      threshold = static_cast<float>(at - 1e-5 * (1.0 + std::abs(at)));
    }
    if (top_p < 1.0f && max > kNegInf) {
      threshold = std::max(threshold, nucleus_threshold(logits, max, temperature, top_p, &total));
    }
    std::vector<int32_t>& indices = scratch().indices;
    indices.resize(std::max(indices.size(), n));
    const size_t got = kern::indices_at_or_above(logits.data(), n, threshold, indices.data(), isa_);
    c.tokens.assign(indices.begin(), indices.begin() + static_cast<std::ptrdiff_t>(got));
    if (got < kRadixSortFrom) {
      std::sort(c.tokens.begin(), c.tokens.end(), RankOrder{logits.data()});
    } else {
      radix_sort_rank_order(c.tokens, logits.data(), scratch().radix_a, scratch().radix_b);
    }
  }
  if (!(max > kNegInf)) {  // every token banned: nothing to weigh; the first one stands in
    c.tokens.assign(1, c.tokens.empty() ? 0 : c.tokens[0]);
    c.weights.assign(1, 1.0);
    return c;
  }

  // Exact probabilities of the survivors (double, as the reference computes them).
  c.weights.resize(c.tokens.size());
  double survivors = 0.0;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    c.weights[i] = std::exp(static_cast<double>(logits[static_cast<size_t>(c.tokens[i])] - max) / temperature);
    survivors += c.weights[i];
  }
  if (use_top_k || total == 0.0) total = survivors;
  for (double& w : c.weights) w /= total;

  size_t cut = c.tokens.size();
  if (min_p > 0.0f) {
    const double floor = min_p * c.weights[0];
    cut = static_cast<size_t>(std::find_if(c.weights.begin(), c.weights.end(), [&](double p) { return p < floor; }) -
                              c.weights.begin());
    cut = std::max<size_t>(cut, 1);
  }
  if (top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      cumulative += c.weights[i];
      if (cumulative >= top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  c.tokens.resize(cut);
  c.weights.resize(cut);
  return c;
}

}  // namespace slab
