// bench_elementwise: libkaio's memory-bound ops against the device's own copy
// bandwidth, measured in the same process on the same stream.
//
// These ops do almost no math per byte, so the honest yardstick is how close
// they come to a device-to-device copy of comparable size. See README.md.
//
// Exit status: 0 on success, 1 on any failure, 2 when there is no usable GPU.
#include <kaio/kaio.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
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

constexpr uint64_t kCopyBytes = 256ull << 20;

// ---------------------------------------------------------------------------
// Command line

struct Options {
  int64_t rows = 8192;
  int64_t cols = 8192;
  int iters = 50;
  std::vector<kaio_dtype> dtypes = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
};

constexpr const char *kUsage =
    "usage: bench_elementwise [--rows R] [--cols C] [--iters N] [--dtype f32|f16|bf16]\n"
    "  --rows, --cols  shape of every op (default 8192 x 8192)\n"
    "  --iters         timed launches per op, after 5 warm-ups; the median is\n"
    "                  reported (default 50; use 25 or more)\n"
    "  --dtype         only this dtype (default: f32, f16 and bf16)\n";

std::optional<kaio_dtype> parse_dtype(std::string_view text) {
  for (kaio_dtype d : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    if (text == kaio_dtype_name(d)) return d;
  return std::nullopt;
}

// Returns the options, or nothing after printing why (usage errors and --help).
std::optional<Options> parse_args(int argc, char **argv, bool *help) {
  Options o;
  *help = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *help = true;
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_elementwise: %s needs a value\n%s", argv[i], kUsage);
      return std::nullopt;
    }
    std::string_view value = argv[++i];
    std::optional<int64_t> n = kaio_bench::parse_positive(value);
    if (flag == "--rows" && n) {
      o.rows = *n;
    } else if (flag == "--cols" && n) {
      o.cols = *n;
    } else if (flag == "--iters" && n && *n <= 100000) {
      o.iters = static_cast<int>(*n);
    } else if (flag == "--dtype" && parse_dtype(value)) {
      o.dtypes = {*parse_dtype(value)};
    } else {
      std::fprintf(stderr, "bench_elementwise: bad argument %s %s\n%s", argv[i - 1], argv[i],
                   kUsage);
      return std::nullopt;
    }
  }
  return o;
}

// ---------------------------------------------------------------------------
// Workloads and their memory

struct Operand {
  int64_t rows, cols;
  bool input;
  float lo, hi;  // the range of random inputs
};

struct Workload {
  std::string name;
  kaio_dtype dtype;
  std::vector<Operand> operands;  // in the order the launch takes them
  uint64_t ideal_bytes;           // bytes an ideal kernel must move per launch
  Op op;                          // null for the device copy
};

// Where each operand lives in the arena, and how many copies ("sets") of the
// operands are rotated through so that a launch never finds its data in L2.
SetLayout plan_layout(const Workload &w, uint64_t l2_bytes) {
  std::vector<uint64_t> bytes;
  for (const Operand &o : w.operands)
    bytes.push_back(static_cast<uint64_t>(o.rows * o.cols) * kaio_dtype_size(w.dtype));
  return kaio_bench::plan_sets(bytes, l2_bytes);
}

// Fills set 0's inputs from the host, then copies set 0 to every other set.
void fill_arena(kaio_buffer *arena, kaio_stream *stream, const Workload &w, const SetLayout &l) {
  for (size_t i = 0; i < w.operands.size(); ++i) {
    const Operand &o = w.operands[i];
    if (!o.input) continue;
    std::vector<unsigned char> host = kaio_bench::random_bytes(
        w.dtype, static_cast<uint64_t>(o.rows * o.cols), o.lo, o.hi, 1 + static_cast<uint32_t>(i));
    CHECK(kaio_buffer_write(arena, l.offsets[i], host.data(), host.size()));
  }
  kaio_bench::replicate_first_set(arena, l, stream);
}

kaio_status launch(const Workload &w, const SetLayout &l, kaio_buffer *arena, kaio_stream *stream,
                   uint64_t set) {
  if (!w.op) {  // the copy: operand 0 is the source, 1 the destination
    return kaio_buffer_copy(arena, l.offset(set, 1), arena, l.offset(set, 0), kCopyBytes, stream);
  }
  std::array<kaio_tensor, 4> t{};
  for (size_t i = 0; i < w.operands.size(); ++i) {
    t[i] = kaio_tensor_2d(arena, w.dtype, w.operands[i].rows, w.operands[i].cols);
    t[i].offset_bytes = l.offset(set, i);
  }
  return kaio_op_launch(w.op.get(), stream, t.data(), w.operands.size());
}

// ---------------------------------------------------------------------------
// Timing

struct Timing {
  double median_us;
  uint64_t sets;
};

