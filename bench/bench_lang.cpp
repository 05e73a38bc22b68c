// bench_lang: the kernel-language versions of the built-in SiLU gate, GELU
// (erf), RMSNorm and softmax (examples/lang/*.kaio) against the built-in ops
// and the device's copy bandwidth, same process, same stream, same data.
//
//   bench_lang [--rows R] [--cols C] [--iters N] [--dtype f32|f16|bf16|all] [--examples DIR]
//
// Per dtype the operands are generated on the host once (x, and a second
// input that is the gate, or whose first row is the RMSNorm weight) and
// shared by the four cases, so setup costs two host-generated operands per
// dtype rather than six.
// The example sources are read from DIR (default: this checkout's
// examples/lang, or $KAIO_LANG_EXAMPLES); their f16 types are rewritten for
// each dtype. Exit status: 0 on success, 1 on any failure, 2 without a GPU.
#include <kaio/kaio.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/command_line.hpp"
#include "support/device.hpp"
#include "support/errors.hpp"
#include "support/handles.hpp"
#include "support/host_data.hpp"
#include "support/l2_rotation.hpp"
#include "support/timing.hpp"

namespace {

using kaio_bench::Buffer;
using kaio_bench::Device;
using kaio_bench::Op;
using kaio_bench::SetLayout;
using kaio_bench::Stream;
using kaio_bench::Timer;

struct LangKernelDestroyer {
  void operator()(kaio_lang_kernel *k) const { kaio_lang_kernel_destroy(k); }
};
using LangKernel = std::unique_ptr<kaio_lang_kernel, LangKernelDestroyer>;

constexpr uint64_t kCopyBytes = 256ull << 20;

struct Options {
  int64_t rows = 8192, cols = 8192;
  int iters = 50;
  std::vector<kaio_dtype> dtypes = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
  std::string examples = KAIO_SOURCE_ROOT "/examples/lang";
};

constexpr const char *kUsage =
    "usage: bench_lang [--rows R] [--cols C] [--iters N] [--dtype f32|f16|bf16|all] "
    "[--examples DIR]\n";

std::optional<Options> parse_args(int argc, char **argv, bool *help) {
  Options o;
  if (const char *dir = std::getenv("KAIO_LANG_EXAMPLES")) o.examples = dir;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *help = true;
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_lang: %s needs a value\n%s", argv[i], kUsage);
      return std::nullopt;
    }
    std::string_view value = argv[++i];
    std::optional<int64_t> n = kaio_bench::parse_positive(value);
    if (flag == "--rows" && n) o.rows = *n;
    else if (flag == "--cols" && n) o.cols = *n;
    else if (flag == "--iters" && n && *n <= 100000) o.iters = static_cast<int>(*n);
    else if (flag == "--examples") o.examples = std::string(value);
    else if (flag == "--dtype" && value == "all") o.dtypes = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
    else if (flag == "--dtype" && value == "f32") o.dtypes = {KAIO_DTYPE_F32};
    else if (flag == "--dtype" && value == "f16") o.dtypes = {KAIO_DTYPE_F16};
    else if (flag == "--dtype" && value == "bf16") o.dtypes = {KAIO_DTYPE_BF16};
    else {
      std::fprintf(stderr, "bench_lang: bad argument %s %s\n%s", argv[i - 1], argv[i], kUsage);
      return std::nullopt;
    }
  }
  return o;
}

std::string read_example(const Options &o, const std::string &name, kaio_dtype dtype) {
  std::ifstream f(o.examples + "/" + name + ".kaio");
  if (!f) throw std::runtime_error("cannot read " + o.examples + "/" + name + ".kaio");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string src = ss.str();
  const std::string to = std::string("<") + kaio_dtype_name(dtype) + ">";
  // search on after each replacement: rewriting <f16> to <f16> must not
  // find its own output again (it did, and the f16 rows never started)
  for (size_t p = 0; (p = src.find("<f16>", p)) != std::string::npos; p += to.size())
    src.replace(p, 5, to);
  return src;
}

struct Case {
  std::string name;   // example file and built-in op
  int inputs;         // x (and gate or weight)
  bool weight;        // second input is 1 x cols
  uint64_t ideal_bytes;
  Op builtin;
  LangKernel lang;
};

// One dtype's operands, shared by every case: [0] x in [-8, 8], [1] the gate
// in [0.5, 1.5] (its first row is the RMSNorm weight), [2] the output.
struct Arena {
  SetLayout layout;
  Buffer buffer;
};

Arena make_arena(kaio_device *device, kaio_stream *stream, kaio_dtype dtype, int64_t rows,
                 int64_t cols, uint64_t l2) {
  const uint64_t es = kaio_dtype_size(dtype), n = static_cast<uint64_t>(rows * cols);
  Arena a{kaio_bench::plan_sets({n * es, n * es, n * es}, l2), nullptr};
  kaio_buffer *raw = nullptr;
  CHECK(kaio_buffer_create(&raw, device, a.layout.sets * a.layout.set_stride));
  a.buffer.reset(raw);
  for (int j = 0; j < 2; ++j) {
    std::vector<unsigned char> host =
        kaio_bench::random_bytes(dtype, n, j ? 0.5f : -8.0f, j ? 1.5f : 8.0f, 1 + j);
    CHECK(kaio_buffer_write(a.buffer.get(), a.layout.offsets[j], host.data(), host.size()));
  }
  kaio_bench::replicate_first_set(a.buffer.get(), a.layout, stream);
  return a;
}

