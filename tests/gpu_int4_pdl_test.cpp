// The int4 decode kernels in chains (on sm_90 their `_pdl` twins, which let
// the next kernel in at their start and wait for the previous grid before
// any real read or write): kernels on one
// stream with no synchronisation between them, each reading what the one
// before wrote.
//  * y1 = x W1, y2 = y1 W2, ... (N = K): every output NaN-poisoned first (a
//    read before the previous link's writes shows), each link against an f64
//    product of the GPU's previous output and the exactly dequantized W
//    (rounded once to the activations' type, as gpu_quant_test.cpp); then the
//    same chain through two ping-pong buffers (each link overwrites what the
//    one before read: a write before that read finished shows), same bits;
//  * the same with the fused QKV projection as every link (its q output feeds
//    the next link; k and v checked too).
// Tolerance: relative Frobenius error 2e-5 plus one output rounding.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

struct Link {
  int64_t n;
  std::vector<uint32_t> qw, qz;  // K/8 x N, K/g x N/8
  kt::HostTensor sc;             // K/g x N
  std::vector<double> w;         // K x N
  kt::Buffer bqw, bqz, bsc;
};

double round_to(kaio_dtype dt, double v) {
  const float f = static_cast<float>(v);
  return dt == KAIO_DTYPE_F16 ? kt::f16_to_f32(kt::f32_to_f16(f)) : kt::bf16_to_f32(kt::f32_to_bf16(f));
}

struct Chain {
  kaio_dtype dt;
  int64_t m, k, group;
  bool qkv;
};

std::string name_of(const Chain &c) {
  return std::string(c.qkv ? "qkv " : "matmul ") + kaio_dtype_name(c.dt) + " m " + std::to_string(c.m) +
         " n = k " + std::to_string(c.k) + " g " + std::to_string(c.group);
}

class GpuInt4Pdl : public kt::GpuTest {
 protected:
  // K x n GPTQ weights with qzeros; q and z uniform in 0..15, so (q - z) has mean 0 (a
  // mean adds a component common to every output that grows about K s-fold per link: f16
  // overflowed after 4 links of N = K = 4096 on the H100) and E[(q - z)^2 s^2] is about
  // 42.5 * 1.08 s0^2: s0 = 1 / sqrt(46 K) keeps a chain's magnitude.
  Link make_link(const Chain &c, int64_t n, uint64_t seed) {
    Link l;
    l.n = n;
    std::mt19937_64 rng(seed);
    l.qw.resize(static_cast<size_t>(c.k / 8 * n));
    for (auto &v : l.qw) v = static_cast<uint32_t>(rng());
    l.qz.resize(static_cast<size_t>(c.k / c.group * (n / 8)));
    for (auto &v : l.qz) v = static_cast<uint32_t>(rng());
    const double s0 = 1.0 / std::sqrt(46.0 * static_cast<double>(c.k));
    l.sc = kt::random_tensor(c.dt, static_cast<size_t>(c.k / c.group * n), 0.5 * s0, 1.5 * s0, seed + 1);
    l.w.assign(static_cast<size_t>(c.k * n), 0.0);
    for (int64_t kk = 0; kk < c.k; ++kk)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t g = kk / c.group;
        const int64_t q = (l.qw[static_cast<size_t>(kk / 8 * n + j)] >> (4 * (kk % 8))) & 15;
        const int64_t z = (l.qz[static_cast<size_t>(g * (n / 8) + j / 8)] >> (4 * (j % 8))) & 15;
        l.w[static_cast<size_t>(kk * n + j)] =
            round_to(c.dt, static_cast<double>(q - z) * l.sc.values[static_cast<size_t>(g * n + j)]);
      }
    l.bqw = upload(l.qw.data(), l.qw.size() * 4);
    l.bqz = upload(l.qz.data(), l.qz.size() * 4);
    l.bsc = upload(l.sc.bytes.data(), l.sc.bytes.size());
    return l;
  }
  void weights(const Chain &c, const Link &l, kaio_tensor *t) {
    t[0] = kaio_tensor_2d(l.bqw.get(), KAIO_DTYPE_U32, c.k / 8, l.n);
    t[1] = kaio_tensor_2d(l.bqz.get(), KAIO_DTYPE_U32, c.k / c.group, l.n / 8);
    t[2] = kaio_tensor_2d(l.bsc.get(), c.dt, c.k / c.group, l.n);
  }
  // One link: out[0] = in W[0] (and with qkv out[1], out[2] from W[1], W[2]).
  kaio_status link(const Chain &c, const Link *w, kaio_buffer *in, kaio_buffer *const out[3]) {
    const kaio_tensor x = kaio_tensor_2d(in, c.dt, c.m, c.k);
    if (!c.qkv) {
      kaio_matmul_int4_desc d;
      EXPECT_EQ(kaio_matmul_int4_desc_init(&d, sizeof d), KAIO_OK);
      d.in_dtype = d.out_dtype = c.dt;
      d.group_size = c.group;
      kaio_tensor t[3];
      weights(c, w[0], t);
      const kaio_tensor y = kaio_tensor_2d(out[0], c.dt, c.m, c.k);
      return kaio_matmul_int4(stream(), &x, &t[0], &t[1], &t[2], &y, &d);
    }
    kaio_qkv_int4_desc d;
    EXPECT_EQ(kaio_qkv_int4_desc_init(&d, sizeof d), KAIO_OK);
    d.in_dtype = d.out_dtype = c.dt;
    d.group_size = c.group;
    kaio_tensor t[13];
    t[0] = x;
    for (int p = 0; p < 3; ++p) {
      weights(c, w[p], &t[1 + 3 * p]);
      t[10 + p] = kaio_tensor_2d(out[p], c.dt, c.m, w[p].n);
    }
    return kaio_qkv_project_int4(stream(), t, 13, &d);
  }
  void check(const Chain &c, const std::vector<double> &in, const Link &l, const std::vector<double> &got,
             const std::string &what) {
    double err = 0, ref2 = 0;
    int64_t bad = 0;
    for (int64_t r = 0; r < c.m; ++r) {
      std::vector<double> ref(static_cast<size_t>(l.n), 0.0);  // row by row through W: cache friendly
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double xk = in[static_cast<size_t>(r * c.k + kk)];
        const double *wr = &l.w[static_cast<size_t>(kk * l.n)];
        for (int64_t j = 0; j < l.n; ++j) ref[static_cast<size_t>(j)] += xk * wr[j];
      }
      for (int64_t j = 0; j < l.n; ++j) {
        const double g = got[static_cast<size_t>(r * l.n + j)], e = ref[static_cast<size_t>(j)];
        if (!std::isfinite(g)) ++bad;
        err += (g - e) * (g - e);
        ref2 += e * e;
      }
    }
    EXPECT_EQ(bad, 0) << what << ": outputs left unwritten (poison) or not finite";
    const double tol = 2e-5 + (c.dt == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8));
    EXPECT_LE(std::sqrt(err / ref2), tol) << what;
  }
  void chain(const Chain &c, int links);
};