// Times `w` on its own arena, rotated through enough sets to defeat L2.
Timing time_workload(Timer &timer, const Workload &w, kaio_device *device, kaio_stream *stream,
                     uint64_t l2_bytes) {
  const SetLayout l = plan_layout(w, l2_bytes);
  kaio_buffer *raw = nullptr;
  CHECK(kaio_buffer_create(&raw, device, l.sets * l.set_stride));
  Buffer arena(raw);
  fill_arena(arena.get(), stream, w, l);
  const double us =
      timer.median_us([&](uint64_t set) { CHECK(launch(w, l, arena.get(), stream, set)); }, l.sets);
  return {us, l.sets};
}

double gb_per_s(uint64_t bytes, double us) { return static_cast<double>(bytes) / (us * 1e3); }

// ---------------------------------------------------------------------------
// The ops

Workload copy_workload() {
  const int64_t floats = static_cast<int64_t>(kCopyBytes / 4);
  return {"copy", KAIO_DTYPE_F32, {{1, floats, true, -8, 8}, {1, floats, false, 0, 0}},
          2 * kCopyBytes, nullptr};
}

std::vector<Workload> op_workloads(kaio_device *dev, kaio_dtype dtype, int64_t rows,
                                   int64_t cols) {
  const uint64_t n = static_cast<uint64_t>(rows * cols), es = kaio_dtype_size(dtype);
  const Operand x{rows, cols, true, -8, 8}, out{rows, cols, false, 0, 0};
  const Operand weight{1, cols, true, 0.5f, 1.5f};
  kaio_op *op = nullptr;
  std::vector<Workload> w;

  CHECK(kaio_op_create_silu_gate(&op, dev, dtype, rows, cols));
  w.push_back({"silu_gate", dtype, {x, x, out}, 3 * n * es, Op(op)});
  CHECK(kaio_op_create_gelu(&op, dev, dtype, rows, cols, KAIO_GELU_ERF));
  w.push_back({"gelu_erf", dtype, {x, out}, 2 * n * es, Op(op)});
  CHECK(kaio_op_create_gelu(&op, dev, dtype, rows, cols, KAIO_GELU_TANH));
  w.push_back({"gelu_tanh", dtype, {x, out}, 2 * n * es, Op(op)});
  CHECK(kaio_op_create_rmsnorm(&op, dev, dtype, rows, cols, 1e-6f));
  w.push_back({"rmsnorm", dtype, {x, weight, out}, (2 * n + static_cast<uint64_t>(cols)) * es, Op(op)});
  CHECK(kaio_op_create_softmax(&op, dev, dtype, rows, cols));
  w.push_back({"softmax", dtype, {x, out}, 2 * n * es, Op(op)});
  return w;
}

// ---------------------------------------------------------------------------

int run(const Options &opt) {
  Device device;
  const kaio_device_info info =
      kaio_bench::open_device(&device, "the built-in ops need compute capability 8.0+");
  const Stream stream = kaio_bench::create_stream(device);
  Timer timer(device.get(), stream.get(), opt.iters);

  kaio_bench::print_banner("bench_elementwise", info);
  std::printf("median of %d launches timed one by one with events, after %d warm-ups;\n"
              "GB/s counts the bytes an ideal kernel reads and writes once\n\n",
              opt.iters, kaio_bench::kWarmups);

  const Workload copy = copy_workload();
  const Timing copy_t = time_workload(timer, copy, device.get(), stream.get(), info.l2_cache_bytes);
  const double copy_gbs = gb_per_s(copy.ideal_bytes, copy_t.median_us);

  std::printf("%-10s %-5s %-13s %11s %9s %7s %5s\n", "op", "dtype", "shape", "median us",
              "GB/s", "% copy", "sets");
  const std::string shape = std::to_string(opt.rows) + "x" + std::to_string(opt.cols);
  for (kaio_dtype dtype : opt.dtypes) {
    for (const Workload &w : op_workloads(device.get(), dtype, opt.rows, opt.cols)) {
      const Timing t = time_workload(timer, w, device.get(), stream.get(), info.l2_cache_bytes);
      const double gbs = gb_per_s(w.ideal_bytes, t.median_us);
      std::printf("%-10s %-5s %-13s %11.1f %9.4g %6.1f%% %5llu\n", w.name.c_str(),
                  kaio_dtype_name(dtype), shape.c_str(), t.median_us, gbs,
                  100.0 * gbs / copy_gbs, static_cast<unsigned long long>(t.sets));
      std::fflush(stdout);
    }
  }
  std::printf("\ncopy bandwidth: %.1f GB/s (kaio_buffer_copy of %llu MiB, read + write, "
              "median %.1f us)\n",
              copy_gbs, static_cast<unsigned long long>(kCopyBytes >> 20), copy_t.median_us);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  bool help = false;
  const std::optional<Options> opt = parse_args(argc, argv, &help);
  if (!opt) return help ? 0 : 1;
  return kaio_bench::exit_status_of("bench_elementwise", [&] { return run(*opt); });
}
