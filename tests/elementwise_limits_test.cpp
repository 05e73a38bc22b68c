// Element-wise ops index with 64-bit byte offsets, so they take more than the
// row ops' 2^31 - 1 rows, up to 2^62 bytes; a larger shape (INT64_MAX rows)
// is refused at creation with the shape and the limit.
#include <cstdint>

#include "support/fake_device_test.hpp"

namespace {

using ElementwiseLimits = kt::FakeDeviceTest;

TEST_F(ElementwiseLimits, Int64MaxRowsAreRefusedWithTheLimit) {
  kaio_op *op = nullptr;
  kt::expect_rejected(kaio_op_create_silu_gate(&op, dev_.get(), KAIO_DTYPE_F32, INT64_MAX, 1),
                      KAIO_ERROR_INVALID_DIMENSION,
                      {"kaio_op_create_silu_gate", "9223372036854775807 x 1",
                       "at most 1152921504606846976 f32 elements", "2^62 bytes"},
                      kt::fake().launch_count());
  EXPECT_EQ(op, nullptr);
  kt::expect_rejected(
      kaio_op_create_gelu(&op, dev_.get(), KAIO_DTYPE_BF16, INT64_MAX, 1, KAIO_GELU_TANH),
      KAIO_ERROR_INVALID_DIMENSION,
      {"kaio_op_create_gelu", "9223372036854775807 x 1", "at most 2305843009213693952 bf16"},
      kt::fake().launch_count());
  // Just past the limit, with both dims large.
  kt::expect_rejected(
      kaio_op_create_gelu(&op, dev_.get(), KAIO_DTYPE_F32, int64_t{1} << 31, (int64_t{1} << 29) + 1,
                          KAIO_GELU_ERF),
      KAIO_ERROR_INVALID_DIMENSION, {"kaio_op_create_gelu", "2147483648 x 536870913"},
      kt::fake().launch_count());
}

TEST_F(ElementwiseLimits, MoreRowsThanRowOpsTakeStillPlan) {
  kaio_op *op = nullptr;
  // 2^31 rows: past the row ops' cap, well inside the element-wise one.
  KT_OK(kaio_op_create_silu_gate(&op, dev_.get(), KAIO_DTYPE_F16, int64_t{1} << 31, 4));
  kaio_op_destroy(op);
  KT_OK(kaio_op_create_gelu(&op, dev_.get(), KAIO_DTYPE_F32, int64_t{1} << 31, int64_t{1} << 29,
                            KAIO_GELU_ERF));  // exactly 2^62 bytes
  kaio_op_destroy(op);
  EXPECT_EQ(kaio_op_create_softmax(&op, dev_.get(), KAIO_DTYPE_F16, int64_t{1} << 31, 4),
            KAIO_ERROR_INVALID_DIMENSION);
}

}  // namespace
