// bench_elementwise: libkaio's memory-bound ops against the device's own copy
// bandwidth, measured in the same process on the same stream.
//
// These ops do almost no math per byte, so the honest yardstick is how close
// they come to a device-to-device copy of comparable size. See README.md.
//
// Exit status: 0 on success, 1 on any failure, 2 when there is no usable GPU.
#include <kaio/kaio.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int kWarmups = 5;
constexpr uint64_t kCopyBytes = 256ull << 20;
// Sets start 256-byte aligned, as kaio_buffer_create's memory does, so every
// view can take the ops' 16-byte vector path.
constexpr uint64_t kAlign = 256;

// ---------------------------------------------------------------------------
// Errors and handles

struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(kaio_status status, const char *call) {
  if (status == KAIO_OK) return;
  // The name first: kaio_last_error()'s text lasts only until the next kaio call.
  std::string message = std::string(call) + " failed: " + kaio_status_name(status) + ": ";
  message += kaio_last_error();
  throw std::runtime_error(message);
}
#define CHECK(call) check((call), #call)

template <class T, void (*Destroy)(T *)>
struct Destroyer {
  void operator()(T *p) const { Destroy(p); }
};
using Device = std::unique_ptr<kaio_device, Destroyer<kaio_device, kaio_device_destroy>>;
using Stream = std::unique_ptr<kaio_stream, Destroyer<kaio_stream, kaio_stream_destroy>>;
using Event = std::unique_ptr<kaio_event, Destroyer<kaio_event, kaio_event_destroy>>;
using Buffer = std::unique_ptr<kaio_buffer, Destroyer<kaio_buffer, kaio_buffer_destroy>>;
using Op = std::unique_ptr<kaio_op, Destroyer<kaio_op, kaio_op_destroy>>;
using Module = std::unique_ptr<kaio_module, Destroyer<kaio_module, kaio_module_destroy>>;
using Kernel = std::unique_ptr<kaio_kernel, Destroyer<kaio_kernel, kaio_kernel_destroy>>;

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

std::optional<int64_t> parse_positive(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

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
    std::optional<int64_t> n = parse_positive(value);
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
// Host data

uint16_t to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x47800000u) return sign | 0x7C00u;  // |f| >= 65536: infinity (no NaNs here)
  if (x < 0x38800000u) {                          // below 2^-14: an f16 subnormal
    float scaled = std::bit_cast<float>(x) * 16777216.0f;  // exact: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Rebias the exponent and round the 13 dropped bits to nearest even; a carry
  // out of the mantissa correctly bumps the exponent.
  x += 0x0FFFu + ((x >> 13) & 1u);
  return sign | static_cast<uint16_t>((x - 0x38000000u) >> 13);
}

uint16_t to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even (no NaNs here)
  return static_cast<uint16_t>(x >> 16);
}

