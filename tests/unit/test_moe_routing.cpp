// Mixture-of-experts routing (kernels/moe_routing.h) against values worked out by hand and
// against an independent formulation (a full sort of the softmax), and the grouping of picks by
// expert against its definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/moe_routing.h"

using namespace slab;

TEST_CASE("moe_route: softmax over all experts, the top k, renormalised or not", "[moe]") {
  // Logits ln(1), ln(2), ln(3), ln(4): probabilities 0.1, 0.2, 0.3, 0.4.
  const std::vector<float> logits{std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  std::vector<int32_t> experts(2);
  std::vector<float> weights(2);
  kern::moe_route(logits.data(), 1, 4, 2, false, experts.data(), weights.data());
  CHECK(experts == std::vector<int32_t>{3, 2});
  CHECK(weights[0] == Approx(0.4f).epsilon(1e-6));
  CHECK(weights[1] == Approx(0.3f).epsilon(1e-6));
  kern::moe_route(logits.data(), 1, 4, 2, true, experts.data(), weights.data());
  CHECK(weights[0] == Approx(4.0f / 7.0f).epsilon(1e-6));
  CHECK(weights[1] == Approx(3.0f / 7.0f).epsilon(1e-6));
  // Equal logits: the lower index first (torch.topk on CPU); large logits do not overflow.
  const std::vector<float> ties{1000.0f, 999.0f, 1000.0f, 1000.0f};
  std::vector<int32_t> three(3);
  std::vector<float> w3(3);
  kern::moe_route(ties.data(), 1, 4, 3, false, three.data(), w3.data());
  CHECK(three == std::vector<int32_t>{0, 2, 3});
  CHECK(std::isfinite(w3[0]));
  CHECK(w3[0] == Approx(1.0f / (3.0f + std::exp(-1.0f))).epsilon(1e-6));
}

TEST_CASE("moe_route: rows of random logits agree with sorting the softmax", "[moe]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const int m = 37, n = 60, k = 8;
  std::vector<float> logits(static_cast<size_t>(m) * n);
  for (float& v : logits) v = dist(rng);
  std::vector<int32_t> experts(static_cast<size_t>(m) * k);
  std::vector<float> weights(experts.size());
  kern::moe_route(logits.data(), m, n, k, true, experts.data(), weights.data());
  for (int t = 0; t < m; ++t) {
    const float* row = &logits[static_cast<size_t>(t) * n];
    std::vector<double> p(static_cast<size_t>(n));
    double sum = 0.0;
    for (int e = 0; e < n; ++e) sum += p[static_cast<size_t>(e)] = std::exp(static_cast<double>(row[e]));
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    double picked = 0.0;
    for (int s = 0; s < k; ++s) picked += p[static_cast<size_t>(order[static_cast<size_t>(s)])];
    for (int s = 0; s < k; ++s) {
      const size_t i = static_cast<size_t>(t) * k + static_cast<size_t>(s);
      CHECK(experts[i] == order[static_cast<size_t>(s)]);
      CHECK(weights[i] == Approx(p[static_cast<size_t>(order[static_cast<size_t>(s)])] / picked).epsilon(1e-5));
    }
  }
}

TEST_CASE("moe_group_by_expert: each expert's rows contiguous, tokens ascending, every pick once", "[moe]") {
  std::mt19937 rng(3);
  const int m = 23, k = 3, n = 9;
  std::vector<int32_t> experts;
  for (int t = 0; t < m; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    experts.insert(experts.end(), all.begin(), all.begin() + k);  // distinct experts per token
  }
  std::vector<int32_t> offsets(static_cast<size_t>(n) + 1), row_token(experts.size()), pick_row(experts.size());
  kern::moe_group_by_expert(experts.data(), m, k, n, offsets.data(), row_token.data(), pick_row.data());
  CHECK(offsets.front() == 0);
  CHECK(offsets.back() == m * k);
  std::vector<int> seen(experts.size(), 0);
  for (int e = 0; e < n; ++e) {
    const auto count = std::count(experts.begin(), experts.end(), e);
    CHECK(offsets[static_cast<size_t>(e) + 1] - offsets[static_cast<size_t>(e)] == count);
    for (int r = offsets[static_cast<size_t>(e)]; r < offsets[static_cast<size_t>(e) + 1]; ++r) {
      if (r > offsets[static_cast<size_t>(e)]) CHECK(row_token[static_cast<size_t>(r) - 1] < row_token[size_t(r)]);
    }
  }
  for (int p = 0; p < m * k; ++p) {
    const int row = pick_row[static_cast<size_t>(p)];
    ++seen[static_cast<size_t>(row)];
    CHECK(row_token[static_cast<size_t>(row)] == p / k);
    const int e = experts[static_cast<size_t>(p)];
    CHECK(row >= offsets[static_cast<size_t>(e)]);
    CHECK(row < offsets[static_cast<size_t>(e) + 1]);
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}
