// Inputs generated on the host: reproducible random values and their f16 and
// bf16 encodings.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>
#include <vector>

namespace kaio_bench {

// f32 -> f16 / bf16 bits, rounded to nearest even. NaN is not handled: the
// benches never generate one.
uint16_t to_f16(float f);
uint16_t to_bf16(float f);

// f16 / bf16 bits -> the exact value, for host references.
double from_f16(uint16_t h);
double from_bf16(uint16_t h);

// Each value of `v` as f16 or bf16 bits (dtype KAIO_DTYPE_F16 or KAIO_DTYPE_BF16).
std::vector<uint16_t> to_half(const std::vector<float> &v, kaio_dtype dtype);

// `count` values spread over [lo, hi], the same for the same seed on every
// run and machine (an LCG: <random>'s distributions differ between standard
// libraries). With lo = -hi none is zero, even rounded to f16.
std::vector<float> random_floats(uint64_t count, float lo, float hi, uint32_t seed);

// The same values as random_floats, stored as `dtype` (f32, f16 or bf16).
std::vector<unsigned char> random_bytes(kaio_dtype dtype, uint64_t count, float lo, float hi,
                                        uint32_t seed);

}  // namespace kaio_bench