// Values spread over [lo, hi] from an LCG. u never hits its end points or the
// exact middle, and with lo = -hi zero would need u = 1/2: so never zero, and
// the smallest magnitude (~5e-7 for [-8, 8]) is still nonzero in f16.
std::vector<unsigned char> random_bytes(kaio_dtype dtype, uint64_t count, float lo, float hi,
                                        uint32_t seed) {
  const size_t size = kaio_dtype_size(dtype);
  std::vector<unsigned char> bytes(count * size);
  for (uint64_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const double u = ((seed >> 8) + 0.5) / 16777216.0;
    const float v = static_cast<float>(lo + (static_cast<double>(hi) - lo) * u);
    unsigned char *dst = bytes.data() + i * size;
    if (dtype == KAIO_DTYPE_F32) {
      std::memcpy(dst, &v, 4);
    } else {
      const uint16_t h = dtype == KAIO_DTYPE_F16 ? to_f16(v) : to_bf16(v);
      std::memcpy(dst, &h, 2);
    }
  }
  return bytes;
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

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Where each operand lives in the arena, and how many copies ("sets") of the
// operands are rotated through so that a launch never finds its data in L2.
struct Layout {
  std::vector<uint64_t> offsets;  // within one set
  uint64_t set_stride = 0;
  uint64_t sets = 1;
};

Layout plan_layout(const Workload &w, uint64_t l2_bytes) {
  Layout l;
  for (const Operand &o : w.operands) {
    l.offsets.push_back(l.set_stride);
    l.set_stride += align_up(static_cast<uint64_t>(o.rows * o.cols) * kaio_dtype_size(w.dtype),
                             kAlign);
  }
  // A working set under 2x L2 could be served partly from L2 on the next
  // launch; rotating through enough sets to cover 2x L2 evicts it first.
  if (l.set_stride < 2 * l2_bytes)
    l.sets = std::max<uint64_t>(2, (2 * l2_bytes + l.set_stride - 1) / l.set_stride);
  return l;
}

// Fills set 0's inputs from the host, then doubles the filled range with
// device copies until every set holds the same data: log2(sets) copies.
void fill_arena(kaio_buffer *arena, kaio_stream *stream, const Workload &w, const Layout &l) {
  for (size_t i = 0; i < w.operands.size(); ++i) {
    const Operand &o = w.operands[i];
    if (!o.input) continue;
    std::vector<unsigned char> host = random_bytes(
        w.dtype, static_cast<uint64_t>(o.rows * o.cols), o.lo, o.hi, 1 + static_cast<uint32_t>(i));
    CHECK(kaio_buffer_write(arena, l.offsets[i], host.data(), host.size()));
  }
  for (uint64_t done = 1; done < l.sets; done *= 2) {
    const uint64_t n = std::min(done, l.sets - done);
    CHECK(kaio_buffer_copy(arena, done * l.set_stride, arena, 0, n * l.set_stride, stream));
  }
  CHECK(kaio_stream_synchronize(stream));
}

kaio_status launch(const Workload &w, const Layout &l, kaio_buffer *arena, kaio_stream *stream,
                   uint64_t set) {
  const uint64_t base = set * l.set_stride;
  if (!w.op) {  // the copy: operand 0 is the source, 1 the destination
    return kaio_buffer_copy(arena, base + l.offsets[1], arena, base + l.offsets[0], kCopyBytes,
                            stream);
  }
  std::array<kaio_tensor, 4> t{};
  for (size_t i = 0; i < w.operands.size(); ++i) {
    t[i] = kaio_tensor_2d(arena, w.dtype, w.operands[i].rows, w.operands[i].cols);
    t[i].offset_bytes = base + l.offsets[i];
  }
  return kaio_op_launch(w.op.get(), stream, t.data(), w.operands.size());
}

// ---------------------------------------------------------------------------
// Timing

struct Timing {
  double median_us;
  uint64_t sets;
};

// A one-thread kernel that busy-waits on the GPU's global timer. Queued ahead
// of the timed launches, it holds the stream while the host enqueues them, so
// the start events fire back to back on the GPU instead of waiting on the
// host: without it a small op's time would be its launch latency.
constexpr const char *kSpinPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 ns)
{
  .reg .pred %p;
  .reg .u64 %ns, %t0, %t1;
  ld.param.u64 %ns, [ns];
  mov.u64 %t0, %globaltimer;
WAIT:
  mov.u64 %t1, %globaltimer;
  sub.u64 %t1, %t1, %t0;
  setp.lt.u64 %p, %t1, %ns;
  @%p bra WAIT;
  ret;
}
)";

class Spinner {
 public:
  explicit Spinner(kaio_device *device) {
    kaio_module *m = nullptr;
    CHECK(kaio_module_load_ptx(&m, device, kSpinPtx));
    module_.reset(m);
    kaio_kernel *k = nullptr;
    CHECK(kaio_module_get_kernel(&k, m, "spin"));
    kernel_.reset(k);
  }

  void enqueue(kaio_stream *stream, uint64_t ns) const {
    kaio_launch_config config{};
    config.grid[0] = config.grid[1] = config.grid[2] = 1;
    config.block[0] = config.block[1] = config.block[2] = 1;
    CHECK(kaio_kernel_launch(kernel_.get(), stream, &config, &ns, sizeof ns));
  }

 private:
  Module module_;
  Kernel kernel_;
};

// One event pair per timed launch, all enqueued behind the spinner before any
// is read, so each pair brackets GPU time only.
class Timer {
 public:
  Timer(kaio_device *device, int iters) : spinner_(device) {
    for (int i = 0; i < iters; ++i) {
      starts_.push_back(make_event(device));
      ends_.push_back(make_event(device));
    }
  }

