// Input distributions for the k-quant tests: the ones that separated
// implementations in shared/reference/kquants.md (§6, "Suggested test
// inputs"), shared by the oracle test and the GPU tests.
#pragma once

#include <cstdint>
#include <vector>

namespace kqref {

enum class Dist {
  gaussian,      // N(0, 0.02²)
  uniform,       // U[-1, 1]
  outliers,      // N(0, 0.02²) with 1 % of values ×50
  grid,          // multiples of 1/8 in [-2, 2]: many exact .5 ties
  small_ints,    // integers -8..8
  zeros_tiny,    // all-zero superblocks, and zeros mixed with 1e-17 / 1e-20
  bf16_rounded,  // N(0, 1) rounded to bf16
  constant,      // constant 32-element runs (candle's quirk), mixed with noise
  sign_ties,     // ±a pairs tying for the max |x| (first-index rule)
  count
};

const char *dist_name(Dist dist);

// n values (n a multiple of 256) of the distribution, from seed.
std::vector<float> make_inputs(Dist dist, int64_t n, uint64_t seed);

}  // namespace kqref
