// The project's C++ k-quant reference in CANDLE mode (tests/support/
// kquant_ref) against candle itself: candle-core 0.11's QTensor::quantize on
// the CPU, run by the oracle program tests/oracle/candle_quantize (built by
// tests/oracle/build_candle_oracle.sh into .oracle/; tests/meson.build
// passes its path in KAIO_CANDLE_ORACLE). Every format, from f32, f16 and
// bf16 tensors (candle widens them to f32 itself), on every input
// distribution, the edges of the f32 (or f16) range included: 0 differing
// bytes. A difference is reported with its distribution, block, byte and the
// two blocks' bytes. Without the oracle the tests skip and say how to build
// it, except under CI=true, where they fail.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"
#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

using kqref::Dist;
using kqref::Format;
using kqref::Mode;

constexpr Format kFormats[] = {Format::q8_0, Format::q4_k, Format::q5_k, Format::q6_k};
constexpr int64_t kSuperblocks = 256;  // per distribution, format and dtype

const char *candle_format(Format f) {
  switch (f) {
    case Format::q8_0: return "Q8_0";
    case Format::q4_k: return "Q4K";
    case Format::q5_k: return "Q5K";
    case Format::q6_k: return "Q6K";
  }
  return "?";
}

bool in_ci() {
  const char *ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

std::string hex(const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

class KquantCandle : public ::testing::Test {
 protected:
  void SetUp() override {
    const char *path = std::getenv("KAIO_CANDLE_ORACLE");
    std::string why;
    struct stat st;
    if (!path || !*path) {
      why = "KAIO_CANDLE_ORACLE is not set (tests/meson.build sets it)";
    } else if (stat(path, &st) != 0) {
      why = std::string("the candle oracle ") + path +
            " is missing; build it with tests/oracle/build_candle_oracle.sh (cargo >= 1.87, "
            "crates.io; a few minutes)";
    } else {
      oracle_ = path;
      char tmpl[] = "/tmp/kaio_candle_XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      return;
    }
    if (in_ci()) FAIL() << "CI=true but " << why;
    GTEST_SKIP() << why;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::remove((dir_ + "/in.bin").c_str());
    std::remove((dir_ + "/out.bin").c_str());
    rmdir(dir_.c_str());
  }

  // candle's bytes for the values (already representable in dtype).
  std::vector<uint8_t> candle_quantize(Format f, kaio_dtype dt, const std::vector<float> &x) {
    std::vector<uint8_t> in;
    for (float v : x) {
      uint8_t b[4];
      if (dt == KAIO_DTYPE_F32) {
        std::memcpy(b, &v, 4);
        in.insert(in.end(), b, b + 4);
      } else {
        const uint16_t h = dt == KAIO_DTYPE_F16 ? kt::f32_to_f16(v) : kt::f32_to_bf16(v);
        std::memcpy(b, &h, 2);
        in.insert(in.end(), b, b + 2);
      }
    }
    const std::string in_path = dir_ + "/in.bin", out_path = dir_ + "/out.bin";
    {
      std::ofstream out(in_path, std::ios::binary);
      out.write(reinterpret_cast<const char *>(in.data()), static_cast<std::streamsize>(in.size()));
    }
    std::remove(out_path.c_str());
    const std::string dtype = dt == KAIO_DTYPE_F32 ? "f32" : dt == KAIO_DTYPE_F16 ? "f16" : "bf16";
    const pid_t pid = fork();
    if (pid == 0) {
      execl(oracle_.c_str(), oracle_.c_str(), candle_format(f), dtype.c_str(), in_path.c_str(),
            out_path.c_str(), static_cast<char *>(nullptr));
      _exit(127);
    }
    int status = 0;
    EXPECT_GT(pid, 0);
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << oracle_ << " " << candle_format(f) << " " << dtype << " failed (status " << status << ")";
    std::ifstream got(out_path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(got), std::istreambuf_iterator<char>());
  }

  std::string oracle_, dir_;
};

// Rounds values to dtype and back (the values a tensor of that dtype holds).
void round_to(kaio_dtype dt, std::vector<float> *x) {
  if (dt == KAIO_DTYPE_F32) return;
  for (float &v : *x) v = dt == KAIO_DTYPE_F16 ? kt::f16_to_f32(kt::f32_to_f16(v)) : kt::bf16_to_f32(kt::f32_to_bf16(v));
}

TEST_F(KquantCandle, CandleModeIsByteIdenticalToQTensorQuantize) {
  const uint64_t seed = kt::test_seed();
  const int64_t n_dist = static_cast<int64_t>(Dist::count), per_dist = kSuperblocks * 256;
  for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
    // every distribution, one after the other in one tensor
    std::vector<float> x;
    for (int64_t di = 0; di < n_dist; ++di) {
      const std::vector<float> part =
          kqref::make_inputs(static_cast<Dist>(di), per_dist, seed,
                             dt == KAIO_DTYPE_F16 ? kqref::Range::f16 : kqref::Range::f32);
      x.insert(x.end(), part.begin(), part.end());
    }
    round_to(dt, &x);
    const int64_t n = static_cast<int64_t>(x.size());
    for (Format f : kFormats) {
      SCOPED_TRACE(std::string(kqref::format_name(f)) + " from " + kaio_dtype_name(dt));
      const int64_t be = kqref::block_elems(f), bb = kqref::block_bytes(f);
      std::vector<uint8_t> ours(static_cast<size_t>(n / be * bb));
      kqref::quantize_row(f, Mode::candle, x.data(), n, ours.data());
      const std::vector<uint8_t> theirs = candle_quantize(f, dt, x);
      ASSERT_EQ(theirs.size(), ours.size());
      const int64_t blocks_per_dist = per_dist / be;
      for (int64_t di = 0; di < n_dist; ++di) {
        int64_t bad = 0;
        std::ostringstream first;
        for (int64_t b = di * blocks_per_dist; b < (di + 1) * blocks_per_dist; ++b) {
          const uint8_t *o = &ours[static_cast<size_t>(b * bb)], *t = &theirs[static_cast<size_t>(b * bb)];
          if (std::memcmp(o, t, static_cast<size_t>(bb)) == 0) continue;
          if (bad++ == 0) {
            int64_t byte = 0;
            while (o[byte] == t[byte]) ++byte;
            first << "first at block " << b - di * blocks_per_dist << ", byte " << byte
                  << "\n  candle: " << hex(t, static_cast<size_t>(bb))
                  << "\n  ours:   " << hex(o, static_cast<size_t>(bb)) << "\n  input:" << std::setprecision(9);
            for (int64_t i = 0; i < be; ++i) first << ' ' << x[static_cast<size_t>(b * be + i)];
          }
        }
        EXPECT_EQ(bad, 0) << kqref::dist_name(static_cast<Dist>(di)) << ": " << bad << " of "
                          << blocks_per_dist << " blocks differ; " << first.str();
      }
    }
  }
}

// The named edge superblocks, each its own tensor: a difference names its
// case and shows both blocks.
TEST_F(KquantCandle, CandleModeIsByteIdenticalOnEdgeBlocks) {
  for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
    const std::vector<kqref::EdgeBlock> edges =
        kqref::edge_blocks(dt == KAIO_DTYPE_F16 ? kqref::Range::f16 : kqref::Range::f32);
    std::vector<float> x;
    for (const kqref::EdgeBlock &e : edges) x.insert(x.end(), e.x.begin(), e.x.end());
    round_to(dt, &x);
    for (Format f : kFormats) {
      SCOPED_TRACE(std::string(kqref::format_name(f)) + " from " + kaio_dtype_name(dt));
      const int64_t bytes = 256 / kqref::block_elems(f) * kqref::block_bytes(f);
      const std::vector<uint8_t> theirs = candle_quantize(f, dt, x);
      ASSERT_EQ(static_cast<int64_t>(theirs.size()), bytes * static_cast<int64_t>(edges.size()));
      std::vector<uint8_t> ours(static_cast<size_t>(bytes));
      for (size_t e = 0; e < edges.size(); ++e) {
        kqref::quantize_row(f, Mode::candle, &x[e * 256], 256, ours.data());
        const uint8_t *t = &theirs[e * static_cast<size_t>(bytes)];
        EXPECT_EQ(std::memcmp(ours.data(), t, ours.size()), 0)
            << edges[e].name << "\n  candle: " << hex(t, ours.size()) << "\n  ours:   " << hex(ours.data(), ours.size());
      }
    }
  }
}

}  // namespace
