#include "support/kquant_inputs.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace kqref {

const char *dist_name(Dist dist) {
  switch (dist) {
    case Dist::gaussian: return "gaussian";
    case Dist::uniform: return "uniform";
    case Dist::outliers: return "outliers";
    case Dist::grid: return "grid_1_8";
    case Dist::small_ints: return "small_ints";
    case Dist::zeros_tiny: return "zeros_tiny";
    case Dist::bf16_rounded: return "bf16_rounded";
    case Dist::constant: return "constant_runs";
    case Dist::sign_ties: return "sign_ties";
    case Dist::count: break;
  }
  return "?";
}

namespace {

float round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  u &= 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

std::vector<float> make_inputs(Dist dist, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(dist));
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (dist) {
      case Dist::gaussian: v = gauss(rng); break;
      case Dist::uniform: v = unit(rng); break;
      case Dist::outliers: v = gauss(rng) * (pick(rng) == 0 ? 50.0f : 1.0f); break;
      case Dist::grid: v = static_cast<float>(std::uniform_int_distribution<int>(-16, 16)(rng)) / 8.0f; break;
      case Dist::small_ints: v = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(rng)); break;
      case Dist::zeros_tiny: {
        const int64_t block = i / 256;
        if (block % 4 == 0) break;  // a quarter of the superblocks all zero
        int r = pick(rng);
        float sign = (r & 1) ? -1.0f : 1.0f;
        if (block % 4 == 1) v = r < 50 ? 0.0f : sign * 1e-20f * (1.0f + unit(rng));
        else if (block % 4 == 2) v = r < 50 ? 0.0f : sign * 1e-17f * (1.0f + unit(rng));
        else v = r < 30 ? 0.0f : (r < 60 ? sign * 1e-20f : gauss(rng));
        break;
      }
      case Dist::bf16_rounded: v = round_bf16(gauss(rng) * 50.0f); break;
      case Dist::constant: {
        const int64_t run = i / 32;
        if (run % 3 == 0) v = 1.0f;
        else if (run % 3 == 1) v = -0.25f * static_cast<float>(run % 7 + 1);
        else v = gauss(rng);
        break;
      }
      case Dist::sign_ties: {
        // In each 16-run, the values at positions 3 and 9 tie in |x|; which
        // sign comes first alternates between runs.
        const int64_t run = i / 16, pos = i % 16;
        float a = 0.5f + 0.01f * static_cast<float>(run % 13);
        if (pos == 3) v = (run & 1) ? a : -a;
        else if (pos == 9) v = (run & 1) ? -a : a;
        else v = unit(rng) * 0.4f;
        break;
      }
      case Dist::count: break;
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

}  // namespace kqref
