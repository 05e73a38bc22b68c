// The streaming k-quant matvec under programmatic dependent launch (sm_90:
// it lets the next kernel in at its start, prefetches its first weights and
// waits for the previous grid before any real read or write): chains of
// kernels on one stream, with no synchronisation between them, where each
// reads what the previous one wrote.
//  * y1 = W1 x, y2 = W2 y1, ... (N = K): each link against an f64 product of
//    the reference's dequantized W and the GPU's previous output, all
//    outputs poisoned (NaN) first, so a read before the previous link's
//    writes shows; then the same chain through two ping-pong buffers, where
//    each link overwrites what the link before it read (a write before that
//    read finished shows), which must give the same bits;
//  * quantize -> matvec, round after round into the same W buffer;
//  * a captured CUDA graph of a chain, replayed with fresh inputs.
// Weights are quantized on the GPU (kaio_quantize: GpuKquant checks its bytes
// against the reference) and dequantized by the reference for the f64
// products. Tolerances as gpu_kquant_test.cpp's (normwise against
// sum_k |a_k w_k|).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/graph_api.hpp"
#include "support/kaio_test.hpp"
#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

using kqref::Dist;
using kqref::Format;

kaio_quant_format api_format(Format f) { return static_cast<kaio_quant_format>(static_cast<int>(f) + 1); }

// One layer's weights: the quantized rows and the reference's dequantized values.
struct Weights {
  std::vector<uint8_t> q;
  std::vector<float> deq;
};

// sqrt(sum (got - ref)^2 / sum (sum_k |a w|)^2) of C = A · Wᵀ, A m x k.
double normwise_error(const std::vector<double> &a, const Weights &w, const std::vector<double> &got,
                      int64_t m, int64_t n, int64_t k) {
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double term = a[static_cast<size_t>(i * k + kk)] * w.deq[static_cast<size_t>(j * k + kk)];
        ref += term;
        mag += std::fabs(term);
      }
      const double g = got[static_cast<size_t>(i * n + j)];
      if (!std::isfinite(g)) return INFINITY;
      err += (g - ref) * (g - ref);
      norm += mag * mag;
    }
  return std::sqrt(err / norm);
}

double tolerance(kaio_dtype out) { return 1e-5 + (out == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : 0.0); }

struct Chain {
  Format f;
  kaio_dtype dt;  // A and C (f32 or f16): each output is the next input
  int64_t m, k;   // N = K
};

class GpuKquantPdl : public kt::GpuTest {
 protected:
  void chain(const Chain &c, int links);

  // The reference's view of quantized rows the GPU wrote: their bytes and dequantized values.
  Weights read_weights(kaio_buffer *q, Format f, int64_t n, int64_t k) {
    const int64_t row_bytes = k / kqref::block_elems(f) * kqref::block_bytes(f);
    Weights out{download(q, static_cast<size_t>(n * row_bytes)), std::vector<float>(static_cast<size_t>(n * k))};
    for (int64_t r = 0; r < n; ++r)
      kqref::dequantize_row(f, &out.q[static_cast<size_t>(r * row_bytes)], k, &out.deq[static_cast<size_t>(r * k)]);
    return out;
  }
  // x (n x k f32) quantized into q on the GPU (GpuKquant checks that
  // kaio_quantize writes the reference's bytes; the reference quantizes
  // slowly at these sizes).
  void quantize(kaio_buffer *x, kaio_buffer *q, Format f, int64_t n, int64_t k) {
    const kaio_tensor xt = kaio_tensor_2d(x, KAIO_DTYPE_F32, n, k),
                      qt = kaio_tensor_2d(q, KAIO_DTYPE_U8, n, k / kqref::block_elems(f) * kqref::block_bytes(f));
    EXPECT_EQ(kaio_quantize(stream(), &xt, &qt, api_format(f), KAIO_QUANT_MODE_GGML), KAIO_OK) << kaio_last_error();
  }
  // N x K weights, uniform scaled by sqrt(3 / K) so a chain keeps its
  // magnitude (each output's variance is its input's), quantized into a
  // buffer 16 bytes longer than W (Q6_K / Q8_0 windows may reach 15 past it).
  kt::Buffer make_weights(Format f, int64_t n, int64_t k, uint64_t seed, Weights *ref) {
    std::vector<float> w = kqref::make_inputs(Dist::uniform, n * k, seed);
    const float scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(k)));
    for (float &v : w) v *= scale;
    kt::Buffer x = kt::make_buffer(dev(), w.size() * 4);
    EXPECT_EQ(kaio_buffer_write(x.get(), 0, w.data(), w.size() * 4), KAIO_OK);
    const int64_t row_bytes = k / kqref::block_elems(f) * kqref::block_bytes(f);
    kt::Buffer q = kt::make_buffer(dev(), static_cast<uint64_t>(n * row_bytes + 16));
    EXPECT_EQ(kaio_buffer_memset(q.get(), stream(), 0, 0, n * row_bytes + 16), KAIO_OK);
    quantize(x.get(), q.get(), f, n, k);
    *ref = read_weights(q.get(), f, n, k);
    return q;
  }
};

