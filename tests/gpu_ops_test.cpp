// Every built-in op against an f64 CPU reference computed from the same
// rounded inputs, on fresh random data with poisoned outputs, for every
// dtype, odd shapes, both launch shapes of the row ops, strided, offset and
// in-place views. Skips with its reason when no real GPU is present.
//
// Tolerance for each element (stated once, used everywhere):
//   |out - ref| <= rtol * |ref| + atol
//   rtol = half an ulp of the output dtype (f32 0, f16 2^-11, bf16 2^-8)
//        + f32 math error: 4e-6 for element-wise ops, 4e-6 + 2^-22·sqrt(K)
//          for row reductions over K = cols elements (tree-summed in f32)
//   atol = 2e-7·|x| for GELU (its approximations are bounded in absolute
//          error, which matters where 1 + erf or 1 + tanh cancels)
//        + the dtype's smallest normal spacing floor (f16 6e-8, else 1e-30).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "support/kaio_test.hpp"

namespace {

enum class Op { silu_gate, gelu_erf, gelu_tanh, rmsnorm, softmax };
const char *op_name(Op op) {
  switch (op) {
    case Op::silu_gate: return "silu_gate";
    case Op::gelu_erf: return "gelu_erf";
    case Op::gelu_tanh: return "gelu_tanh";
    case Op::rmsnorm: return "rmsnorm";
    case Op::softmax: return "softmax";
  }
  return "";
}
bool is_row_op(Op op) { return op == Op::rmsnorm || op == Op::softmax; }

// How the views sit in their buffers.
struct Layout {
  int64_t offset_elems = 0;  // 1 breaks 16-byte alignment: the scalar path
  int64_t in_pad = 0;        // row_stride = cols + pad (row ops only)
  int64_t out_pad = 0;
  bool in_place = false;
  bool prepared = false;     // op handle instead of the one-shot call
};

double half_ulp(kaio_dtype dt) {
  return dt == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : dt == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -8) : 0.0;
}

double tolerance(Op op, kaio_dtype dt, int64_t cols, double ref, double x) {
  double math = 4e-6;
  if (is_row_op(op)) math += std::ldexp(1.0, -22) * std::sqrt(static_cast<double>(cols));
  double atol = dt == KAIO_DTYPE_F16 ? 6e-8 : 1e-30;
  if (op == Op::gelu_erf || op == Op::gelu_tanh) atol += 2e-7 * std::fabs(x);
  return (half_ulp(dt) + math) * std::fabs(ref) + atol;
}

void reference(Op op, int64_t rows, int64_t cols, const std::vector<double> &x, int64_t xs,
               const std::vector<double> &g, const std::vector<double> &w, float eps,
               std::vector<double> &ref) {
  ref.assign(rows * cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x[r * xs];
    double *o = &ref[r * cols];
    switch (op) {
      case Op::silu_gate:
        for (int64_t c = 0; c < cols; ++c) o[c] = xr[c] / (1.0 + std::exp(-xr[c])) * g[r * xs + c];
        break;
      case Op::gelu_erf:
        for (int64_t c = 0; c < cols; ++c) o[c] = 0.5 * xr[c] * (1.0 + std::erf(xr[c] / std::sqrt(2.0)));
        break;
      case Op::gelu_tanh: {
        const double k = std::sqrt(2.0 / M_PI);
        for (int64_t c = 0; c < cols; ++c) {
          double v = xr[c];
          o[c] = 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
        }
        break;
      }
      case Op::rmsnorm: {
        double ss = 0;
        for (int64_t c = 0; c < cols; ++c) ss += xr[c] * xr[c];
        double inv = 1.0 / std::sqrt(ss / cols + static_cast<double>(eps));
        for (int64_t c = 0; c < cols; ++c) o[c] = xr[c] * inv * w[c];
        break;
      }
      case Op::softmax: {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
        for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
        for (int64_t c = 0; c < cols; ++c) o[c] = std::exp(xr[c] - m) / s;
        break;
      }
    }
  }
}

