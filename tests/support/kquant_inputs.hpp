// Input distributions for the k-quant tests: the ones that tell the
// implementations apart (ties, constant and sparse blocks, extreme ranges),
// shared by the oracle test and the GPU tests.
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
  // The edges of the f32 range (of f16's where the range says so), one
  // pattern per superblock, cycling:
  signed_zeros,  // all +0.0, all -0.0, ±0 mixed, ±0 groups beside ordinary ones
  tiny,          // 1e-30 down to the subnormals (1e-38, 1e-40, 1e-45), and zeros
  huge,          // ±1e7 up to ±3e38, one sign or both
  mixed,         // ordinary values with tiny, huge and zero ones in one block
  zero_mins,     // non-negative sub-blocks whose candle min is +0.0 or -0.0
  count
};

// Which values the edge distributions reach: f32's range, or f16's (1e-7 up
// to 65504) for inputs that are rounded to f16 (1e7 would be infinite,
// 1e-30 zero). bf16 has f32's range.
enum class Range { f32, f16 };

const char *dist_name(Dist dist);

// n values (n a multiple of 256) of the distribution, from seed.
std::vector<float> make_inputs(Dist dist, int64_t n, uint64_t seed, Range range = Range::f32);

// Named 256-value superblocks at the edges (the cases the references part
// on, one each), for tests that report a case by name.
struct EdgeBlock {
  const char *name;
  std::vector<float> x;
};
std::vector<EdgeBlock> edge_blocks(Range range = Range::f32);

}  // namespace kqref
