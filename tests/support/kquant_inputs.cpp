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
    case Dist::signed_zeros: return "signed_zeros";
    case Dist::tiny: return "tiny";
    case Dist::huge: return "huge";
    case Dist::mixed: return "mixed";
    case Dist::zero_mins: return "zero_mins";
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

// The edge distributions, built one 256-value superblock at a time: the
// superblock's index picks its pattern, so every pattern comes up in any
// run of a few superblocks (and each of its 32-value Q8_0 blocks sees it).
class EdgeMaker {
 public:
  EdgeMaker(std::mt19937_64 *rng, Range range) : rng_(*rng) {
    if (range == Range::f32) {
      tiny_lo_ = 1e-45f, tiny_hi_ = 1e-30f, small_hi_ = 1e-3f;
      huge_lo_ = 1e7f, huge_hi_ = 3e38f;
      // 1e-38 (a normal number just above FLT_MIN), 1e-40 (subnormal),
      // 1e-45 (2^-149, the smallest subnormal)
      tiny_marks_[0] = 1e-38f, tiny_marks_[1] = 1e-40f, tiny_marks_[2] = 1e-45f;
    } else {  // f16: 2^-24 is its smallest subnormal, 65504 its largest value
      tiny_lo_ = 0x1.0p-24f, tiny_hi_ = 1e-4f, small_hi_ = 1e-1f;
      huge_lo_ = 1e3f, huge_hi_ = 65504.0f;
      tiny_marks_[0] = 0x1.0p-14f, tiny_marks_[1] = 1e-6f, tiny_marks_[2] = 0x1.0p-24f;
    }
  }

  void superblock(Dist dist, int64_t sb, float *x) {
    switch (dist) {
      case Dist::signed_zeros: signed_zeros(sb, x); break;
      case Dist::tiny: tiny(sb, x); break;
      case Dist::huge: huge(sb, x); break;
      case Dist::mixed: mixed(sb, x); break;
      case Dist::zero_mins: zero_mins(x); break;
      default: break;
    }
  }