const Chain kChains[] = {{Format::q4_k, KAIO_DTYPE_F16, 1, 4096}, {Format::q5_k, KAIO_DTYPE_F32, 1, 2048},
                         {Format::q6_k, KAIO_DTYPE_F16, 3, 4352}, {Format::q8_0, KAIO_DTYPE_F16, 1, 4352},
                         {Format::q4_k, KAIO_DTYPE_F32, 2, 4352}, {Format::q6_k, KAIO_DTYPE_F32, 1, 2048}};

std::string name_of(const Chain &c) {
  return std::string(kqref::format_name(c.f)) + " " + kaio_dtype_name(c.dt) + " m " + std::to_string(c.m) +
         " n = k " + std::to_string(c.k);
}

// links matvecs y[i + 1] = W[i] y[i] on distinct buffers, then on two ping-pong buffers.
void GpuKquantPdl::chain(const Chain &c, int links) {
  {
    SCOPED_TRACE(name_of(c));
    const int64_t row_bytes = c.k / kqref::block_elems(c.f) * kqref::block_bytes(c.f);
    const size_t ybytes = static_cast<size_t>(c.m * c.k) * kaio_dtype_size(c.dt);
    std::vector<Weights> w;
    std::vector<kt::Buffer> wbuf, ybuf;
    for (int i = 0; i < links; ++i) {
      w.emplace_back();
      wbuf.push_back(make_weights(c.f, c.k, c.k, kt::test_seed() + 31 * i + 1, &w.back()));
    }
    // (kaio_buffer_write is not ordered after the stream's memsets: x goes
    // into a buffer no memset touches)
    kt::HostTensor x = kt::random_tensor(c.dt, static_cast<size_t>(c.m * c.k), -1, 1, kt::test_seed() + 7);
    ybuf.push_back(upload(x.bytes));
    for (int i = 1; i <= links; ++i) {
      ybuf.push_back(kt::make_buffer(dev(), ybytes));
      ASSERT_EQ(kaio_buffer_memset(ybuf.back().get(), stream(), 0, 0xFF, ybytes), KAIO_OK);
    }
    auto view = [&](kaio_buffer *b, kaio_dtype dt, int64_t rows, int64_t cols) {
      return kaio_tensor_2d(b, dt, rows, cols);
    };
    auto link = [&](int i, kaio_buffer *in, kaio_buffer *out) {
      const kaio_tensor a = view(in, c.dt, c.m, c.k), wt = view(wbuf[i].get(), KAIO_DTYPE_U8, c.k, row_bytes),
                        y = view(out, c.dt, c.m, c.k);
      return kaio_quant_matmul(stream(), &a, &wt, &y, api_format(c.f));
    };
    // Distinct buffers: each link checked against its own input as the GPU wrote it.
    for (int i = 0; i < links; ++i) KT_OK(link(i, ybuf[i].get(), ybuf[i + 1].get()));
    std::vector<double> in = x.values;
    std::vector<uint8_t> last;
    uint64_t bits = 0xcbf29ce484222325ull;  // FNV-1a of every link's output
    for (int i = 0; i < links; ++i) {
      last = download(ybuf[i + 1].get(), ybytes);
      for (uint8_t byte : last) bits = (bits ^ byte) * 0x100000001b3ull;
      const std::vector<double> got = kt::decode(c.dt, last);
      EXPECT_LE(normwise_error(in, w[i], got, c.m, c.k, c.k), tolerance(c.dt)) << "link " << i;
      in = got;
    }
    // Another library's chain must print the same line with the same
    // KAIO_TEST_SEED (programmatic dependent launch changes no bits).
    std::printf("[bits] %s links %d: %016llx\n", name_of(c).c_str(), links, static_cast<unsigned long long>(bits));
    // Ping-pong: link i writes the buffer link i - 1 read (WAR), reads what it wrote (RAW).
    kt::Buffer pp[2] = {kt::make_buffer(dev(), ybytes), kt::make_buffer(dev(), ybytes)};
    KT_OK(kaio_buffer_write(pp[0].get(), 0, x.bytes.data(), x.bytes.size()));
    ASSERT_EQ(kaio_buffer_memset(pp[1].get(), stream(), 0, 0xFF, ybytes), KAIO_OK);
    for (int i = 0; i < links; ++i) KT_OK(link(i, pp[i % 2].get(), pp[(i + 1) % 2].get()));
    EXPECT_EQ(download(pp[links % 2].get(), ybytes), last) << "ping-pong chain differs from the chain";
  }
}

