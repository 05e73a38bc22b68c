#include "support/kaio_test.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

namespace kt {

Device open_device(int ordinal) {
  kaio_device *d = nullptr;
  kaio_status s = kaio_device_open(&d, ordinal);
  EXPECT_EQ(s, KAIO_OK) << kaio_last_error();
  return Device(d);
}

Stream make_stream(kaio_device *device) {
  kaio_stream *s = nullptr;
  kaio_status st = kaio_stream_create(&s, device, KAIO_STREAM_NON_BLOCKING);
  EXPECT_EQ(st, KAIO_OK) << kaio_last_error();
  return Stream(s);
}

Buffer make_buffer(kaio_device *device, uint64_t bytes) {
  kaio_buffer *b = nullptr;
  kaio_status s = kaio_buffer_create(&b, device, bytes);
  EXPECT_EQ(s, KAIO_OK) << kaio_last_error();
  return Buffer(b);
}

const FakeHooks &fake() {
  static const FakeHooks hooks = [] {
    FakeHooks h;
    const char *path = std::getenv("LIBKAIO_CUDA_DRIVER");
    if (!path || !*path) return h;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen(path, RTLD_NOW);
    if (!lib) return h;
    h.launch_count = reinterpret_cast<decltype(h.launch_count)>(dlsym(lib, "kaio_fake_launch_count"));
    h.last_launch = reinterpret_cast<decltype(h.last_launch)>(dlsym(lib, "kaio_fake_last_launch"));
    h.live_allocations =
        reinterpret_cast<decltype(h.live_allocations)>(dlsym(lib, "kaio_fake_live_allocations"));
    h.live_modules =
        reinterpret_cast<decltype(h.live_modules)>(dlsym(lib, "kaio_fake_live_modules"));
    h.last_launch_param =
        reinterpret_cast<decltype(h.last_launch_param)>(dlsym(lib, "kaio_fake_last_launch_param"));
    h.fail_launch = reinterpret_cast<decltype(h.fail_launch)>(dlsym(lib, "kaio_fake_fail_launch"));
    h.memsets = reinterpret_cast<decltype(h.memsets)>(dlsym(lib, "kaio_fake_memsets"));
    h.last_launch_programmatic = reinterpret_cast<decltype(h.last_launch_programmatic)>(
        dlsym(lib, "kaio_fake_last_launch_programmatic"));
    return h;
  }();
  return hooks;
}

bool on_fake_driver() { return fake().launch_count != nullptr; }

namespace {
Device open_at_compute_capability(const char *cc) {
  setenv("KAIO_FAKE_CC", cc, 1);
  return open_device(0);
}
}  // namespace

FakeChild::FakeChild(const char *cc, uint64_t bytes)
    : dev(open_at_compute_capability(cc)),
      stream(make_stream(dev.get())),
      buf(make_buffer(dev.get(), bytes)) {}

kaio_tensor FakeChild::at(kaio_dtype dtype, int64_t rows, int64_t cols, uint64_t offset) const {
  kaio_tensor t = kaio_tensor_2d(buf.get(), dtype, rows, cols);
  t.offset_bytes = offset;
  return t;
}

Launch last_launch() {
  Launch l;
  char name[128] = {0};
  EXPECT_EQ(fake().last_launch(name, sizeof name, l.grid, l.block, &l.shared), 0);
  l.name = name;
  return l;
}

UserKernel load_user_kernel(kaio_device *device, const char *ptx, const char *name) {
  UserKernel u;
  kaio_module *m = nullptr;
  kaio_status s = kaio_module_load_ptx(&m, device, ptx);
  EXPECT_EQ(s, KAIO_OK) << "kaio_module_load_ptx: " << kaio_last_error();
  u.module.reset(m);
  if (!m) return u;
  kaio_kernel *k = nullptr;
  s = kaio_module_get_kernel(&k, m, name);
  EXPECT_EQ(s, KAIO_OK) << "kaio_module_get_kernel: " << kaio_last_error();
  u.kernel.reset(k);
  return u;
}

void expect_rejected(kaio_status got, kaio_status expected, const std::vector<const char *> &parts,
                     unsigned long long launches) {
  std::string msg = kaio_last_error();
  EXPECT_EQ(got, expected) << "got " << kaio_status_name(got) << ": " << msg;
  for (const char *part : parts)
    EXPECT_NE(msg.find(part), std::string::npos) << "message lacks \"" << part << "\": " << msg;
  EXPECT_EQ(fake().launch_count(), launches) << "a rejected call launched a kernel";
}

std::string gpu_unavailable_reason() {
  if (on_fake_driver()) return "running on the fake test driver (LIBKAIO_CUDA_DRIVER is set)";
  kaio_probe_info info{};
  info.struct_size = sizeof info;
  if (kaio_probe(&info) != KAIO_OK) return std::string("kaio_probe failed: ") + kaio_last_error();
  if (info.driver_status != KAIO_OK)
    return std::string("no CUDA driver: ") + kaio_status_name(info.driver_status) + ": " +
           info.message;
  if (info.device_count == 0) return "the CUDA driver reports no device";
  return "";
}

void GpuTest::SetUp() {
  std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  device_ = open_device(0);
  ASSERT_TRUE(device_);
  stream_ = make_stream(device_.get());
  ASSERT_TRUE(stream_);
}

Buffer GpuTest::upload(const void *data, size_t bytes) {
  Buffer b = make_buffer(dev(), bytes);
  EXPECT_EQ(kaio_buffer_write(b.get(), 0, data, bytes), KAIO_OK) << kaio_last_error();
  return b;
}

Buffer GpuTest::poisoned(size_t bytes) {
  Buffer b = make_buffer(dev(), bytes);
  EXPECT_EQ(kaio_buffer_memset(b.get(), stream(), 0, 0xFF, bytes), KAIO_OK) << kaio_last_error();
  return b;
}

std::vector<uint8_t> GpuTest::download(kaio_buffer *b, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kaio_buffer_read(b, 0, out.data(), bytes), KAIO_OK) << kaio_last_error();
  return out;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | half);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  float out;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);
    if (sign) out = -out;
    return out;
  }
  uint32_t x = exp == 31 ? sign | 0x7F800000u | (mant << 13)
                         : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  std::memcpy(&out, &x, 4);
  return out;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_f32(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

std::vector<double> decode(kaio_dtype dtype, const std::vector<uint8_t> &bytes) {
  size_t es = kaio_dtype_size(dtype);
  std::vector<double> out(bytes.size() / es);
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == KAIO_DTYPE_F32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = dtype == KAIO_DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

HostTensor random_tensor(kaio_dtype dtype, size_t count, double lo, double hi, uint64_t seed) {
  HostTensor t;
  t.dtype = dtype;
  size_t es = kaio_dtype_size(dtype);
  t.bytes.resize(count * es);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
  for (size_t i = 0; i < count; ++i) {
    float f = dist(rng);
    if (dtype == KAIO_DTYPE_F32) {
      std::memcpy(&t.bytes[i * 4], &f, 4);
    } else {
      uint16_t h = dtype == KAIO_DTYPE_F16 ? f32_to_f16(f) : f32_to_bf16(f);
      std::memcpy(&t.bytes[i * 2], &h, 2);
    }
  }
  t.values = decode(dtype, t.bytes);
  return t;
}

uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char *env = std::getenv("KAIO_TEST_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 0)
                     : static_cast<uint64_t>(
                           std::chrono::steady_clock::now().time_since_epoch().count());
    std::printf("[kaio] random seed %llu (replay with KAIO_TEST_SEED)\n",
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

}  // namespace kt
