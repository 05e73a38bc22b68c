// The project's C++ k-quant reference (tests/support/kquant_ref) against
// ggml's own reference library, byte for byte, and its CANDLE mode against
// candle's own quirks (tests/host_kquant_candle_test.cpp checks those bytes
// against candle-core itself).
//
// The oracle is libggml-base.so from the npm package
// @node-llama-cpp/linux-x64@3.22.1 (ggml 0.25.1, built without FMA), fetched
// and checksummed by tests/oracle/fetch_ggml_oracle.sh into .oracle/;
// tests/meson.build passes its path in KAIO_GGML_ORACLE. Without it the test
// skips with that reason, except under CI=true, where it fails.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "support/kaio_test.hpp"
#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

using kqref::Dist;
using kqref::Format;
using kqref::Mode;

constexpr Format kFormats[] = {Format::q8_0, Format::q4_k, Format::q5_k, Format::q6_k};
constexpr int64_t kSuperblocks = 1024;  // per distribution
constexpr int64_t kElems = kSuperblocks * 256;

struct Oracle {
  void *lib = nullptr;
  using Quantize = void (*)(const float *, void *, int64_t);
  using Dequantize = void (*)(const void *, float *, int64_t);
  Quantize quantize[4] = {};
  Dequantize dequantize[4] = {};
};

// Loads the oracle, or says why not in *why.
bool load_oracle(Oracle *o, std::string *why) {
  const char *path = std::getenv("KAIO_GGML_ORACLE");
  if (!path || !*path) {
    *why = "KAIO_GGML_ORACLE is not set (tests/meson.build sets it)";
    return false;
  }
  struct stat st;
  if (stat(path, &st) != 0) {
    *why = std::string("the ggml oracle ") + path +
           " is missing; run tests/oracle/fetch_ggml_oracle.sh (needs npm)";
    return false;
  }
  o->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!o->lib) {
    *why = std::string("dlopen(") + path + ") failed: " + dlerror();
    return false;
  }
  const char *q[] = {"quantize_row_q8_0_ref", "quantize_row_q4_K_ref", "quantize_row_q5_K_ref",
                     "quantize_row_q6_K_ref"};
  const char *d[] = {"dequantize_row_q8_0", "dequantize_row_q4_K", "dequantize_row_q5_K",
                     "dequantize_row_q6_K"};
  for (int i = 0; i < 4; ++i) {
    o->quantize[i] = reinterpret_cast<Oracle::Quantize>(dlsym(o->lib, q[i]));
    o->dequantize[i] = reinterpret_cast<Oracle::Dequantize>(dlsym(o->lib, d[i]));
    if (!o->quantize[i] || !o->dequantize[i]) {
      *why = std::string("the oracle lacks ") + q[i] + " or " + d[i];
      return false;
    }
  }
  return true;
}

bool in_ci() {
  const char *ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

int64_t differing_blocks(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b,
                         int64_t block_bytes) {
  int64_t n = 0;
  for (size_t off = 0; off < a.size(); off += static_cast<size_t>(block_bytes))
    if (std::memcmp(&a[off], &b[off], static_cast<size_t>(block_bytes)) != 0) ++n;
  return n;
}

class KquantOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (load_oracle(&oracle_, &why)) return;
    if (in_ci()) FAIL() << "CI=true but " << why;
    GTEST_SKIP() << why;
  }
  Oracle oracle_;
};

TEST_F(KquantOracle, GgmlModeQuantizeIsByteIdenticalOnEveryDistribution) {
  const uint64_t seed = kt::test_seed();
  for (int fi = 0; fi < 4; ++fi) {
    const Format f = kFormats[fi];
    const int64_t bytes = kElems / kqref::block_elems(f) * kqref::block_bytes(f);
    for (int di = 0; di < static_cast<int>(Dist::count); ++di) {
      const Dist dist = static_cast<Dist>(di);
      SCOPED_TRACE(std::string(kqref::format_name(f)) + " " + kqref::dist_name(dist));
      std::vector<float> x = kqref::make_inputs(dist, kElems, seed);
      std::vector<uint8_t> ours(static_cast<size_t>(bytes), 0xA5), theirs(ours.size(), 0x5A);
      kqref::quantize_row(f, Mode::ggml, x.data(), kElems, ours.data());
      oracle_.quantize[fi](x.data(), theirs.data(), kElems);
      EXPECT_EQ(differing_blocks(ours, theirs, kqref::block_bytes(f)), 0)
          << "superblocks differing out of " << bytes / kqref::block_bytes(f);
    }
  }
}

