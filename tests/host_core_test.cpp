// Status names, versions, dtypes and the last-error contract: no driver needed.
#include <cstring>
#include <string>
#include <thread>

#include "support/kaio_test.hpp"

namespace {

TEST(Status, NamesEveryPinnedValue) {
  struct {
    kaio_status status;
    const char *name;
  } pinned[] = {
      {KAIO_OK, "KAIO_OK"},
      {-100, "KAIO_ERROR_INVALID_ARGUMENT"}, {-101, "KAIO_ERROR_INVALID_HANDLE"},
      {-102, "KAIO_ERROR_INVALID_DTYPE"}, {-103, "KAIO_ERROR_SHAPE_MISMATCH"},
      {-104, "KAIO_ERROR_OUT_OF_BOUNDS"}, {-105, "KAIO_ERROR_MISALIGNED"},
      {-106, "KAIO_ERROR_WRONG_DEVICE"}, {-107, "KAIO_ERROR_BUFFER_TOO_SMALL"},
      {-108, "KAIO_ERROR_INVALID_DIMENSION"}, {-109, "KAIO_ERROR_UNSUPPORTED"},
      {-200, "KAIO_ERROR_DRIVER_NOT_FOUND"}, {-201, "KAIO_ERROR_DRIVER_TOO_OLD"},
      {-202, "KAIO_ERROR_NO_DEVICE"}, {-203, "KAIO_ERROR_UNSUPPORTED_ARCH"},
      {-300, "KAIO_ERROR_OUT_OF_HOST_MEMORY"}, {-301, "KAIO_ERROR_OUT_OF_DEVICE_MEMORY"},
      {-400, "KAIO_ERROR_PTX_JIT_FAILED"}, {-401, "KAIO_ERROR_KERNEL_NOT_FOUND"},
      {-500, "KAIO_ERROR_LAUNCH_FAILED"}, {-501, "KAIO_ERROR_DEVICE_FAULT"},
      {-502, "KAIO_ERROR_KERNEL_BOUNDS"},
      {-900, "KAIO_ERROR_DRIVER"}, {-999, "KAIO_ERROR_INTERNAL"},
  };
  for (const auto &p : pinned) EXPECT_STREQ(kaio_status_name(p.status), p.name);
  EXPECT_STREQ(kaio_status_name(-12345), "KAIO_UNKNOWN_STATUS");
  EXPECT_STREQ(kaio_status_name(7), "KAIO_UNKNOWN_STATUS");
}

TEST(Status, CategoriesGroupByHundreds) {
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_OK), 0);
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_ERROR_WRONG_DEVICE), -100);
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_ERROR_UNSUPPORTED_ARCH), -200);
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_ERROR_OUT_OF_DEVICE_MEMORY), -300);
  EXPECT_EQ(KAIO_STATUS_CATEGORY(-457), -400);
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_ERROR_INTERNAL), -900);
}

TEST(Version, RuntimeMatchesHeader) {
  EXPECT_EQ(kaio_version_number(), static_cast<uint32_t>(KAIO_VERSION_NUMBER));
  EXPECT_STREQ(kaio_version_string(), KAIO_VERSION_STRING);
  EXPECT_TRUE(KAIO_VERSION_CHECK(0, 0, 1));
  EXPECT_FALSE(KAIO_VERSION_CHECK(99, 0, 0));
}

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_F32), 4u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_F16), 2u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_BF16), 2u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_I8), 1u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_U8), 1u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_I32), 4u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_U32), 4u);
  EXPECT_EQ(kaio_dtype_size(KAIO_DTYPE_INVALID), 0u);
  EXPECT_EQ(kaio_dtype_size(99), 0u);
  EXPECT_STREQ(kaio_dtype_name(KAIO_DTYPE_BF16), "bf16");
  EXPECT_STREQ(kaio_dtype_name(-3), "invalid");
}

TEST(LastError, NeverNullAndCopiesWithTruncation) {
  ASSERT_NE(kaio_last_error(), nullptr);
  EXPECT_EQ(kaio_probe(nullptr), KAIO_ERROR_INVALID_ARGUMENT);
  std::string full = kaio_last_error();
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(kaio_last_error_status(), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kaio_last_error_driver_code(), 0);
  char small[8];
  size_t len = kaio_last_error_copy(small, sizeof small);
  EXPECT_EQ(len, full.size());
  EXPECT_EQ(std::strlen(small), 7u);
  EXPECT_EQ(std::string(small), full.substr(0, 7));
  EXPECT_EQ(kaio_last_error_copy(nullptr, 0), full.size());
  // Reading the error does not change it.
  EXPECT_EQ(std::string(kaio_last_error()), full);
}

TEST(LastError, IsPerThread) {
  EXPECT_EQ(kaio_probe(nullptr), KAIO_ERROR_INVALID_ARGUMENT);
  std::string mine = kaio_last_error();
  std::string theirs = "unset";
  std::thread t([&] {
    theirs = kaio_last_error();
    kaio_probe_info i{};
    i.struct_size = 1;
    EXPECT_EQ(kaio_probe(&i), KAIO_ERROR_BUFFER_TOO_SMALL);
  });
  t.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(std::string(kaio_last_error()), mine);
}

TEST(Layout, PublicStructsArePinned) {
  // Bindings mirror these; a change here is an ABI break.
  EXPECT_EQ(sizeof(kaio_tensor), 48u);
  EXPECT_EQ(offsetof(kaio_tensor, offset_bytes), 8u);
  EXPECT_EQ(offsetof(kaio_tensor, dtype), 16u);
  EXPECT_EQ(offsetof(kaio_tensor, rows), 24u);
  EXPECT_EQ(offsetof(kaio_tensor, row_stride), 40u);
  EXPECT_EQ(sizeof(kaio_launch_config), 32u);
  EXPECT_EQ(sizeof(kaio_probe_info), 272u);
  EXPECT_EQ(sizeof(kaio_device_info), 296u);
  EXPECT_EQ(offsetof(kaio_device_info, total_memory), 24u);
  EXPECT_EQ(sizeof(kaio_kernel_attributes), 28u);
}

TEST(Tensor2d, BuildsAContiguousView) {
  kaio_tensor t = kaio_tensor_2d(nullptr, KAIO_DTYPE_F16, 3, 5);
  EXPECT_EQ(t.offset_bytes, 0u);
  EXPECT_EQ(t.row_stride, 0);
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.cols, 5);
  EXPECT_EQ(t.reserved, 0u);
}

TEST(Destroy, AcceptsNull) {
  kaio_device_destroy(nullptr);
  kaio_stream_destroy(nullptr);
  kaio_event_destroy(nullptr);
  kaio_buffer_destroy(nullptr);
  kaio_module_destroy(nullptr);
  kaio_kernel_destroy(nullptr);
  kaio_op_destroy(nullptr);
  EXPECT_EQ(kaio_buffer_device_ptr(nullptr), 0u);
  EXPECT_EQ(kaio_buffer_size(nullptr), 0u);
  EXPECT_EQ(kaio_buffer_device(nullptr), nullptr);
  EXPECT_EQ(kaio_stream_native(nullptr), nullptr);
  EXPECT_EQ(kaio_device_native_context(nullptr), nullptr);
}

}  // namespace
