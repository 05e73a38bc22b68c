// Add + RMSNorm and LayerNorm on the fake driver: every bad argument gets
// its status and a message naming the function, the argument and the
// value, with no launch; good calls launch once with the documented
// parameters (absent LayerNorm weight / bias as address 0).
#include <cmath>
#include <functional>
#include <limits>

#include "support/kaio_test.hpp"

namespace {

class HostNorms : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = kt::open_device(0);
    stream_ = kt::make_stream(dev_.get());
    buf_ = kt::make_buffer(dev_.get(), 1 << 16);
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_add_rmsnorm(&op, dev_.get(), KAIO_DTYPE_BF16, 8, 16, 1e-6f));
    add_.reset(op);
    KT_OK(kaio_op_create_layernorm(&op, dev_.get(), KAIO_DTYPE_BF16, 8, 16, 1e-5f));
    ln_.reset(op);
  }
  // An 8 x 16 bf16 view (or rows x cols) starting `at` bytes into the buffer.
  kaio_tensor view(uint64_t at, int64_t rows = 8, int64_t cols = 16,
                   kaio_dtype dt = KAIO_DTYPE_BF16) {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = at;
    return t;
  }
  void rejected(kaio_status got, kaio_status want, const std::vector<const char *> &parts) {
    kt::expect_rejected(got, want, parts, launches_);
  }
  kaio_status launch(const kaio_op *op, std::vector<kaio_tensor> t) {
    launches_ = kt::fake().launch_count();
    return kaio_op_launch(op, stream_.get(), t.data(), t.size());
  }
  kt::Device dev_;
  kt::Stream stream_;
  kt::Buffer buf_;
  kt::Op add_, ln_;
  unsigned long long launches_ = 0;
};