TEST_F(GpuKquantPdl, ChainOfDependentMatvecsMatchesTheReference) {
  for (const Chain &c : kChains) chain(c, 8);
}

// Small enough for compute-sanitizer (memcheck, racecheck): Q6_K in windows
// (K = 768: rows 630 bytes apart), Q8_0 rows of 17 blocks.
TEST_F(GpuKquantPdl, SmallChainForTheSanitizers) {
  for (const Chain &c : {Chain{Format::q4_k, KAIO_DTYPE_F16, 1, 512}, Chain{Format::q6_k, KAIO_DTYPE_F32, 2, 768},
                         Chain{Format::q8_0, KAIO_DTYPE_F16, 1, 544}})
    chain(c, 3);
}

// Weights written by the previous kernel: quantize then matvec, four rounds
// into one W buffer (each quantize overwrites what the last matvec read).
TEST_F(GpuKquantPdl, QuantizeThenMatvecOnOneStream) {
  for (Format f : {Format::q4_k, Format::q5_k, Format::q6_k, Format::q8_0}) {
    SCOPED_TRACE(kqref::format_name(f));
    const int64_t n = 2048, k = 4096, m = 1, rounds = 4;
    const int64_t row_bytes = k / kqref::block_elems(f) * kqref::block_bytes(f);
    kt::Buffer wbuf = kt::make_buffer(dev(), static_cast<uint64_t>(n * row_bytes + 16));
    ASSERT_EQ(kaio_buffer_memset(wbuf.get(), stream(), 0, 0, n * row_bytes + 16), KAIO_OK);
    kt::HostTensor a = kt::random_tensor(KAIO_DTYPE_F16, static_cast<size_t>(m * k), -1, 1, kt::test_seed() + 3);
    kt::Buffer abuf = upload(a.bytes);
    std::vector<kt::Buffer> cbuf;
    std::vector<std::vector<float>> xs;
    for (int64_t r = 0; r < rounds; ++r) {
      xs.push_back(kqref::make_inputs(Dist::uniform, n * k, kt::test_seed() + 11 * r));
      cbuf.push_back(kt::make_buffer(dev(), static_cast<uint64_t>(m * n * 4)));
      ASSERT_EQ(kaio_buffer_memset(cbuf.back().get(), stream(), 0, 0xFF, m * n * 4), KAIO_OK);
    }
    // Every x uploaded first (synchronous writes), then the 2 x rounds kernels back to back.
    std::vector<kt::Buffer> xbufs;
    for (int64_t r = 0; r < rounds; ++r) {
      xbufs.push_back(kt::make_buffer(dev(), static_cast<uint64_t>(n * k * 4)));
      KT_OK(kaio_buffer_write(xbufs.back().get(), 0, xs[static_cast<size_t>(r)].data(), static_cast<size_t>(n * k * 4)));
    }
    const kaio_tensor wt = kaio_tensor_2d(wbuf.get(), KAIO_DTYPE_U8, n, row_bytes),
                      at = kaio_tensor_2d(abuf.get(), KAIO_DTYPE_F16, m, k);
    for (int64_t r = 0; r < rounds; ++r) {
      const kaio_tensor ct = kaio_tensor_2d(cbuf[static_cast<size_t>(r)].get(), KAIO_DTYPE_F32, m, n);
      quantize(xbufs[static_cast<size_t>(r)].get(), wbuf.get(), f, n, k);
      KT_OK(kaio_quant_matmul(stream(), &at, &wt, &ct, api_format(f)));
    }
    kt::Buffer scratch = kt::make_buffer(dev(), static_cast<uint64_t>(n * row_bytes));
    for (int64_t r = 0; r < rounds; ++r) {
      quantize(xbufs[static_cast<size_t>(r)].get(), scratch.get(), f, n, k);  // this round's W again
      const Weights w = read_weights(scratch.get(), f, n, k);
      const std::vector<double> got =
          kt::decode(KAIO_DTYPE_F32, download(cbuf[static_cast<size_t>(r)].get(), static_cast<size_t>(m * n * 4)));
      EXPECT_LE(normwise_error(a.values, w, got, m, n, k), tolerance(KAIO_DTYPE_F32)) << "round " << r;
    }
  }
}