  Timing run(const Workload &w, kaio_device *device, kaio_stream *stream, uint64_t l2_bytes) {
    const Layout l = plan_layout(w, l2_bytes);
    kaio_buffer *raw = nullptr;
    CHECK(kaio_buffer_create(&raw, device, l.sets * l.set_stride));
    Buffer arena(raw);
    fill_arena(arena.get(), stream, w, l);

    uint64_t set = 0;
    auto next = [&] { set = (set + 1) % l.sets; };
    for (int i = 0; i < kWarmups; ++i, next()) CHECK(launch(w, l, arena.get(), stream, set));
    // Generous: enqueueing a launch and two records takes a few microseconds.
    spinner_.enqueue(stream, 1000000 + 100000 * starts_.size());
    for (size_t i = 0; i < starts_.size(); ++i, next()) {
      CHECK(kaio_event_record(starts_[i].get(), stream));
      CHECK(launch(w, l, arena.get(), stream, set));
      CHECK(kaio_event_record(ends_[i].get(), stream));
    }
    CHECK(kaio_stream_synchronize(stream));

    std::vector<double> ms;
    for (size_t i = 0; i < starts_.size(); ++i) {
      float t = 0;
      CHECK(kaio_event_elapsed_ms(&t, starts_[i].get(), ends_[i].get()));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const size_t n = ms.size();
    const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    return {median * 1e3, l.sets};
  }

 private:
  static Event make_event(kaio_device *device) {
    kaio_event *e = nullptr;
    CHECK(kaio_event_create(&e, device, KAIO_EVENT_DEFAULT));
    return Event(e);
  }
  Spinner spinner_;
  std::vector<Event> starts_, ends_;
};

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

kaio_device_info open_device(Device *device) {
  kaio_probe_info probe{};
  probe.struct_size = sizeof probe;
  CHECK(kaio_probe(&probe));
  if (probe.driver_status != KAIO_OK || probe.device_count < 1)
    throw NoDevice(probe.message[0] ? probe.message : "the driver reports 0 devices");

  kaio_device *raw = nullptr;
  CHECK(kaio_device_open(&raw, 0));
  device->reset(raw);
  kaio_device_info info{};
  info.struct_size = sizeof info;
  CHECK(kaio_device_get_info(raw, &info));
  if (info.cc_major < 8)
    throw NoDevice("the built-in ops need compute capability 8.0+, device 0 (" +
                   std::string(info.name) + ") has " + std::to_string(info.cc_major) + "." +
                   std::to_string(info.cc_minor));
  return info;
}

int run(const Options &opt) {
  Device device;
  const kaio_device_info info = open_device(&device);
  kaio_stream *raw_stream = nullptr;
  CHECK(kaio_stream_create(&raw_stream, device.get(), KAIO_STREAM_NON_BLOCKING));
  Stream stream(raw_stream);
  Timer timer(device.get(), opt.iters);

  std::printf("bench_elementwise: %s (cc %d.%d, %d SMs, L2 %.1f MiB), libkaio %s\n", info.name,
              info.cc_major, info.cc_minor, info.sm_count, static_cast<double>(info.l2_cache_bytes) / 1048576.0,
              kaio_version_string());
  std::printf("median of %d launches timed one by one with events, after %d warm-ups;\n"
              "GB/s counts the bytes an ideal kernel reads and writes once\n\n",
              opt.iters, kWarmups);

  const Workload copy = copy_workload();
  const Timing copy_t = timer.run(copy, device.get(), stream.get(), info.l2_cache_bytes);
  const double copy_gbs = gb_per_s(copy.ideal_bytes, copy_t.median_us);

  std::printf("%-10s %-5s %-13s %11s %9s %7s %5s\n", "op", "dtype", "shape", "median us",
              "GB/s", "% copy", "sets");
  const std::string shape = std::to_string(opt.rows) + "x" + std::to_string(opt.cols);
  for (kaio_dtype dtype : opt.dtypes) {
    for (const Workload &w : op_workloads(device.get(), dtype, opt.rows, opt.cols)) {
      const Timing t = timer.run(w, device.get(), stream.get(), info.l2_cache_bytes);
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
  try {
    return run(*opt);
  } catch (const NoDevice &e) {
    std::fprintf(stderr, "bench_elementwise: no usable CUDA device: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_elementwise: %s\n", e.what());
    return 1;
  }
}
