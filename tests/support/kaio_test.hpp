// Shared test helpers: owning wrappers for kaio handles, status assertions,
// access to the fake driver's hooks, and the GPU fixture that skips visibly
// when no real device is present.
#pragma once

#include <gtest/gtest.h>
#include <kaio/kaio.h>

#include <memory>
#include <string>
#include <vector>

namespace kt {

struct DeviceDeleter { void operator()(kaio_device *p) const { kaio_device_destroy(p); } };
struct StreamDeleter { void operator()(kaio_stream *p) const { kaio_stream_destroy(p); } };
struct EventDeleter { void operator()(kaio_event *p) const { kaio_event_destroy(p); } };
struct BufferDeleter { void operator()(kaio_buffer *p) const { kaio_buffer_destroy(p); } };
struct ModuleDeleter { void operator()(kaio_module *p) const { kaio_module_destroy(p); } };
struct KernelDeleter { void operator()(kaio_kernel *p) const { kaio_kernel_destroy(p); } };
struct OpDeleter { void operator()(kaio_op *p) const { kaio_op_destroy(p); } };

using Device = std::unique_ptr<kaio_device, DeviceDeleter>;
using Stream = std::unique_ptr<kaio_stream, StreamDeleter>;
using Event = std::unique_ptr<kaio_event, EventDeleter>;
using Buffer = std::unique_ptr<kaio_buffer, BufferDeleter>;
using Module = std::unique_ptr<kaio_module, ModuleDeleter>;
using Kernel = std::unique_ptr<kaio_kernel, KernelDeleter>;
using Op = std::unique_ptr<kaio_op, OpDeleter>;

// A user PTX module and one of its kernels (the kernel is released first).
struct UserKernel {
  Module module;
  Kernel kernel;
  kaio_kernel *get() const { return kernel.get(); }
};
// Loads ptx on device and gets `name`; a failure fails the test and leaves get() null.
UserKernel load_user_kernel(kaio_device *device, const char *ptx, const char *name);

// Fails the test with the status name and last error unless `s` is KAIO_OK.
#define KT_OK(expr)                                                                  \
  do {                                                                              \
    kaio_status kt_s_ = (expr);                                                     \
    ASSERT_EQ(kt_s_, KAIO_OK) << #expr << " -> " << kaio_status_name(kt_s_) << ": " \
                              << kaio_last_error();                                 \
  } while (0)

Device open_device(int ordinal);
Stream make_stream(kaio_device *device);
Buffer make_buffer(kaio_device *device, uint64_t bytes);

// The fake driver's test hooks (tests/fake_cuda), found through the same
// LIBKAIO_CUDA_DRIVER path libkaio loaded. All null when not running on it.
struct FakeHooks {
  unsigned long long (*launch_count)() = nullptr;
  int (*last_launch)(char *name, size_t cap, unsigned grid[3], unsigned block[3],
                     unsigned *shared) = nullptr;
  unsigned long long (*live_allocations)() = nullptr;
  unsigned long long (*live_modules)() = nullptr;
  int (*last_launch_param)(size_t index, void *out, size_t size) = nullptr;
  void (*fail_launch)(const char *kernel_substring, int result) = nullptr;
  unsigned long long (*memsets)(unsigned long long *last_dst, size_t *last_bytes) = nullptr;
  // 1: the last launch asked for programmatic stream serialization; 0: not; -1: none.
  int (*last_launch_programmatic)() = nullptr;
};
const FakeHooks &fake();
bool on_fake_driver();

// The fake driver's last launch: kernel name, grid, block, shared bytes.
struct Launch {
  std::string name;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, shared = 0;
};
Launch last_launch();

// What a death-test child on the fake driver needs to run at another compute
// capability: KAIO_FAKE_CC set to `cc` (e.g. "80") before device 0 opens,
// then a stream and a buffer of `bytes` on it.
struct FakeChild {
  FakeChild(const char *cc, uint64_t bytes);
  // A rank-2 view of the buffer starting `offset` bytes in.
  kaio_tensor at(kaio_dtype dtype, int64_t rows, int64_t cols, uint64_t offset) const;
  Device dev;
  Stream stream;
  Buffer buf;
};

// Parameter `index` of the fake driver's last launch, as a T (the test fails
// if the launch had no such parameter of that size).
template <class T>
T launch_param(size_t index) {
  T v{};
  EXPECT_EQ(fake().last_launch_param(index, &v, sizeof v), 0);
  return v;
}

// A bad-input case's verdict: `got` is `expected`, the last error message
// holds every one of `parts`, and no kernel was launched since `launches`.
void expect_rejected(kaio_status got, kaio_status expected, const std::vector<const char *> &parts,
                     unsigned long long launches);

// Describes why GPU tests cannot run here, or "" if a real device is usable.
std::string gpu_unavailable_reason();

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  kaio_device *dev() const { return device_.get(); }
  kaio_stream *stream() const { return stream_.get(); }
  // A buffer holding `bytes` bytes of data (written before it returns).
  Buffer upload(const void *data, size_t bytes);
  Buffer upload(const std::vector<uint8_t> &bytes) { return upload(bytes.data(), bytes.size()); }
  // A buffer of `bytes` 0xFF bytes (NaN in every float dtype), set on the stream.
  Buffer poisoned(size_t bytes);
  // The first `bytes` bytes of b once the stream's work is done.
  std::vector<uint8_t> download(kaio_buffer *b, size_t bytes);
  Device device_;
  Stream stream_;
};

// Host-side rounding to the storage types, round-to-nearest-even, as the
// kernels' cvt.rn does.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

// Values in dtype storage plus their exactly representable f64 values, so
// references are computed from the same rounded inputs the GPU sees.
struct HostTensor {
  kaio_dtype dtype = KAIO_DTYPE_F32;
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};
HostTensor random_tensor(kaio_dtype dtype, size_t count, double lo, double hi, uint64_t seed);
std::vector<double> decode(kaio_dtype dtype, const std::vector<uint8_t> &bytes);

// A fresh seed per process run, printed so a failure can be replayed with
// KAIO_TEST_SEED.
uint64_t test_seed();

}  // namespace kt