 private:
  float unit() { return std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_); }
  bool coin() { return (rng_() & 1) != 0; }
  float sign() { return coin() ? -1.0f : 1.0f; }
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  float ordinary() { return std::normal_distribution<float>(0.0f, 1.0f)(rng_); }
  // |v| log-uniform in [lo, hi], clamped into it (exp/log round).
  float log_uniform(float lo, float hi) {
    const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
    const float v = static_cast<float>(std::exp(l + (h - l) * static_cast<double>(unit())));
    return std::fmin(std::fmax(v, lo), hi);
  }
  // Step g of 16 on the log scale from lo (g = 0) to hi (g = 15).
  static float step(float lo, float hi, int g) {
    const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
    return static_cast<float>(std::exp(l + (h - l) * g / 15.0));
  }
  float tiny_value() { return sign() * log_uniform(tiny_lo_, tiny_hi_); }
  float huge_value() { return sign() * log_uniform(huge_lo_, huge_hi_); }
  float zero() { return coin() ? -0.0f : 0.0f; }

  void signed_zeros(int64_t sb, float *x) {
    switch (sb % 6) {
      case 0: for (int i = 0; i < 256; ++i) x[i] = 0.0f; break;
      case 1: for (int i = 0; i < 256; ++i) x[i] = -0.0f; break;
      case 2: for (int i = 0; i < 256; ++i) x[i] = zero(); break;
      case 3:  // 16-value groups of +0, -0, ±0 or ordinary values
        for (int g = 0; g < 16; ++g) {
          const int kind = pick(4);
          for (int i = 16 * g; i < 16 * g + 16; ++i)
            x[i] = kind == 0 ? 0.0f : kind == 1 ? -0.0f : kind == 2 ? zero() : ordinary();
        }
        break;
      case 4:  // ordinary values, half of them ±0
        for (int i = 0; i < 256; ++i) x[i] = pick(2) ? zero() : ordinary();
        break;
      default:  // one small value among -0.0
        for (int i = 0; i < 256; ++i) x[i] = -0.0f;
        x[pick(256)] = sign() * 1e-3f;
        break;
    }
  }

  void tiny(int64_t sb, float *x) {
    const int p = static_cast<int>(sb % 7);
    for (int i = 0; i < 256; ++i) {
      float v = 0.0f;
      switch (p) {
        case 0: v = tiny_value(); break;
        case 1: case 2: case 3:  // around one mark: 1e-38, 1e-40, 1e-45 (f16: 2^-14, 1e-6, 2^-24)
          v = sign() * tiny_marks_[p - 1] * (p == 3 ? 1.0f : 1.0f + unit());
          if (pick(8) == 0) v = zero();
          break;
        case 4:  // each 16-value group at its own decade, from the bottom up
          v = sign() * std::fmax(step(tiny_lo_, tiny_hi_, i / 16) * (1.0f + unit()), tiny_lo_);
          break;
        case 5: v = sign() * log_uniform(tiny_lo_, small_hi_); break;  // on up to 1e-3
        default: v = pick(4) == 0 ? zero() : tiny_value(); break;
      }
      x[i] = v;
    }
  }

  void huge(int64_t sb, float *x) {
    const int p = static_cast<int>(sb % 5);
    for (int i = 0; i < 256; ++i) {
      float v = 0.0f;
      switch (p) {
        case 0: v = huge_value(); break;
        case 1: v = sign() * huge_hi_ * (0.5f + 0.5f * unit()); break;  // up to 3e38
        case 2: v = std::fabs(huge_value()); break;                      // all positive
        case 3: v = -std::fabs(huge_value()); break;                     // all negative
        default:  // each 16-value group at its own decade
          v = sign() * std::fmin(step(huge_lo_, huge_hi_, i / 16) * (0.5f + 0.5f * unit()), huge_hi_);
          break;
      }
      x[i] = v;
    }
  }

  void mixed(int64_t sb, float *x) {
    const int p = static_cast<int>(sb % 6);
    for (int i = 0; i < 256; ++i) x[i] = ordinary();
    switch (p) {
      case 0:  // one huge value in each 32 (Q8_0 block, Q4_K/Q5_K sub-block)
        for (int b = 0; b < 8; ++b) x[32 * b + pick(32)] = huge_value();
        break;
      case 1:  // a quarter tiny, a few ±0
        for (int i = 0; i < 256; ++i) {
          const int r = pick(16);
          if (r < 4) x[i] = tiny_value();
          else if (r == 4) x[i] = zero();
        }
        break;
      case 2:  // a third each: huge, tiny, ordinary
        for (int i = 0; i < 256; ++i) {
          const int r = pick(3);
          if (r == 0) x[i] = huge_value();
          else if (r == 1) x[i] = tiny_value();
        }
        break;
      case 3:  // 32-value groups, each ordinary, tiny, huge or ±0
        for (int g = 0; g < 8; ++g) {
          const int kind = pick(4);
          for (int i = 32 * g; i < 32 * g + 32; ++i)
            x[i] = kind == 0 ? x[i] : kind == 1 ? tiny_value() : kind == 2 ? huge_value() : zero();
        }
        break;
      case 4:  // ordinary values with one tiny and one huge in each 16
        for (int g = 0; g < 16; ++g) {
          x[16 * g + pick(16)] = tiny_value();
          x[16 * g + pick(16)] = huge_value();
        }
        break;
      default:  // one value of -(1..30) x the bottom of the huge range: its
                // min's f16 (min / 63) overflows where the scales' need not
        x[pick(256)] = -huge_lo_ * (1.0f + 29.0f * unit());
        break;
    }
  }

  // candle's make_qkx1_quants returns min +0.0 for a constant sub-block and
  // -0.0 where its fitted min is clamped from above zero ({0, 15}: scale 1,
  // residuals 0), so superblocks made of such sub-blocks have max_min ±0.
  void zero_mins(float *x) {
    for (int g = 0; g < 8; ++g) {
      const int kind = pick(7);
      const float c = kind == 0 ? 1.0f : kind == 1 ? 0.0f : kind == 2 ? -0.0f : 0.0f;
      for (int i = 32 * g; i < 32 * g + 32; ++i) {
        switch (kind) {
          case 0: case 1: case 2: x[i] = c; break;                   // constant
          case 3: x[i] = coin() ? 15.0f : 0.0f; break;              // {0, 15}
          case 4: x[i] = coin() ? 31.0f : 0.0f; break;              // {0, 31}
          case 5: x[i] = coin() ? 1.0f : zero(); break;             // {±0, 1}
          default: x[i] = unit(); break;                            // [0, 1)
        }
      }
    }
  }

  std::mt19937_64 &rng_;
  float tiny_lo_, tiny_hi_, small_hi_, huge_lo_, huge_hi_;
  float tiny_marks_[3];
};

}  // namespace