// The case's inputs then its output, in set `set`.
std::vector<kaio_tensor> views(const Arena &a, const Case &c, kaio_dtype dtype, int64_t rows,
                               int64_t cols, uint64_t set) {
  std::vector<kaio_tensor> t;
  for (int j = 0; j < c.inputs; ++j) {
    t.push_back(kaio_tensor_2d(a.buffer.get(), dtype, c.weight && j == 1 ? 1 : rows, cols));
    t.back().offset_bytes = a.layout.offset(set, j);
  }
  t.push_back(kaio_tensor_2d(a.buffer.get(), dtype, rows, cols));
  t.back().offset_bytes = a.layout.offset(set, 2);
  return t;
}

double gb_per_s(uint64_t bytes, double us) { return static_cast<double>(bytes) / (us * 1e3); }

int run(const Options &opt) {
  Device device;
  const kaio_device_info info = kaio_bench::open_device(&device, "needs compute capability 8.0+");
  const Stream stream = kaio_bench::create_stream(device);
  Timer timer(device.get(), stream.get(), opt.iters);
  kaio_bench::print_banner("bench_lang", info);
  std::printf("median of %d launches timed one by one with events, after %d warm-ups; operands\n"
              "rotated past L2; GB/s counts the bytes an ideal kernel moves once\n\n",
              opt.iters, kaio_bench::kWarmups);

  // the device copy, as in bench_elementwise
  std::vector<uint64_t> copy_bytes = {kCopyBytes, kCopyBytes};
  SetLayout cl = kaio_bench::plan_sets(copy_bytes, info.l2_cache_bytes);
  kaio_buffer *craw = nullptr;
  CHECK(kaio_buffer_create(&craw, device.get(), cl.sets * cl.set_stride));
  Buffer carena(craw);
  const double copy_us = timer.median_us(
      [&](uint64_t set) {
        CHECK(kaio_buffer_copy(carena.get(), cl.offset(set, 1), carena.get(), cl.offset(set, 0),
                               kCopyBytes, stream.get()));
      },
      cl.sets);
  carena.reset();
  const double copy_gbs = gb_per_s(2 * kCopyBytes, copy_us);

  const int64_t rows = opt.rows, cols = opt.cols;
  const uint64_t n = static_cast<uint64_t>(rows * cols);
  std::printf("%-10s %-5s %-11s %10s %10s %9s %9s %8s %7s\n", "op", "dtype", "shape",
              "built-in us", "lang us", "built GB/s", "lang GB/s", "lang/bi", "% copy");
  double setup_s = 0;
  for (kaio_dtype dtype : opt.dtypes) {
    const uint64_t es = kaio_dtype_size(dtype);
    const auto t0 = std::chrono::steady_clock::now();
    Arena a = make_arena(device.get(), stream.get(), dtype, rows, cols, info.l2_cache_bytes);
    std::vector<Case> cases;
    kaio_op *op = nullptr;
    CHECK(kaio_op_create_silu_gate(&op, device.get(), dtype, rows, cols));
    cases.push_back({"silu_gate", 2, false, 3 * n * es, Op(op), nullptr});
    CHECK(kaio_op_create_gelu(&op, device.get(), dtype, rows, cols, KAIO_GELU_ERF));
    cases.push_back({"gelu", 1, false, 2 * n * es, Op(op), nullptr});
    CHECK(kaio_op_create_rmsnorm(&op, device.get(), dtype, rows, cols, 1e-6f));
    cases.push_back({"rmsnorm", 2, true, (2 * n + cols) * es, Op(op), nullptr});
    CHECK(kaio_op_create_softmax(&op, device.get(), dtype, rows, cols));
    cases.push_back({"softmax", 1, false, 2 * n * es, Op(op), nullptr});
    for (Case &c : cases) {
      kaio_lang_kernel *k = nullptr;
      CHECK(kaio_lang_kernel_create(&k, device.get(), read_example(opt, c.name, dtype).c_str()));
      c.lang.reset(k);
    }
    setup_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (Case &c : cases) {
      const double eps[] = {1e-6};
      const double builtin_us = timer.median_us(
          [&](uint64_t set) {
            std::vector<kaio_tensor> t = views(a, c, dtype, rows, cols, set);
            CHECK(kaio_op_launch(c.builtin.get(), stream.get(), t.data(), t.size()));
          },
          a.layout.sets);
      const double lang_us = timer.median_us(
          [&](uint64_t set) {
            std::vector<kaio_tensor> t = views(a, c, dtype, rows, cols, set);
            CHECK(kaio_lang_kernel_launch(c.lang.get(), stream.get(), t.data(), t.size(), eps,
                                          c.name == "rmsnorm" ? 1 : 0));
          },
          a.layout.sets);
      CHECK(kaio_stream_synchronize(stream.get()));
      CHECK(kaio_lang_kernel_check(c.lang.get()));
      const double bgbs = gb_per_s(c.ideal_bytes, builtin_us), lgbs = gb_per_s(c.ideal_bytes, lang_us);
      std::printf("%-10s %-5s %-11s %10.1f %10.1f %9.4g %9.4g %7.1f%% %6.1f%%\n", c.name.c_str(),
                  kaio_dtype_name(dtype), (std::to_string(rows) + "x" + std::to_string(cols)).c_str(),
                  builtin_us, lang_us, bgbs, lgbs, 100.0 * lgbs / bgbs, 100.0 * lgbs / copy_gbs);
      std::fflush(stdout);
    }
  }
  std::printf("\ncopy bandwidth: %.1f GB/s (kaio_buffer_copy of %llu MiB, median %.1f us)\n",
              copy_gbs, static_cast<unsigned long long>(kCopyBytes >> 20), copy_us);
  std::printf("setup (host data, upload, op and kernel creation incl. JIT): %.2f s\n", setup_s);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  bool help = false;
  const std::optional<Options> opt = parse_args(argc, argv, &help);
  if (!opt) return help ? 0 : 1;
  return kaio_bench::exit_status_of("bench_lang", [&] { return run(*opt); });
}
