// Runtime behaviour on a real GPU: stream ordering with no host sync between
// ops, CUDA-graph capture of op launches, run-to-run determinism, user PTX,
// and several devices driven from several threads at once.

#include <cmath>
#include <cstring>
#include <thread>

#include "support/graph_api.hpp"
#include "support/kaio_test.hpp"

namespace {

std::vector<float> random_f32(size_t n, uint64_t seed) {
  kt::HostTensor t = kt::random_tensor(KAIO_DTYPE_F32, n, -4, 4, seed);
  return std::vector<float>(reinterpret_cast<float *>(t.bytes.data()),
                            reinterpret_cast<float *>(t.bytes.data()) + n);
}

class GpuRuntime : public kt::GpuTest {};

TEST_F(GpuRuntime, OpsOnOneStreamRunInOrderWithoutHostSync) {
  const int64_t rows = 257, cols = 1531;
  const size_t n = rows * cols, bytes = n * 4;
  std::vector<float> x = random_f32(n, kt::test_seed()), g = random_f32(n, kt::test_seed() + 9);
  kt::Buffer bx = kt::make_buffer(dev(), bytes), bg = kt::make_buffer(dev(), bytes),
             bo = kt::make_buffer(dev(), bytes);
  std::vector<float> out(n, -1.0f);
  // Upload, silu, softmax in place, download: all queued before one sync.
  KT_OK(kaio_buffer_write_async(bx.get(), stream(), 0, x.data(), bytes));
  KT_OK(kaio_buffer_write_async(bg.get(), stream(), 0, g.data(), bytes));
  kaio_tensor tx = kaio_tensor_2d(bx.get(), KAIO_DTYPE_F32, rows, cols);
  kaio_tensor tg = kaio_tensor_2d(bg.get(), KAIO_DTYPE_F32, rows, cols);
  kaio_tensor to = kaio_tensor_2d(bo.get(), KAIO_DTYPE_F32, rows, cols);
  KT_OK(kaio_silu_gate(stream(), &tx, &tg, &to));
  KT_OK(kaio_softmax(stream(), &to, &to));
  KT_OK(kaio_buffer_read_async(bo.get(), stream(), 0, out.data(), bytes));
  KT_OK(kaio_stream_synchronize(stream()));
  for (int64_t r = 0; r < rows; r += 16) {
    std::vector<double> s(cols);
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double v = x[r * cols + c];
      s[c] = v / (1 + std::exp(-v)) * g[r * cols + c];
      m = std::max(m, s[c]);
    }
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(s[c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      double want = std::exp(s[c] - m) / sum;
      ASSERT_NEAR(out[r * cols + c], want, 2e-5 * want + 1e-12) << r << "," << c;
    }
  }
}

TEST_F(GpuRuntime, EventsOrderTwoStreams) {
  const size_t n = 1 << 22;
  std::vector<float> x = random_f32(n, kt::test_seed() + 3), out(n);
  kt::Buffer bx = kt::make_buffer(dev(), n * 4), bo = kt::make_buffer(dev(), n * 4);
  kt::Stream other = kt::make_stream(dev());
  kaio_event *e = nullptr, *t0 = nullptr, *t1 = nullptr;
  KT_OK(kaio_event_create(&e, dev(), KAIO_EVENT_DISABLE_TIMING));
  KT_OK(kaio_event_create(&t0, dev(), 0));
  KT_OK(kaio_event_create(&t1, dev(), 0));
  kt::Event ge(e), g0(t0), g1(t1);
  KT_OK(kaio_buffer_write_async(bx.get(), stream(), 0, x.data(), n * 4));
  kaio_tensor tx = kaio_tensor_2d(bx.get(), KAIO_DTYPE_F32, 1, n);
  kaio_tensor to = kaio_tensor_2d(bo.get(), KAIO_DTYPE_F32, 1, n);
  KT_OK(kaio_gelu(stream(), &tx, &tx, KAIO_GELU_TANH));
  KT_OK(kaio_event_record(e, stream()));
  KT_OK(kaio_stream_wait_event(other.get(), e));
  KT_OK(kaio_event_record(t0, other.get()));
  KT_OK(kaio_gelu(other.get(), &tx, &to, KAIO_GELU_TANH));  // needs the first gelu done
  KT_OK(kaio_event_record(t1, other.get()));
  KT_OK(kaio_buffer_read_async(bo.get(), other.get(), 0, out.data(), n * 4));
  KT_OK(kaio_stream_synchronize(other.get()));
  float ms = -1;
  KT_OK(kaio_event_elapsed_ms(&ms, t0, t1));
  EXPECT_GT(ms, 0.0f);
  auto gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  for (size_t i = 0; i < n; i += 997) {
    double want = gelu(gelu(x[i]));
    ASSERT_NEAR(out[i], want, 1e-5 * std::fabs(want) + 2e-6) << i;
  }
}

TEST_F(GpuRuntime, OpLaunchesCaptureIntoACudaGraph) {
  kt::GraphApi api = kt::graph_api();
  ASSERT_TRUE(api.begin && api.end && api.instantiate && api.launch && api.push && api.pop)
      << "driver lacks graph API";
  // kaio leaves no context current after its calls; raw driver calls of the
  // application's own bring the device's primary context themselves.
  ASSERT_EQ(api.push(kaio_device_native_context(dev())), 0);
  kt::PopContext pop{api};
  const int64_t rows = 64, cols = 4096;
  const size_t n = rows * cols;
  kt::Buffer bx = kt::make_buffer(dev(), n * 2), bw = kt::make_buffer(dev(), cols * 2),
             bo = kt::make_buffer(dev(), n * 2);
  kaio_op *norm = nullptr, *gelu = nullptr;
  KT_OK(kaio_op_create_rmsnorm(&norm, dev(), KAIO_DTYPE_F16, rows, cols, 1e-5f));
  KT_OK(kaio_op_create_gelu(&gelu, dev(), KAIO_DTYPE_F16, rows, cols, KAIO_GELU_ERF));
  kt::Op gn(norm), gg(gelu);
  kaio_tensor tx = kaio_tensor_2d(bx.get(), KAIO_DTYPE_F16, rows, cols);
  kaio_tensor tw = kaio_tensor_2d(bw.get(), KAIO_DTYPE_F16, 1, cols);
  kaio_tensor to = kaio_tensor_2d(bo.get(), KAIO_DTYPE_F16, rows, cols);
  kaio_tensor norm_args[] = {tx, tw, to}, gelu_args[] = {to, to};

  // Global mode: any synchronising or allocating call in the capture fails it.
  void *s = kaio_stream_native(stream());
  ASSERT_EQ(api.begin(s, 0), 0);
  KT_OK(kaio_op_launch(norm, stream(), norm_args, 3));
  KT_OK(kaio_op_launch(gelu, stream(), gelu_args, 2));
  void *graph = nullptr, *exec = nullptr;
  ASSERT_EQ(api.end(s, &graph), 0) << "capture was invalidated by a kaio call";
  ASSERT_EQ(api.instantiate(&exec, graph, 0), 0);

  for (int round = 0; round < 2; ++round) {  // fresh inputs each replay
    kt::HostTensor x = kt::random_tensor(KAIO_DTYPE_F16, n, -3, 3, kt::test_seed() + round);
    kt::HostTensor w = kt::random_tensor(KAIO_DTYPE_F16, cols, -2, 2, kt::test_seed() + 7 + round);
    KT_OK(kaio_buffer_write(bx.get(), 0, x.bytes.data(), x.bytes.size()));
    KT_OK(kaio_buffer_write(bw.get(), 0, w.bytes.data(), w.bytes.size()));
    KT_OK(kaio_buffer_memset(bo.get(), stream(), 0, 0xFF, n * 2));
    ASSERT_EQ(api.launch(exec, s), 0);
    KT_OK(kaio_stream_synchronize(stream()));
    std::vector<uint8_t> ob(n * 2);
    KT_OK(kaio_buffer_read(bo.get(), 0, ob.data(), ob.size()));
    std::vector<double> out = kt::decode(KAIO_DTYPE_F16, ob);
    for (int64_t r = 0; r < rows; r += 7) {
      double ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += x.values[r * cols + c] * x.values[r * cols + c];
      double inv = 1 / std::sqrt(ss / cols + 1e-5);
      for (int64_t c = 0; c < cols; c += 13) {
        // The graph rounds the RMSNorm output to f16 before GELU: so does the reference.
        double y = kt::f16_to_f32(kt::f32_to_f16(static_cast<float>(x.values[r * cols + c] * inv * w.values[c])));
        double want = 0.5 * y * (1 + std::erf(y / std::sqrt(2.0)));
        // Allow one f16 rounding of the intermediate flipping the other way.
        ASSERT_NEAR(out[r * cols + c], want, 2e-3 * std::fabs(want) + 2e-3 * std::fabs(y) + 1e-6)
            << r << "," << c;
      }
    }
  }
  api.exec_destroy(exec);
  api.graph_destroy(graph);
}

TEST_F(GpuRuntime, ResultsAreBitwiseRepeatable) {
  const int64_t rows = 300, cols = 5003;
  const size_t n = rows * cols;
  kt::HostTensor x = kt::random_tensor(KAIO_DTYPE_BF16, n, -5, 5, kt::test_seed() + 11);
  kt::Buffer bx = kt::make_buffer(dev(), n * 2), bw = kt::make_buffer(dev(), cols * 2),
             bo = kt::make_buffer(dev(), n * 2);
  KT_OK(kaio_buffer_write(bx.get(), 0, x.bytes.data(), x.bytes.size()));
  KT_OK(kaio_buffer_write(bw.get(), 0, x.bytes.data(), cols * 2));
  kaio_tensor tx = kaio_tensor_2d(bx.get(), KAIO_DTYPE_BF16, rows, cols);
  kaio_tensor tw = kaio_tensor_2d(bw.get(), KAIO_DTYPE_BF16, 1, cols);
  kaio_tensor to = kaio_tensor_2d(bo.get(), KAIO_DTYPE_BF16, rows, cols);
  std::vector<uint8_t> first(n * 2), again(n * 2);
  for (int run = 0; run < 5; ++run) {
    KT_OK(kaio_buffer_memset(bo.get(), stream(), 0, 0xFF, n * 2));
    KT_OK(kaio_rmsnorm(stream(), &tx, &tw, &to, 1e-6f));
    KT_OK(kaio_softmax(stream(), &to, &to));
    KT_OK(kaio_stream_synchronize(stream()));
    KT_OK(kaio_buffer_read(bo.get(), 0, (run ? again : first).data(), n * 2));
    if (run) {
      ASSERT_EQ(std::memcmp(first.data(), again.data(), n * 2), 0) << "run " << run;
    }
  }
}

TEST_F(GpuRuntime, UserPtxKernelRunsThroughTheAbi) {
  const char *ptx =
      ".version 7.0\n.target sm_80\n.address_size 64\n"
      ".visible .entry axpy(.param .u64 y, .param .u64 x, .param .f32 a, .param .u32 n)\n"
      "{\n .reg .pred %p;\n .reg .b32 %r<6>;\n .reg .f32 %f<4>;\n .reg .b64 %rd<8>;\n"
      " ld.param.u64 %rd1, [y];\n ld.param.u64 %rd2, [x];\n ld.param.f32 %f1, [a];\n"
      " ld.param.u32 %r1, [n];\n mov.u32 %r2, %ctaid.x;\n mov.u32 %r3, %ntid.x;\n"
      " mov.u32 %r4, %tid.x;\n mad.lo.s32 %r5, %r2, %r3, %r4;\n setp.ge.u32 %p, %r5, %r1;\n"
      " @%p ret;\n mul.wide.u32 %rd3, %r5, 4;\n add.s64 %rd4, %rd1, %rd3;\n"
      " add.s64 %rd5, %rd2, %rd3;\n ld.global.f32 %f2, [%rd5];\n ld.global.f32 %f3, [%rd4];\n"
      " fma.rn.f32 %f3, %f1, %f2, %f3;\n st.global.f32 [%rd4], %f3;\n ret;\n}\n";
  kaio_module *m = nullptr;
  KT_OK(kaio_module_load_ptx(&m, dev(), ptx));
  kt::Module gm(m);
  kaio_kernel *k = nullptr;
  KT_OK(kaio_module_get_kernel(&k, m, "axpy"));
  kt::Kernel gk(k);
  const uint32_t n = 100003;
  std::vector<float> x = random_f32(n, kt::test_seed() + 21), y = random_f32(n, kt::test_seed() + 22);
  kt::Buffer bx = kt::make_buffer(dev(), n * 4), by = kt::make_buffer(dev(), n * 4);
  KT_OK(kaio_buffer_write(bx.get(), 0, x.data(), n * 4));
  KT_OK(kaio_buffer_write(by.get(), 0, y.data(), n * 4));
  struct {
    uint64_t y, x;
    float a;
    uint32_t n;
  } args = {kaio_buffer_device_ptr(by.get()), kaio_buffer_device_ptr(bx.get()), 1.5f, n};
  kaio_launch_config c = {{(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, 0};
  KT_OK(kaio_kernel_launch(k, stream(), &c, &args, sizeof args));
  std::vector<float> out(n);
  KT_OK(kaio_buffer_read_async(by.get(), stream(), 0, out.data(), n * 4));
  KT_OK(kaio_stream_synchronize(stream()));
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], std::fmaf(1.5f, x[i], y[i])) << i;
  kaio_kernel_attributes a{};
  a.struct_size = sizeof a;
  KT_OK(kaio_kernel_get_attributes(k, &a));
  EXPECT_GT(a.registers, 0);
  EXPECT_EQ(a.local_bytes, 0);
}

// 16 KiB of static .shared plus 40 KiB dynamic: past the driver's 48 KiB
// default, so this launches only because kaio counts both when it raises
// the kernel's dynamic limit. Each thread reads what another one stored.
TEST_F(GpuRuntime, UserKernelWithStaticAndDynamicSharedPastTheDefault) {
  const char *ptx =
      ".version 7.0\n.target sm_80\n.address_size 64\n"
      ".extern .shared .align 16 .b8 dyn[];\n"
      ".visible .entry mix(.param .u64 out)\n{\n"
      " .reg .b32 %r<10>;\n .reg .b64 %rd<4>;\n .shared .align 16 .b8 s[16384];\n"
      " mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n mov.u32 %r3, s;\n mov.u32 %r4, dyn;\n"
      " add.u32 %r5, %r3, %r2;\n st.shared.u32 [%r5+15360], %r1;\n add.u32 %r6, %r1, 1;\n"
      " add.u32 %r7, %r4, %r2;\n st.shared.u32 [%r7+39936], %r6;\n bar.sync 0;\n"
      " mov.u32 %r8, 255;\n sub.u32 %r8, %r8, %r1;\n shl.b32 %r8, %r8, 2;\n"
      " add.u32 %r5, %r3, %r8;\n ld.shared.u32 %r9, [%r5+15360];\n"
      " add.u32 %r7, %r4, %r8;\n ld.shared.u32 %r6, [%r7+39936];\n add.u32 %r9, %r9, %r6;\n"
      " ld.param.u64 %rd1, [out];\n cvta.to.global.u64 %rd2, %rd1;\n"
      " mul.wide.u32 %rd3, %r1, 4;\n add.s64 %rd2, %rd2, %rd3;\n st.global.u32 [%rd2], %r9;\n"
      " ret;\n}\n";
  const kt::UserKernel mix = kt::load_user_kernel(dev(), ptx, "mix");
  kaio_kernel *k = mix.get();
  ASSERT_NE(k, nullptr);
  kaio_kernel_attributes a{};
  a.struct_size = sizeof a;
  KT_OK(kaio_kernel_get_attributes(k, &a));
  EXPECT_EQ(a.static_shared_bytes, 16384);
  kt::Buffer out = kt::make_buffer(dev(), 256 * 4);
  KT_OK(kaio_buffer_memset(out.get(), stream(), 0, 0xFF, 256 * 4));
  const uint64_t args = kaio_buffer_device_ptr(out.get());
  kaio_launch_config c = {{1, 1, 1}, {256, 1, 1}, 40960, 0};
  KT_OK(kaio_kernel_launch(k, stream(), &c, &args, sizeof args));
  std::vector<uint32_t> got(256);
  KT_OK(kaio_buffer_read_async(out.get(), stream(), 0, got.data(), 256 * 4));
  KT_OK(kaio_stream_synchronize(stream()));
  for (uint32_t t = 0; t < 256; ++t) ASSERT_EQ(got[t], 511 - 2 * t) << t;
}

TEST_F(GpuRuntime, BadPtxReportsTheJitLog) {
  kaio_module *m = nullptr;
  kaio_status s = kaio_module_load_ptx(&m, dev(), ".version 7.0\n.target sm_80\n.address_size 64\n"
                                                   ".visible .entry k() { bogus.instruction; }\n");
  EXPECT_EQ(s, KAIO_ERROR_PTX_JIT_FAILED);
  EXPECT_NE(std::string(kaio_last_error()).find("bogus"), std::string::npos) << kaio_last_error();
  EXPECT_EQ(m, nullptr);
}

TEST_F(GpuRuntime, WrapsForeignDeviceMemory) {
  kt::Buffer owner = kt::make_buffer(dev(), 1 << 16);
  kaio_buffer *view = nullptr;
  KT_OK(kaio_buffer_wrap(&view, dev(), kaio_buffer_device_ptr(owner.get()) + 4096, 8192));
  kt::Buffer gv(view);
  kaio_buffer *too_far = nullptr;
  EXPECT_EQ(kaio_buffer_wrap(&too_far, dev(), kaio_buffer_device_ptr(owner.get()) + 4096, 1 << 16),
            KAIO_ERROR_OUT_OF_BOUNDS);
  float v = 3.25f, back = 0;
  KT_OK(kaio_buffer_write(view, 0, &v, 4));
  KT_OK(kaio_buffer_read(owner.get(), 4096, &back, 4));
  EXPECT_EQ(back, v);
}

TEST_F(GpuRuntime, OpsRunOnWrappedForeignAndLegacyStreams) {
  const int64_t rows = 3, cols = 4099;
  std::vector<float> x = random_f32(rows * cols, kt::test_seed() + 31), out(rows * cols);
  kt::Buffer b = kt::make_buffer(dev(), x.size() * 4);
  kaio_tensor t = kaio_tensor_2d(b.get(), KAIO_DTYPE_F32, rows, cols);
  kaio_stream *foreign = nullptr, *legacy = nullptr;
  KT_OK(kaio_stream_wrap(&foreign, dev(), kaio_stream_native(stream())));
  KT_OK(kaio_stream_wrap(&legacy, dev(), nullptr));
  kt::Stream gf(foreign), gl(legacy);
  for (kaio_stream *s : {foreign, legacy}) {
    KT_OK(kaio_buffer_write_async(b.get(), s, 0, x.data(), x.size() * 4));
    KT_OK(kaio_softmax(s, &t, &t));
    KT_OK(kaio_buffer_read_async(b.get(), s, 0, out.data(), out.size() * 4));
    KT_OK(kaio_stream_synchronize(s));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += out[r * cols + c];
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
}

// Opens every visible device and runs ops on each from its own thread at
// once; with two or more, also checks that cross-device arguments are refused.
TEST(GpuMultiDevice, EveryDeviceFromItsOwnThread) {
  std::string why = kt::gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "GPU test skipped: " << why;
  int32_t count = 0;
  ASSERT_EQ(kaio_device_count(&count), KAIO_OK);
  std::vector<int> failures(count, 0);
  std::vector<std::thread> threads;
  for (int32_t d = 0; d < count; ++d) {
    threads.emplace_back([d, &failures] {
      kaio_device *dev = nullptr;
      kaio_stream *s = nullptr;
      kaio_buffer *b = nullptr;
      const int64_t rows = 512, cols = 2048;
      const size_t n = rows * cols;
      std::vector<float> x = random_f32(n, kt::test_seed() + d), out(n);
      bool ok = kaio_device_open(&dev, d) == KAIO_OK && kaio_stream_create(&s, dev, 0) == KAIO_OK &&
                kaio_buffer_create(&b, dev, n * 4) == KAIO_OK;
      kaio_tensor t = kaio_tensor_2d(b, KAIO_DTYPE_F32, rows, cols);
      for (int it = 0; ok && it < 20; ++it)
        ok = kaio_buffer_write_async(b, s, 0, x.data(), n * 4) == KAIO_OK &&
             kaio_softmax(s, &t, &t) == KAIO_OK;
      ok = ok && kaio_buffer_read_async(b, s, 0, out.data(), n * 4) == KAIO_OK &&
           kaio_stream_synchronize(s) == KAIO_OK;
      for (int64_t r = 0; ok && r < rows; r += 31) {
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) sum += out[r * cols + c];
        ok = std::fabs(sum - 1.0) < 1e-4;
      }
      if (!ok) std::fprintf(stderr, "device %d: %s\n", d, kaio_last_error());
      failures[d] = ok ? 0 : 1;
      kaio_buffer_destroy(b);
      kaio_stream_destroy(s);
      kaio_device_destroy(dev);
    });
  }
  for (auto &t : threads) t.join();
  for (int32_t d = 0; d < count; ++d) EXPECT_EQ(failures[d], 0) << "device " << d;
  std::printf("[kaio] ran ops on %d device(s) concurrently\n", count);
  if (count < 2) GTEST_SKIP() << "cross-device refusal needs 2 GPUs; this machine has " << count;
  kt::Device d0 = kt::open_device(0), d1 = kt::open_device(1);
  kt::Stream s0 = kt::make_stream(d0.get());
  kt::Buffer b1 = kt::make_buffer(d1.get(), 4096);
  kaio_tensor t = kaio_tensor_2d(b1.get(), KAIO_DTYPE_F32, 4, 16);
  EXPECT_EQ(kaio_softmax(s0.get(), &t, &t), KAIO_ERROR_WRONG_DEVICE);
  EXPECT_NE(std::string(kaio_last_error()).find("device 1"), std::string::npos);
}

}  // namespace