std::vector<float> make_inputs(Dist dist, int64_t n, uint64_t seed, Range range) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(dist));
  if (dist >= Dist::signed_zeros && dist < Dist::count) {
    const int64_t superblocks = (n + 255) / 256;  // a partial last one is cut
    std::vector<float> x(static_cast<size_t>(superblocks * 256));
    EdgeMaker maker(&rng, range);
    for (int64_t sb = 0; sb < superblocks; ++sb) maker.superblock(dist, sb, &x[static_cast<size_t>(sb * 256)]);
    x.resize(static_cast<size_t>(n));
    return x;
  }
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
      default: break;
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

std::vector<EdgeBlock> edge_blocks(Range range) {
  const bool f16 = range == Range::f16;
  // the bottom (a normal number just above FLT_MIN, a subnormal, 2^-149)
  // and the top of the range; f16's where it applies
  const float lo1 = f16 ? 0x1.0p-14f : 1e-38f, lo2 = f16 ? 1e-6f : 1e-40f, lo3 = f16 ? 0x1.0p-24f : 1e-45f;
  const float hi = f16 ? 65504.0f : 3e38f, big = f16 ? 1000.0f : 1e7f;
  std::vector<EdgeBlock> out;
  auto add = [&](const char *name, auto value) {
    EdgeBlock b{name, std::vector<float>(256)};
    for (int i = 0; i < 256; ++i) b.x[static_cast<size_t>(i)] = value(i);
    out.push_back(std::move(b));
  };
  // ordinary values in (-1, 1), a fixed pattern
  auto ord = [](int i) { return std::sin(0.37f * static_cast<float>(i) + 0.1f) * 0.9f; };
  add("all +0.0", [](int) { return 0.0f; });
  add("all -0.0", [](int) { return -0.0f; });
  add("+0.0 and -0.0", [](int i) { return (i * 7 % 3) ? -0.0f : 0.0f; });
  add("-0.0 sub-blocks beside ordinary ones", [&](int i) { return (i / 32) % 2 ? ord(i) : -0.0f; });
  add("1e-38 (f16: 2^-14), both signs", [&](int i) { return (i % 3 ? lo1 : -lo1) * (1.0f + 0.01f * static_cast<float>(i % 17)); });
  add("1e-40 (f16: 1e-6), both signs", [&](int i) { return (i % 5 ? -lo2 : lo2) * (1.0f + 0.02f * static_cast<float>(i % 13)); });
  add("1e-45 (f16: 2^-24) and zeros", [&](int i) { return i % 4 == 0 ? 0.0f : (i % 3 ? lo3 : -lo3); });
  add("1e-45 up to 1e-30, one decade a sub-block", [&](int i) {
    return (i % 2 ? -1.0f : 1.0f) * std::fmax(std::pow(10.0f, std::log10(lo3) + (std::log10(f16 ? 1e-4f : 1e-30f) - std::log10(lo3)) * static_cast<float>(i / 16) / 15.0f), lo3);
  });
  add("3e38 (f16: 65504), both signs", [&](int i) { return (i % 3 ? hi : -hi) * (1.0f - 0.001f * static_cast<float>(i % 7)); });
  add("all positive, 1e7 and up", [&](int i) { return big * (1.0f + static_cast<float>(i % 11)); });
  add("all negative, down to -3e38", [&](int i) { return -std::fmin(big * std::pow(2.0f, static_cast<float>(i % 64) * (f16 ? 0.09f : 1.7f)), hi); });
  add("ordinary with one -1e7 (f16: -1000)", [&](int i) { return i == 77 ? -big : ord(i); });
  add("ordinary with one 3e38 a sub-block", [&](int i) { return i % 32 == 5 ? hi : ord(i); });
  add("ordinary with 1e-40 and -0.0 mixed in", [&](int i) { return i % 3 == 0 ? lo2 : i % 3 == 1 ? -0.0f : ord(i); });
  add("ordinary, tiny and huge in one block", [&](int i) { return i % 3 == 0 ? lo1 : i % 3 == 1 ? (i % 2 ? hi : -big) : ord(i); });
  add("{0, 15} sub-blocks (candle min -0.0)", [](int i) { return (i * 5 % 7) < 3 ? 15.0f : 0.0f; });
  add("constant, then {0, 31} last", [](int i) { return i >= 224 ? ((i % 3) ? 31.0f : 0.0f) : 1.0f; });
  add("{0, 31}, then constant last", [](int i) { return i >= 224 ? 1.0f : ((i % 3) ? 31.0f : 0.0f); });
  add("all positive in [0, 1)", [](int i) { return static_cast<float>((i * 37) % 256) / 256.0f; });
  return out;
}

}  // namespace kqref