TEST_F(HostNorms, CreateRejectsBadEpsShapesAndDtypes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  kaio_op *op = nullptr;
  launches_ = kt::fake().launch_count();
  rejected(kaio_op_create_add_rmsnorm(&op, dev_.get(), KAIO_DTYPE_F32, 4, 4, nan),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_op_create_add_rmsnorm", "'eps'", "nan", "finite"});
  rejected(kaio_op_create_layernorm(&op, dev_.get(), KAIO_DTYPE_F32, 4, 4, -1e-5f),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_op_create_layernorm", "'eps'", "-1e-05", ">= 0"});
  rejected(kaio_op_create_layernorm(&op, dev_.get(), KAIO_DTYPE_F16, 4, 4, inf),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_op_create_layernorm", "'eps'", "inf"});
  rejected(kaio_op_create_add_rmsnorm(&op, dev_.get(), KAIO_DTYPE_F32, 4, 0, 1e-5f),
           KAIO_ERROR_INVALID_DIMENSION, {"kaio_op_create_add_rmsnorm", "0"});
  rejected(kaio_op_create_layernorm(&op, dev_.get(), KAIO_DTYPE_I32, 4, 4, 1e-5f),
           KAIO_ERROR_INVALID_DTYPE, {"kaio_op_create_layernorm", "i32"});
  rejected(kaio_op_create_add_rmsnorm(&op, dev_.get(), KAIO_DTYPE_F32, int64_t{1} << 32, 4, 1e-5f),
           KAIO_ERROR_INVALID_DIMENSION, {"kaio_op_create_add_rmsnorm", "4294967296", "Split"});
  rejected(kaio_op_create_layernorm(nullptr, dev_.get(), KAIO_DTYPE_F32, 4, 4, 1e-5f),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_op_create_layernorm", "'out'"});
  EXPECT_EQ(op, nullptr);
  // eps = 0 is allowed
  KT_OK(kaio_op_create_layernorm(&op, dev_.get(), KAIO_DTYPE_F32, 4, 4, 0.0f));
  kaio_op_destroy(op);
}

TEST_F(HostNorms, AddRmsNormLaunchChecksOverlapAndShapes) {
  const kaio_tensor x = view(0), res = view(4096), w = view(8192, 1, 16), out = view(12288);
  rejected(launch(add_.get(), {x, res, w}), KAIO_ERROR_INVALID_ARGUMENT,
           {"kaio_op_launch", "{x, residual, weight, out}", "3"});
  rejected(launch(add_.get(), {x, x, w, out}), KAIO_ERROR_INVALID_ARGUMENT,
           {"kaio_op_launch", "'residual'", "'x'", "overlap"});
  rejected(launch(add_.get(), {x, res, w, res}), KAIO_ERROR_INVALID_ARGUMENT,
           {"'residual'", "'out'", "overlap"});
  rejected(launch(add_.get(), {x, res, view(4096, 1, 16), out}), KAIO_ERROR_INVALID_ARGUMENT,
           {"'weight'", "'residual'", "overlap"});
  rejected(launch(add_.get(), {x, res, view(12288, 1, 16), out}), KAIO_ERROR_INVALID_ARGUMENT,
           {"'weight'", "'out'", "overlap"});
  rejected(launch(add_.get(), {x, res, view(8192, 2, 16), out}), KAIO_ERROR_SHAPE_MISMATCH,
           {"'weight'", "2 x 16", "1 x 16"});
  rejected(launch(add_.get(), {x, view(4096, 8, 16, KAIO_DTYPE_F16), w, out}),
           KAIO_ERROR_INVALID_DTYPE, {"'residual'", "f16", "bf16"});
  kaio_tensor shifted = x;
  shifted.offset_bytes = 2;  // partly over x
  rejected(launch(add_.get(), {x, res, w, shifted}), KAIO_ERROR_INVALID_ARGUMENT,
           {"'x'", "'out'", "overlap"});
  // out may be x itself: one launch, with the documented parameter order
  launches_ = kt::fake().launch_count();
  KT_OK(launch(add_.get(), {x, res, w, x}));
  EXPECT_EQ(kt::fake().launch_count(), launches_ + 1);
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  EXPECT_EQ(kt::launch_param<uint64_t>(0), base);
  EXPECT_EQ(kt::launch_param<uint64_t>(1), base + 4096);
  EXPECT_EQ(kt::launch_param<uint64_t>(2), base + 8192);
  EXPECT_EQ(kt::launch_param<uint64_t>(3), base);
  EXPECT_EQ(kt::launch_param<float>(9), 1e-6f);
}

TEST_F(HostNorms, LayerNormTakesAbsentWeightAndBias) {
  const kaio_tensor x = view(0), w = view(8192, 1, 16), b = view(8224, 1, 16), out = view(12288);
  kaio_tensor none{};
  launches_ = kt::fake().launch_count();
  KT_OK(launch(ln_.get(), {x, none, none, out}));
  EXPECT_EQ(kt::fake().launch_count(), launches_ + 1);
  EXPECT_EQ(kt::launch_param<uint64_t>(1), 0u);
  EXPECT_EQ(kt::launch_param<uint64_t>(2), 0u);
  KT_OK(kaio_layernorm(stream_.get(), &x, nullptr, &b, &x, 1e-5f));
  EXPECT_EQ(kt::launch_param<uint64_t>(1), 0u);
  EXPECT_EQ(kt::launch_param<uint64_t>(2), kaio_buffer_device_ptr(buf_.get()) + 8224);
  KT_OK(kaio_layernorm(stream_.get(), &x, &w, nullptr, &out, 0.0f));
  EXPECT_EQ(kt::launch_param<uint64_t>(2), 0u);
  rejected(launch(ln_.get(), {x, w, view(12288, 1, 16), out}), KAIO_ERROR_INVALID_ARGUMENT,
           {"kaio_op_launch", "'bias'", "'out'", "overlap"});
  rejected(launch(ln_.get(), {x, view(8192, 1, 15), b, out}), KAIO_ERROR_SHAPE_MISMATCH,
           {"'weight'", "1 x 15", "1 x 16"});
  rejected(launch(ln_.get(), {x, w, b}), KAIO_ERROR_INVALID_ARGUMENT,
           {"{x, weight, bias, out}"});
}

TEST_F(HostNorms, OneShotCallsNameTheirArguments) {
  const kaio_tensor x = view(0), res = view(4096), w = view(8192, 1, 16), out = view(12288);
  launches_ = kt::fake().launch_count();
  rejected(kaio_add_rmsnorm(stream_.get(), &x, nullptr, &w, &out, 1e-5f),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_add_rmsnorm", "'residual'", "NULL"});
  rejected(kaio_add_rmsnorm(stream_.get(), &x, &res, &w, &out, -2.0f),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_add_rmsnorm", "'eps'", "-2"});
  rejected(kaio_layernorm(stream_.get(), nullptr, &w, &w, &out, 1e-5f),
           KAIO_ERROR_INVALID_ARGUMENT, {"kaio_layernorm", "'x'"});
  kaio_tensor xi = view(0, 8, 16, KAIO_DTYPE_I32);
  rejected(kaio_layernorm(stream_.get(), &xi, nullptr, nullptr, &xi, 1e-5f),
           KAIO_ERROR_INVALID_DTYPE, {"kaio_layernorm", "'x'", "i32"});
  rejected(kaio_add_rmsnorm(nullptr, &x, &res, &w, &out, 1e-5f), KAIO_ERROR_INVALID_HANDLE,
           {"kaio_add_rmsnorm", "'stream'"});
  kaio_tensor strided_res = res;
  strided_res.row_stride = 40;  // strided views are fine
  KT_OK(kaio_add_rmsnorm(stream_.get(), &x, &strided_res, &w, &out, 1e-5f));
  EXPECT_EQ(kt::launch_param<uint64_t>(7), 40u);
}

}  // namespace
