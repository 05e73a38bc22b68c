// Ops that enqueue several kernels check every view, overlap and tensor map
// before the first: a failing call leaves the stream untouched (so a retry
// with beta = 1 cannot add a gradient twice), and its message uses the
// names of the caller's arguments. On the fake driver, which counts launches.
#include <string>
#include <vector>

#include "support/fake_device_test.hpp"

namespace {

class FakeEnqueueNothing : public kt::FakeDeviceTest {};

// dC [M, N], A [M, K], B [K, N], dA [M, K], dB [K, N] in one buffer each,
// for an op made with grad_dtype `grad` and beta 1.
struct Backward {
  static constexpr int64_t m = 32, n = 48, k = 64;
  kt::Buffer dc, a, b, da, db;
  kt::Op op;
  kaio_dtype grad;

  Backward(kaio_device *d, kaio_dtype grad_dtype) : grad(grad_dtype) {
    const int64_t gsize = grad == KAIO_DTYPE_F32 ? 4 : 2;
    dc = kt::make_buffer(d, m * n * gsize);
    a = kt::make_buffer(d, m * k * 2);
    b = kt::make_buffer(d, k * n * 2);
    da = kt::make_buffer(d, m * k * 4 + m * n * 4);  // room to move dA onto other regions
    db = kt::make_buffer(d, k * n * 4);
    kaio_matmul_backward_desc desc;
    EXPECT_EQ(kaio_matmul_backward_desc_init(&desc, sizeof desc), KAIO_OK);
    desc.grad_dtype = grad;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.beta = 1.0f;
    kaio_op *o = nullptr;
    EXPECT_EQ(kaio_op_create_matmul_backward(&o, d, &desc), KAIO_OK) << kaio_last_error();
    op.reset(o);
  }
  std::vector<kaio_tensor> views() const {
    return {kaio_tensor_2d(dc.get(), grad, m, n), kaio_tensor_2d(a.get(), KAIO_DTYPE_F16, m, k),
            kaio_tensor_2d(b.get(), KAIO_DTYPE_F16, k, n),
            kaio_tensor_2d(da.get(), KAIO_DTYPE_F32, m, k),
            kaio_tensor_2d(db.get(), KAIO_DTYPE_F32, k, n)};
  }
};

TEST_F(FakeEnqueueNothing, MatmulBackwardChecksEveryViewAndOverlapFirst) {
  for (kaio_dtype grad : {KAIO_DTYPE_F16, KAIO_DTYPE_F32}) {
    SCOPED_TRACE(kaio_dtype_name(grad));
    Backward bw(dev_.get(), grad);
    ASSERT_TRUE(bw.op);
    std::vector<kaio_tensor> t = bw.views();
    const unsigned long long launches = kt::fake().launch_count();
    KT_OK(kaio_op_launch(bw.op.get(), stream_.get(), t.data(), 5));
    EXPECT_GT(kt::fake().launch_count(), launches);

    auto rejected = [&](std::vector<kaio_tensor> v, kaio_status status,
                        std::vector<const char *> parts, const char *what) {
      SCOPED_TRACE(what);
      const unsigned long long before = kt::fake().launch_count();
      kt::expect_rejected(kaio_op_launch(bw.op.get(), stream_.get(), v.data(), 5), status, parts,
                          before);
    };
    // dB's view is wrong: dA's product (and dC's rounding) must not run first
    std::vector<kaio_tensor> v = t;
    v[4].rows = Backward::k - 1;
    rejected(v, KAIO_ERROR_SHAPE_MISMATCH, {"'dB'"}, "dB has the wrong shape");
    v = t;
    v[4].dtype = KAIO_DTYPE_F16;
    rejected(v, KAIO_ERROR_INVALID_DTYPE, {"'dB'"}, "dB has the wrong dtype");
    // gradients over each other
    v = t;
    v[4] = kaio_tensor_2d(bw.da.get(), KAIO_DTYPE_F32, Backward::k, Backward::n);
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'dA'", "'dB'", "overlap"}, "dB is dA's memory");
    v = t;
    v[4].buffer = bw.da.get();
    v[4].offset_bytes = 64 * 4;  // dB starts inside dA
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'dA'", "'dB'", "overlap"}, "dB partly over dA");
    // gradients over inputs
    v = t;
    v[1] = kaio_tensor_2d(bw.da.get(), KAIO_DTYPE_F16, Backward::m, Backward::k);  // A inside dA
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'dA'", "'A'", "overlap"}, "dA over A");
    v = t;
    v[2] = kaio_tensor_2d(bw.db.get(), KAIO_DTYPE_F16, Backward::k, Backward::n);  // B inside dB
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'B'", "'dB'", "overlap"}, "dB over B");
    v = t;
    v[0] = kaio_tensor_2d(bw.da.get(), grad, Backward::m, Backward::n);  // dC inside dA
    v[0].offset_bytes = Backward::m * Backward::k * 4 - 64;
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'dA'", "'dC'", "overlap"}, "dA over dC");
    v = t;
    v[0] = kaio_tensor_2d(bw.db.get(), grad, Backward::m, Backward::n);  // dC inside dB
    rejected(v, KAIO_ERROR_INVALID_ARGUMENT, {"'dB'", "'dC'", "overlap"}, "dB over dC");
    // a wrong dC is named dC, whichever product reads it
    v = t;
    v[0].cols = Backward::n - 1;
    rejected(v, KAIO_ERROR_SHAPE_MISMATCH, {"'dC'"}, "dC has the wrong shape");
    // a misaligned B is named B (dA's product is the one that reads it)
    v = t;
    v[2].offset_bytes = 2;
    v[2].cols = Backward::n;
    rejected(v, KAIO_ERROR_OUT_OF_BOUNDS, {"'B'"}, "B runs past its buffer");
  }
}

// The k-quant tensor-core path dequantizes W (and rounds an f32 A) before
// its product: a bad C enqueues neither.
TEST_F(FakeEnqueueNothing, QuantMatmulChecksTheProductBeforeDequantizing) {
  const int64_t m = 16, n = 64, k = 256;
  kaio_op *o = nullptr;
  KT_OK(kaio_op_create_quant_matmul(&o, dev_.get(), KAIO_QUANT_Q4_K, KAIO_DTYPE_F32, KAIO_DTYPE_F32,
                                    m, n, k));
  kt::Op op(o);
  kt::Buffer a = kt::make_buffer(dev_.get(), m * k * 4);
  kt::Buffer w = kt::make_buffer(dev_.get(), n * kaio_quant_row_bytes(KAIO_QUANT_Q4_K, k));
  kt::Buffer c = kt::make_buffer(dev_.get(), m * n * 4);
  kaio_tensor t[] = {kaio_tensor_2d(a.get(), KAIO_DTYPE_F32, m, k),
                     kaio_tensor_2d(w.get(), KAIO_DTYPE_U8, n,
                                    kaio_quant_row_bytes(KAIO_QUANT_Q4_K, k)),
                     kaio_tensor_2d(c.get(), KAIO_DTYPE_F32, m, n)};
  KT_OK(kaio_op_launch(op.get(), stream_.get(), t, 3));
  t[2].dtype = KAIO_DTYPE_F16;
  const unsigned long long before = kt::fake().launch_count();
  kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), t, 3), KAIO_ERROR_INVALID_DTYPE,
                      {"'C'"}, before);
}

}  // namespace
