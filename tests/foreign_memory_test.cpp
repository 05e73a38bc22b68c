// kaio_buffer_wrap on every kind of memory users hand libkaio: plain
// cuMemAlloc, the stream-ordered pool (candle, JAX, PyTorch's async
// backend), virtual memory over several mappings (PyTorch's expandable
// segments), and what it must refuse. One body, run on the fake driver and
// on a GPU, so the fake's model of each kind is checked against the real one.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/foreign_memory.hpp"
#include "support/kaio_test.hpp"

namespace {

using kt::VmmAccess;

kaio_buffer *wrap(kaio_device *d, uint64_t ptr, uint64_t bytes, kaio_status *status) {
  kaio_buffer *b = nullptr;
  *status = kaio_buffer_wrap(&b, d, ptr, bytes);
  return b;
}

void expect_wraps(kaio_device *d, uint64_t ptr, uint64_t bytes, const char *what) {
  kaio_status s;
  kt::Buffer b(wrap(d, ptr, bytes, &s));
  EXPECT_EQ(s, KAIO_OK) << what << ": " << kaio_last_error();
  if (b) {
    EXPECT_EQ(kaio_buffer_size(b.get()), bytes) << what;
  }
}

void expect_refused(kaio_device *d, uint64_t ptr, uint64_t bytes, kaio_status expected,
                    const std::vector<const char *> &parts, const char *what) {
  kaio_status s;
  kt::Buffer b(wrap(d, ptr, bytes, &s));
  EXPECT_EQ(s, expected) << what << ": got " << kaio_status_name(s) << ": " << kaio_last_error();
  EXPECT_EQ(b, nullptr) << what;
  std::string message = kaio_last_error();
  for (const char *part : parts) EXPECT_NE(message.find(part), std::string::npos) << what << ": " << message;
}

// silu_gate over x in two VMM mappings (across their seam), gate in pool
// memory and out in plain memory: on a GPU the kernel really reads and
// writes each kind, so the values are checked.
void run_op_across_kinds(kaio_device *d, kaio_stream *s, kt::ForeignMemory &mem, bool gpu) {
  const uint64_t g = mem.granularity(0);
  const int64_t n = 3000;  // f32s: 12000 bytes, half before the seam
  kt::Foreign x_mem = mem.vmm(0, 2, 2, VmmAccess::read_write);
  kt::Foreign gate_mem = mem.pool(0, n * 4 + 4, s);
  kt::Foreign out_mem = mem.plain(0, n * 4);
  ASSERT_TRUE(x_mem && gate_mem && out_mem);
  kaio_status st;
  kt::Buffer x(wrap(d, x_mem->ptr + g - 6000, n * 4, &st));
  ASSERT_EQ(st, KAIO_OK) << kaio_last_error();
  kt::Buffer gate(wrap(d, gate_mem->ptr + 4, n * 4, &st));  // a non-zero offset
  ASSERT_EQ(st, KAIO_OK) << kaio_last_error();
  kt::Buffer out(wrap(d, out_mem->ptr, n * 4, &st));
  ASSERT_EQ(st, KAIO_OK) << kaio_last_error();
  std::vector<float> hx(n), hg(n), ho(n, NAN);
  for (int64_t i = 0; i < n; ++i) {
    hx[i] = static_cast<float>((i % 97) - 48) / 8.0f;
    hg[i] = static_cast<float>((i % 31) - 15) / 4.0f;
  }
  KT_OK(kaio_buffer_write(x.get(), 0, hx.data(), n * 4));
  KT_OK(kaio_buffer_write(gate.get(), 0, hg.data(), n * 4));
  KT_OK(kaio_buffer_write(out.get(), 0, ho.data(), n * 4));  // poisoned
  kaio_tensor tx = kaio_tensor_2d(x.get(), KAIO_DTYPE_F32, 1, n);
  kaio_tensor tg = kaio_tensor_2d(gate.get(), KAIO_DTYPE_F32, 1, n);
  kaio_tensor to = kaio_tensor_2d(out.get(), KAIO_DTYPE_F32, 1, n);
  KT_OK(kaio_silu_gate(s, &tx, &tg, &to));
  KT_OK(kaio_stream_synchronize(s));
  if (!gpu) return;  // the fake records launches without running them
  KT_OK(kaio_buffer_read(out.get(), 0, ho.data(), n * 4));
  for (int64_t i = 0; i < n; ++i) {
    double v = hx[i] / (1.0 + std::exp(-static_cast<double>(hx[i]))) * hg[i];
    ASSERT_NEAR(ho[i], v, 1e-5 * (1 + std::fabs(v))) << "element " << i;
  }
}

void check_every_kind(kaio_device *d, kaio_stream *s, bool gpu) {
  std::string why;
  auto mem = kt::ForeignMemory::open(&why);
  ASSERT_TRUE(mem) << why;
  const uint64_t g = mem->granularity(0);
  ASSERT_GT(g, 0u);

  kt::Foreign plain = mem->plain(0, 1000);
  ASSERT_TRUE(plain);
  expect_wraps(d, plain->ptr + 8, 992, "plain memory to its end");
  expect_refused(d, plain->ptr + 8, 993, KAIO_ERROR_OUT_OF_BOUNDS, {"kaio_buffer_wrap", "992"},
                 "plain memory one byte past its end");

  kt::Foreign pool = mem->pool(0, 5000, s);
  ASSERT_TRUE(pool);
  expect_wraps(d, pool->ptr, 5000, "pool memory");
  expect_wraps(d, pool->ptr + 4999, 1, "pool memory's last byte");
  expect_refused(d, pool->ptr + 1, 5000, KAIO_ERROR_OUT_OF_BOUNDS, {"'size_bytes'", "4999"},
                 "pool memory one byte past its end");

  kt::Foreign vmm = mem->vmm(0, 2, 3, VmmAccess::read_write);  // third granule unmapped
  ASSERT_TRUE(vmm);
  expect_wraps(d, vmm->ptr, 2 * g, "two VMM mappings");
  expect_wraps(d, vmm->ptr + g - 8, 16, "across the seam of two VMM mappings");
  expect_refused(d, vmm->ptr + g, g + 1, KAIO_ERROR_OUT_OF_BOUNDS,
                 {"kaio_buffer_wrap", "mapped only up to", "map the rest"},
                 "into the unmapped part of a reservation");
  expect_refused(d, vmm->ptr + 2 * g, 8, KAIO_ERROR_INVALID_ARGUMENT,
                 {"'device_ptr'", "not device memory the driver knows"},
                 "an unmapped address in a reservation");
  expect_refused(d, vmm->ptr, 3 * g + 1, KAIO_ERROR_OUT_OF_BOUNDS, {"run past the end"},
                 "past the reservation");

  kt::Foreign no_access = mem->vmm(0, 1, 1, VmmAccess::none);
  ASSERT_TRUE(no_access);
  expect_refused(d, no_access->ptr, 64, KAIO_ERROR_INVALID_ARGUMENT,
                 {"kaio_buffer_wrap", "read-write access", "cuMemSetAccess"},
                 "VMM memory without access");
  kt::Foreign read_only = mem->vmm(0, 1, 1, VmmAccess::read);
  ASSERT_TRUE(read_only);
  expect_refused(d, read_only->ptr, 64, KAIO_ERROR_INVALID_ARGUMENT, {"access flags 1"},
                 "read-only VMM memory");

  kt::Foreign host = mem->pinned_host(0, 4096);
  ASSERT_TRUE(host);
  expect_refused(d, host->ptr, 64, KAIO_ERROR_INVALID_ARGUMENT, {"pinned host memory"},
                 "pinned host memory");
  std::vector<char> heap(64);
  expect_refused(d, reinterpret_cast<uintptr_t>(heap.data()), 64, KAIO_ERROR_INVALID_ARGUMENT,
                 {"not device memory the driver knows"}, "pageable host memory");

  int32_t devices = 0;
  KT_OK(kaio_device_count(&devices));
  if (devices > 1) {  // the fake has two; so do two-GPU machines
    kt::Device other = kt::open_device(1);
    kt::Stream other_stream = kt::make_stream(other.get());
    kt::Foreign theirs = mem->pool(1, 256, other_stream.get());
    ASSERT_TRUE(theirs);
    expect_refused(d, theirs->ptr, 256, KAIO_ERROR_WRONG_DEVICE,
                   {"memory of device 1, not of device 0"}, "pool memory of another device");
    kt::Foreign their_vmm = mem->vmm(1, 1, 1, VmmAccess::read_write);
    ASSERT_TRUE(their_vmm);
    expect_refused(d, their_vmm->ptr, 256, KAIO_ERROR_WRONG_DEVICE, {"device 1"},
                   "VMM memory of another device");
    expect_wraps(other.get(), their_vmm->ptr, 256, "VMM memory with its own device");
  }
  run_op_across_kinds(d, s, *mem, gpu);
}

class FakeForeignMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver (meson test, suite host)";
  }
};

TEST_F(FakeForeignMemory, WrapAcceptsPoolAndVirtualMemoryAndRefusesTheRest) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  check_every_kind(d.get(), s.get(), false);
}

class GpuForeignMemory : public kt::GpuTest {};

TEST_F(GpuForeignMemory, WrapAcceptsPoolAndVirtualMemoryAndRefusesTheRest) {
  check_every_kind(dev(), stream(), true);
}

}  // namespace