// The named edge superblocks, one by one, so a difference names its case.
TEST_F(KquantOracle, GgmlModeQuantizeIsByteIdenticalOnEdgeBlocks) {
  for (kqref::Range range : {kqref::Range::f32, kqref::Range::f16})
    for (const kqref::EdgeBlock &e : kqref::edge_blocks(range))
      for (int fi = 0; fi < 4; ++fi) {
        const Format f = kFormats[fi];
        const size_t bytes = static_cast<size_t>(256 / kqref::block_elems(f) * kqref::block_bytes(f));
        std::vector<uint8_t> ours(bytes, 0xA5), theirs(bytes, 0x5A);
        kqref::quantize_row(f, Mode::ggml, e.x.data(), 256, ours.data());
        oracle_.quantize[fi](e.x.data(), theirs.data(), 256);
        EXPECT_EQ(ours, theirs) << kqref::format_name(f) << " " << e.name;
      }
}

// Dequantization of the oracle's own blocks and of random blocks (finite
// f16 scales), compared as bit patterns.
TEST_F(KquantOracle, DequantizeIsBitIdentical) {
  const uint64_t seed = kt::test_seed();
  for (int fi = 0; fi < 4; ++fi) {
    const Format f = kFormats[fi];
    SCOPED_TRACE(kqref::format_name(f));
    const int64_t be = kqref::block_elems(f), bb = kqref::block_bytes(f);
    const int64_t bytes = kElems / be * bb;
    std::vector<float> x = kqref::make_inputs(Dist::uniform, kElems, seed);
    std::vector<uint8_t> q(static_cast<size_t>(bytes));
    oracle_.quantize[fi](x.data(), q.data(), kElems);
    std::mt19937_64 rng(seed + 17);
    std::vector<uint8_t> rnd(q.size());
    for (auto &b : rnd) b = static_cast<uint8_t>(rng());
    // Keep every f16 scale finite: clear the top exponent bit of each.
    const std::vector<int> f16_offsets = f == Format::q8_0 ? std::vector<int>{0}
                                        : f == Format::q6_k ? std::vector<int>{208}
                                                             : std::vector<int>{0, 2};
    for (int64_t b = 0; b < bytes / bb; ++b)
      for (int off : f16_offsets) rnd[static_cast<size_t>(b * bb + off + 1)] &= 0xBF;
    for (const auto *blocks : {&q, &rnd}) {
      std::vector<float> ours(static_cast<size_t>(kElems)), theirs(ours.size());
      kqref::dequantize_row(f, blocks->data(), kElems, ours.data());
      oracle_.dequantize[fi](blocks->data(), theirs.data(), kElems);
      EXPECT_EQ(std::memcmp(ours.data(), theirs.data(), ours.size() * 4), 0);
    }
  }
}

// On ordinary values; Q8_0's one difference is pinned below.
TEST(KquantRef, CandleModeAgreesWithGgmlOnQ8_0AndDiffersOnKQuants) {
  std::vector<float> x = kqref::make_inputs(Dist::gaussian, 64 * 256, kt::test_seed());
  for (Format f : kFormats) {
    const int64_t bytes = 64 * 256 / kqref::block_elems(f) * kqref::block_bytes(f);
    std::vector<uint8_t> g(static_cast<size_t>(bytes)), c(g.size());
    kqref::quantize_row(f, Mode::ggml, x.data(), 64 * 256, g.data());
    kqref::quantize_row(f, Mode::candle, x.data(), 64 * 256, c.data());
    int64_t diff = differing_blocks(g, c, kqref::block_bytes(f));
    if (f == Format::q8_0)
      EXPECT_EQ(diff, 0);
    else  // kquants.md §2.6 measured 100 % on Gaussian data
      EXPECT_GT(diff, bytes / kqref::block_bytes(f) * 9 / 10) << kqref::format_name(f);
  }
}