// A chain captured into a CUDA graph (programmatic edges between its
// kernels) and replayed with fresh inputs; the replays must give the bits of
// the same chain launched on the stream.
TEST_F(GpuKquantPdl, CapturedChainReplaysLikeTheStream) {
  kt::GraphApi api = kt::graph_api();
  ASSERT_TRUE(api.begin && api.end && api.instantiate && api.launch && api.push && api.pop)
      << "driver lacks graph API";
  ASSERT_EQ(api.push(kaio_device_native_context(dev())), 0);
  kt::PopContext pop{api};
  const Format f = Format::q4_k;
  const kaio_dtype dt = KAIO_DTYPE_F16;
  const int64_t m = 1, k = 4096, links = 6;
  const int64_t row_bytes = k / kqref::block_elems(f) * kqref::block_bytes(f);
  const size_t ybytes = static_cast<size_t>(m * k) * 2;
  std::vector<Weights> w;
  std::vector<kt::Buffer> wbuf, ybuf;
  std::vector<kt::Op> ops;
  for (int64_t i = 0; i < links; ++i) {
    w.emplace_back();
    wbuf.push_back(make_weights(f, k, k, kt::test_seed() + 5 * i + 2, &w.back()));
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_quant_matmul(&op, dev(), api_format(f), dt, dt, m, k, k));
    ops.emplace_back(op);
  }
  for (int64_t i = 0; i <= links; ++i) ybuf.push_back(kt::make_buffer(dev(), ybytes));
  auto enqueue = [&]() -> kaio_status {
    for (int64_t i = 0; i < links; ++i) {
      const kaio_tensor t[] = {kaio_tensor_2d(ybuf[static_cast<size_t>(i)].get(), dt, m, k),
                               kaio_tensor_2d(wbuf[static_cast<size_t>(i)].get(), KAIO_DTYPE_U8, k, row_bytes),
                               kaio_tensor_2d(ybuf[static_cast<size_t>(i + 1)].get(), dt, m, k)};
      const kaio_status s = kaio_op_launch(ops[static_cast<size_t>(i)].get(), stream(), t, 3);
      if (s != KAIO_OK) return s;
    }
    return KAIO_OK;
  };
  auto fresh_input = [&](int round) {
    kt::HostTensor x = kt::random_tensor(dt, static_cast<size_t>(m * k), -1, 1, kt::test_seed() + 100 + round);
    EXPECT_EQ(kaio_buffer_write(ybuf[0].get(), 0, x.bytes.data(), x.bytes.size()), KAIO_OK);
    for (int64_t i = 1; i <= links; ++i)
      EXPECT_EQ(kaio_buffer_memset(ybuf[static_cast<size_t>(i)].get(), stream(), 0, 0xFF, ybytes), KAIO_OK);
    return x;
  };
  KT_OK(enqueue());  // warm: every kernel loaded before the capture
  KT_OK(kaio_stream_synchronize(stream()));

  void *s = kaio_stream_native(stream());
  ASSERT_EQ(api.begin(s, 0), 0);
  KT_OK(enqueue());
  void *graph = nullptr, *exec = nullptr;
  ASSERT_EQ(api.end(s, &graph), 0) << "capture was invalidated by a kaio call";
  ASSERT_EQ(api.instantiate(&exec, graph, 0), 0);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    kt::HostTensor x = fresh_input(round);
    ASSERT_EQ(api.launch(exec, s), 0);
    std::vector<std::vector<uint8_t>> replayed;
    for (int64_t i = 1; i <= links; ++i) replayed.push_back(download(ybuf[static_cast<size_t>(i)].get(), ybytes));
    std::vector<double> in = x.values;
    for (int64_t i = 0; i < links; ++i) {
      const std::vector<double> got = kt::decode(dt, replayed[static_cast<size_t>(i)]);
      EXPECT_LE(normwise_error(in, w[static_cast<size_t>(i)], got, m, k, k), tolerance(dt)) << "link " << i;
      in = got;
    }
    fresh_input(round);
    KT_OK(enqueue());
    EXPECT_EQ(download(ybuf[static_cast<size_t>(links)].get(), ybytes), replayed.back())
        << "the stream's chain and the graph's differ";
  }
  EXPECT_EQ(api.exec_destroy(exec), 0);
  EXPECT_EQ(api.graph_destroy(graph), 0);
}

}  // namespace