class GpuOps : public kt::GpuTest {
 protected:
  // Runs one case and checks every element of the output view plus that the
  // bytes around it (offset and row padding) still hold the poison.
  void check(Op op, kaio_dtype dt, int64_t rows, int64_t cols, Layout lay, double lo = -6,
             double hi = 6) {
    SCOPED_TRACE(::testing::Message() << op_name(op) << " " << kaio_dtype_name(dt) << " " << rows
                                      << "x" << cols << " offset " << lay.offset_elems << " pads "
                                      << lay.in_pad << "/" << lay.out_pad
                                      << (lay.in_place ? " in-place" : "")
                                      << (lay.prepared ? " prepared" : " one-shot"));
    const size_t es = kaio_dtype_size(dt);
    const bool row_op = is_row_op(op);
    const int64_t xs = cols + (row_op ? lay.in_pad : 0);
    const int64_t os = lay.in_place ? xs : cols + (row_op ? lay.out_pad : 0);
    const size_t in_elems = lay.offset_elems + (rows - 1) * xs + cols;
    const size_t out_elems = lay.offset_elems + (rows - 1) * os + cols;
    uint64_t seed = kt::test_seed() ^ (static_cast<uint64_t>(rows) * 1000003u + cols * 7919u +
                                       static_cast<uint64_t>(op) * 31 + dt);

    kt::HostTensor x = kt::random_tensor(dt, in_elems, lo, hi, seed);
    kt::HostTensor g = kt::random_tensor(dt, in_elems, -3, 3, seed + 1);
    kt::HostTensor w = kt::random_tensor(dt, cols, -2, 2, seed + 2);
    kt::Buffer bx = kt::make_buffer(dev(), in_elems * es);
    kt::Buffer bg = kt::make_buffer(dev(), in_elems * es);
    kt::Buffer bw = kt::make_buffer(dev(), cols * es);
    kt::Buffer bo = lay.in_place ? nullptr : kt::make_buffer(dev(), out_elems * es);
    kaio_buffer *out_buf = lay.in_place ? bx.get() : bo.get();
    KT_OK(kaio_buffer_write(bx.get(), 0, x.bytes.data(), x.bytes.size()));
    KT_OK(kaio_buffer_write(bg.get(), 0, g.bytes.data(), g.bytes.size()));
    KT_OK(kaio_buffer_write(bw.get(), 0, w.bytes.data(), w.bytes.size()));
    if (!lay.in_place) KT_OK(kaio_buffer_memset(out_buf, stream(), 0, 0xFF, out_elems * es));

    auto make_view = [&](kaio_buffer *b, int64_t stride) {
      kaio_tensor t = kaio_tensor_2d(b, dt, rows, cols);
      t.offset_bytes = lay.offset_elems * es;
      t.row_stride = stride;
      return t;
    };
    kaio_tensor tx = make_view(bx.get(), xs), tg = make_view(bg.get(), xs);
    kaio_tensor to = make_view(out_buf, os), tw = kaio_tensor_2d(bw.get(), dt, 1, cols);
    const float eps = 1e-5f;
    launch(op, dt, rows, cols, lay.prepared, tx, tg, tw, to, eps);
    KT_OK(kaio_stream_synchronize(stream()));

    std::vector<uint8_t> out_bytes(out_elems * es);
    KT_OK(kaio_buffer_read(out_buf, 0, out_bytes.data(), out_bytes.size()));
    std::vector<double> out = kt::decode(dt, out_bytes);
    std::vector<double> xv(x.values.begin() + lay.offset_elems, x.values.end());
    std::vector<double> gv(g.values.begin() + lay.offset_elems, g.values.end());
    std::vector<double> ref;
    reference(op, rows, cols, xv, xs, gv, w.values, eps, ref);

    double worst = 0;  // fraction of the tolerance used
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        double got = out[lay.offset_elems + r * os + c], want = ref[r * cols + c];
        double tol = tolerance(op, dt, cols, want, xv[r * xs + c]);
        double err = std::fabs(got - want);
        if (!(err <= tol)) {
          if (++bad <= 5)
            ADD_FAILURE() << "(" << r << ", " << c << "): got " << got << ", want " << want
                          << " (x = " << xv[r * xs + c] << ", tol " << tol << ")";
        } else if (tol > 0) {
          worst = std::max(worst, err / tol);
        }
      }
    }
    EXPECT_EQ(bad, 0) << bad << " elements outside tolerance";
    if (!lay.in_place) {
      // Bytes that are not part of the output view must be untouched.
      for (size_t i = 0; i < out_elems; ++i) {
        bool in_view = i >= static_cast<size_t>(lay.offset_elems) &&
                       static_cast<int64_t>((i - lay.offset_elems) % os) < cols;
        if (in_view) continue;
        for (size_t b = 0; b < es; ++b)
          ASSERT_EQ(out_bytes[i * es + b], 0xFF) << "element " << i << " outside the view was written";
      }
    }
    RecordProperty("tolerance_used", std::to_string(worst));
  }

  void launch(Op op, kaio_dtype dt, int64_t rows, int64_t cols, bool prepared,
              const kaio_tensor &x, const kaio_tensor &g, const kaio_tensor &w,
              const kaio_tensor &o, float eps) {
    if (!prepared) {
      switch (op) {
        case Op::silu_gate: KT_OK(kaio_silu_gate(stream(), &x, &g, &o)); return;
        case Op::gelu_erf: KT_OK(kaio_gelu(stream(), &x, &o, KAIO_GELU_ERF)); return;
        case Op::gelu_tanh: KT_OK(kaio_gelu(stream(), &x, &o, KAIO_GELU_TANH)); return;
        case Op::rmsnorm: KT_OK(kaio_rmsnorm(stream(), &x, &w, &o, eps)); return;
        case Op::softmax: KT_OK(kaio_softmax(stream(), &x, &o)); return;
      }
    }
    kaio_op *handle = nullptr;
    switch (op) {
      case Op::silu_gate: KT_OK(kaio_op_create_silu_gate(&handle, dev(), dt, rows, cols)); break;
      case Op::gelu_erf: KT_OK(kaio_op_create_gelu(&handle, dev(), dt, rows, cols, KAIO_GELU_ERF)); break;
      case Op::gelu_tanh: KT_OK(kaio_op_create_gelu(&handle, dev(), dt, rows, cols, KAIO_GELU_TANH)); break;
      case Op::rmsnorm: KT_OK(kaio_op_create_rmsnorm(&handle, dev(), dt, rows, cols, eps)); break;
      case Op::softmax: KT_OK(kaio_op_create_softmax(&handle, dev(), dt, rows, cols)); break;
    }
    kt::Op guard(handle);
    std::vector<kaio_tensor> t;
    if (op == Op::silu_gate) t = {x, g, o};
    else if (op == Op::rmsnorm) t = {x, w, o};
    else t = {x, o};
    KT_OK(kaio_op_launch(handle, stream(), t.data(), t.size()));
  }
};