// candle's quirks (kquants.md §2.6): a constant sub-block quantizes to
// scale 0 and min 0 in Q4K/Q5K, so an all-ones superblock dequantizes to 0
// (ggml gives ~1); an all-zero Q6K superblock stores d = -0.0 (0x8000) where
// ggml stores 0x0000; all rounding is half away from zero; and the two
// edge cases below. tests/host_kquant_candle_test.cpp checks all of it
// against candle itself.
TEST(KquantRef, CandleModeReproducesCandleQuirks) {
  std::vector<float> ones(256, 1.0f), zeros(256, 0.0f), back(256);
  for (Format f : {Format::q4_k, Format::q5_k}) {
    std::vector<uint8_t> c(static_cast<size_t>(kqref::block_bytes(f))), g(c.size());
    kqref::quantize_row(f, Mode::candle, ones.data(), 256, c.data());
    kqref::dequantize_row(f, c.data(), 256, back.data());
    for (float v : back) ASSERT_EQ(v, 0.0f) << kqref::format_name(f);
    kqref::quantize_row(f, Mode::ggml, ones.data(), 256, g.data());
    kqref::dequantize_row(f, g.data(), 256, back.data());
    for (float v : back) ASSERT_NEAR(v, 1.0f, 1e-3f) << kqref::format_name(f);
  }
  std::vector<uint8_t> c(210), g(210);
  kqref::quantize_row(Format::q6_k, Mode::candle, zeros.data(), 256, c.data());
  kqref::quantize_row(Format::q6_k, Mode::ggml, zeros.data(), 256, g.data());
  EXPECT_EQ(c[208] | (c[209] << 8), 0x8000);
  EXPECT_EQ(g[208] | (g[209] << 8), 0x0000);
  // Q8_0 where 1/d overflows (amax below about 3.7e-37): d is 0x0000 in
  // both, but x * id is ±inf (NaN for 0): ggml's (int8_t) roundf gives 0 on
  // x86-64, candle's saturating `as i8` 127 / -128 (0 for NaN). Both
  // dequantize to 0. Bytes checked against both libraries by the oracle tests.
  std::vector<float> tiny(32);
  for (int i = 0; i < 32; ++i) tiny[static_cast<size_t>(i)] = i == 3 ? 0.0f : (i % 2 ? -1e-38f : 1.5e-38f);
  std::vector<uint8_t> q8c(34), q8g(34);
  kqref::quantize_row(Format::q8_0, Mode::candle, tiny.data(), 32, q8c.data());
  kqref::quantize_row(Format::q8_0, Mode::ggml, tiny.data(), 32, q8g.data());
  EXPECT_EQ(q8c[0] | q8c[1] << 8, 0x0000);
  EXPECT_EQ(q8g[0] | q8g[1] << 8, 0x0000);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(static_cast<int8_t>(q8c[static_cast<size_t>(2 + i)]), i == 3 ? 0 : (i % 2 ? -128 : 127)) << i;
    EXPECT_EQ(q8g[static_cast<size_t>(2 + i)], 0) << i;
  }
  // Q4K/Q5K: candle's x86-64 max fold over the mins returns the new value on
  // a ±0 tie, so where every min is zero dmin takes the last one's sign. A
  // {0, 15} sub-block's min is clamped from above zero (-0.0), a constant
  // one's is +0.0. ggml stores 0x0000 for both.
  std::vector<float> last_clamped(256, 1.0f), last_constant(256, 15.0f);
  for (int i = 224; i < 256; ++i) last_clamped[static_cast<size_t>(i)] = i % 2 ? 15.0f : 0.0f;
  for (int i = 0; i < 224; ++i) last_constant[static_cast<size_t>(i)] = i % 2 ? 15.0f : 0.0f;
  for (Format f : {Format::q4_k, Format::q5_k}) {
    std::vector<uint8_t> c(static_cast<size_t>(kqref::block_bytes(f))), g(c.size());
    kqref::quantize_row(f, Mode::candle, last_clamped.data(), 256, c.data());
    kqref::quantize_row(f, Mode::ggml, last_clamped.data(), 256, g.data());
    EXPECT_EQ(c[2] | c[3] << 8, 0x8000) << kqref::format_name(f);
    EXPECT_EQ(g[2] | g[3] << 8, 0x0000) << kqref::format_name(f);
    kqref::quantize_row(f, Mode::candle, last_constant.data(), 256, c.data());
    EXPECT_EQ(c[2] | c[3] << 8, 0x0000) << kqref::format_name(f);
  }
  // A single +1 spike: d = 0x0c00 in GGML mode (kquants.md §2.3) and scale -128.
  std::vector<float> spike(256, 0.0f);
  spike[0] = 1.0f;
  kqref::quantize_row(Format::q6_k, Mode::ggml, spike.data(), 256, g.data());
  EXPECT_EQ(g[208] | (g[209] << 8), 0x0c00);
  EXPECT_EQ(static_cast<int8_t>(g[192]), -128);
}

TEST(KquantRef, F16ConversionRoundsToNearestEven) {
  EXPECT_EQ(kqref::f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(kqref::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(kqref::f32_to_f16(65520.0f), 0x7C00);                 // overflows to inf
  EXPECT_EQ(kqref::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(kqref::f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  for (uint32_t h = 0; h < 0x7C00; ++h)
    ASSERT_EQ(kqref::f32_to_f16(kqref::f16_to_f32(static_cast<uint16_t>(h))), h);
}

}  // namespace
