#include "host_data.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kaio_bench {
namespace {

// Values spread over [lo, hi] from an LCG. u never hits its end points or the
// exact middle, and with lo = -hi zero would need u = 1/2: so never zero, and
// the smallest magnitude (2^-24 for [-1, 1], ~5e-7 for [-8, 8]) is still
// nonzero in f16.
class UniformFloats {
 public:
  UniformFloats(float lo, float hi, uint32_t seed) : lo_(lo), hi_(hi), seed_(seed) {}

  float next() {
    seed_ = seed_ * 1664525u + 1013904223u;
    const double u = ((seed_ >> 8) + 0.5) / 16777216.0;
    return static_cast<float>(lo_ + (static_cast<double>(hi_) - lo_) * u);
  }

 private:
  float lo_, hi_;
  uint32_t seed_;
};

}  // namespace

uint16_t to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x47800000u) return sign | 0x7C00u;             // |f| >= 65536: infinity
  if (x < 0x38800000u) {                                   // below 2^-14: an f16 subnormal
    float scaled = std::bit_cast<float>(x) * 16777216.0f;  // exact: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Rebias the exponent and round the 13 dropped bits to nearest even; a carry
  // out of the mantissa correctly bumps the exponent.
  x += 0x0FFFu + ((x >> 13) & 1u);
  return sign | static_cast<uint16_t>((x - 0x38000000u) >> 13);
}

uint16_t to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

double from_f16(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  double v = exponent == 0    ? std::ldexp(mantissa, -24)
             : exponent == 31 ? std::numeric_limits<double>::infinity()
                              : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000u) ? -v : v;
}

double from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

std::vector<uint16_t> to_half(const std::vector<float> &v, kaio_dtype dtype) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = dtype == KAIO_DTYPE_F16 ? to_f16(v[i]) : to_bf16(v[i]);
  return h;
}

std::vector<float> random_floats(uint64_t count, float lo, float hi, uint32_t seed) {
  UniformFloats values(lo, hi, seed);
  std::vector<float> v(count);
  for (float &x : v) x = values.next();
  return v;
}

// Encodes as it generates: for the default 8192 x 8192 shapes a float copy of
// every operand would double the host memory needed.
std::vector<unsigned char> random_bytes(kaio_dtype dtype, uint64_t count, float lo, float hi,
                                        uint32_t seed) {
  UniformFloats values(lo, hi, seed);
  const size_t size = kaio_dtype_size(dtype);
  std::vector<unsigned char> bytes(count * size);
  for (uint64_t i = 0; i < count; ++i) {
    const float v = values.next();
    unsigned char *dst = bytes.data() + i * size;
    if (dtype == KAIO_DTYPE_F32) {
      std::memcpy(dst, &v, 4);
    } else {
      const uint16_t h = dtype == KAIO_DTYPE_F16 ? to_f16(v) : to_bf16(v);
      std::memcpy(dst, &h, 2);
    }
  }
  return bytes;
}

}  // namespace kaio_bench