void GpuInt4Pdl::chain(const Chain &c, int links) {
  SCOPED_TRACE(name_of(c));
  const int np = c.qkv ? 3 : 1;
  const int64_t ns[3] = {c.k, c.k / 4, c.k / 8};  // q feeds the next link; k and v narrower
  std::vector<Link> w;
  for (int i = 0; i < links; ++i)
    for (int p = 0; p < np; ++p) w.push_back(make_link(c, ns[p], kt::test_seed() + 31 * i + 7 * p + 1));
  auto bytes = [&](int p) { return static_cast<size_t>(c.m * ns[p]) * 2; };
  kt::HostTensor x = kt::random_tensor(c.dt, static_cast<size_t>(c.m * c.k), -1, 1, kt::test_seed() + 5);
  kt::Buffer bx = upload(x.bytes.data(), x.bytes.size());
  std::vector<kt::Buffer> y;  // link i: y[np * i + p]
  for (int i = 0; i < links; ++i)
    for (int p = 0; p < np; ++p) y.push_back(poisoned(bytes(p)));
  for (int i = 0; i < links; ++i) {
    kaio_buffer *out[3] = {};
    for (int p = 0; p < np; ++p) out[p] = y[static_cast<size_t>(np * i + p)].get();
    KT_OK(link(c, &w[static_cast<size_t>(np * i)], i ? y[static_cast<size_t>(np * (i - 1))].get() : bx.get(), out));
  }
  std::vector<double> in = x.values;
  std::vector<uint8_t> last;
  for (int i = 0; i < links; ++i) {
    for (int p = np - 1; p >= 0; --p) {
      last = download(y[static_cast<size_t>(np * i + p)].get(), bytes(p));
      check(c, in, w[static_cast<size_t>(np * i + p)], kt::decode(c.dt, last),
            "link " + std::to_string(i) + " output " + std::to_string(p));
    }
    in = kt::decode(c.dt, last);
  }
  // Ping-pong: link i writes the buffer link i - 1 read (WAR) and reads what it wrote (RAW).
  kt::Buffer pp[2] = {upload(x.bytes.data(), x.bytes.size()), poisoned(bytes(0))};
  kt::Buffer side[2] = {poisoned(bytes(1)), poisoned(bytes(2))};
  for (int i = 0; i < links; ++i) {
    kaio_buffer *out[3] = {pp[(i + 1) % 2].get(), side[0].get(), side[1].get()};
    KT_OK(link(c, &w[static_cast<size_t>(np * i)], pp[i % 2].get(), out));
  }
  EXPECT_EQ(download(pp[links % 2].get(), bytes(0)), last) << "ping-pong chain differs from the chain";
}

// group 128: the contiguous-K kernels (N = K = 4096 M = 1: 16 warps; 8192 M = 1: 8); 64: the
// interleaved ones.
TEST_F(GpuInt4Pdl, ChainOfDependentMatvecsMatchesTheReference) {
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    for (int64_t m : {1, 16}) {
      chain({dt, m, 4096, 128, false}, 6);
      chain({dt, m, 2048, 64, false}, 4);
    }
  chain({KAIO_DTYPE_F16, 1, 8192, 128, false}, 3);
}

TEST_F(GpuInt4Pdl, ChainOfFusedQkvMatchesTheReference) {
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    for (int64_t m : {1, 16}) chain({dt, m, 2048, 128, true}, 4);
}

// Small enough for compute-sanitizer (memcheck, racecheck).
TEST_F(GpuInt4Pdl, SmallChainForTheSanitizers) {
  for (int64_t m : {1, 16}) {
    chain({KAIO_DTYPE_F16, m, 256, 128, false}, 3);
    chain({KAIO_DTYPE_BF16, m, 256, 64, false}, 3);
    chain({KAIO_DTYPE_F16, m, 256, 128, true}, 3);
  }
}

}  // namespace