const kaio_dtype kDtypes[] = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};

struct Shape {
  int64_t rows, cols;
};

class GpuElementwise : public GpuOps, public ::testing::WithParamInterface<kaio_dtype> {};

TEST_P(GpuElementwise, MatchesReferenceOnOddShapesAndLayouts) {
  const Shape shapes[] = {{1, 1}, {1, 7}, {3, 5}, {1, 8}, {2, 9}, {13, 257}, {64, 4096},
                          {1, (1 << 20) + 3}, {1027, 129}};
  int n = 0;
  for (Op op : {Op::silu_gate, Op::gelu_erf, Op::gelu_tanh})
    for (const Shape &s : shapes)
      for (int64_t offset : {0, 1}) {
        Layout lay;
        lay.offset_elems = offset;
        lay.prepared = (n++ % 2) == 0;
        check(op, GetParam(), s.rows, s.cols, lay);
      }
}

TEST_P(GpuElementwise, InPlaceAndWideRange) {
  Layout lay;
  lay.in_place = true;
  for (Op op : {Op::silu_gate, Op::gelu_erf, Op::gelu_tanh}) check(op, GetParam(), 33, 1001, lay);
  Layout wide;
  double hi = GetParam() == KAIO_DTYPE_F16 ? 60 : 100;  // silu(100)·3 overflows no dtype
  for (Op op : {Op::silu_gate, Op::gelu_erf, Op::gelu_tanh})
    check(op, GetParam(), 7, 4099, wide, -hi, hi);
}

class GpuRows : public GpuOps, public ::testing::WithParamInterface<kaio_dtype> {};

TEST_P(GpuRows, MatchReferenceAcrossRowLengths) {
  const Shape shapes[] = {{1, 1},    {1, 31},     {7, 32},   {5, 1023}, {8, 1024}, {3, 1025},
                          {2, 4096}, {1, 100003}, {3, 131072}, {129, 33}, {1000, 64}};
  int n = 0;
  for (Op op : {Op::rmsnorm, Op::softmax})
    for (const Shape &s : shapes) {
      Layout lay;
      lay.prepared = (n++ % 2) == 0;
      check(op, GetParam(), s.rows, s.cols, lay, op == Op::softmax ? -8 : -3,
            op == Op::softmax ? 8 : 3);
    }
}

TEST_P(GpuRows, StridedOffsetAndInPlaceViews) {
  for (Op op : {Op::rmsnorm, Op::softmax}) {
    for (const Shape &s : {Shape{9, 37}, Shape{4, 1500}, Shape{16, 512}}) {
      Layout strided;
      strided.in_pad = 3;
      strided.out_pad = 5;
      check(op, GetParam(), s.rows, s.cols, strided);
      Layout offset;
      offset.offset_elems = 1;
      offset.prepared = true;
      check(op, GetParam(), s.rows, s.cols, offset);
      Layout inplace;
      inplace.in_place = true;
      inplace.in_pad = 8;
      check(op, GetParam(), s.rows, s.cols, inplace);
    }
  }
}

TEST_P(GpuRows, SoftmaxIsStableForLargeLogits) {
  double big = GetParam() == KAIO_DTYPE_F16 ? 6e4 : 1e30;
  check(Op::softmax, GetParam(), 5, 777, Layout{}, big * 0.5, big);
  check(Op::softmax, GetParam(), 5, 3001, Layout{}, -big, -big * 0.5);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuElementwise, ::testing::ValuesIn(kDtypes),
                         [](const auto &i) { return std::string(kaio_dtype_name(i.param)); });
INSTANTIATE_TEST_SUITE_P(Dtypes, GpuRows, ::testing::ValuesIn(kDtypes),
                         [](const auto &i) { return std::string(kaio_dtype_name(i.param)); });

}  // namespace
