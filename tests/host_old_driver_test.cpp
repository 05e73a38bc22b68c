// AUTO on old drivers: on a compute capability 9.0 fake device with the fake
// driver at CUDA 11.0, 11.8, 12.0, 12.1 and 13.0, every family with an sm_90
// path creates ops and launches them: the sm_90 kernels where the driver loads
// their PTX ISA (8.0; 8.1 for the cluster split kernels of int4 and matmul),
// the older family where it cannot. SM90 asked for by name fails with KAIO_ERROR_DRIVER_TOO_OLD, and
// KAIO_LOG=1 writes one line per op creation naming the kernel and why.
// libkaio reads the driver version and KAIO_LOG once per process, so each
// version runs in a child (threadsafe death tests re-run the binary), which
// reports every failed check on its stderr and exits 1.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

// The child's checks. KAIO_LOG goes to stderr, which the child points at a
// temporary file to read the lines back; failures go to the stderr gtest
// shows.
class Child {
 public:
  explicit Child(const char *driver_version) : version_(std::atoi(driver_version)) {
    setenv("KAIO_FAKE_DRIVER_VERSION", driver_version, 1);
    setenv("KAIO_FAKE_CC", "90", 1);
    setenv("KAIO_LOG", "1", 1);
    report_ = fdopen(dup(2), "w");
    log_ = std::tmpfile();
    if (!report_ || !log_ || dup2(fileno(log_), 2) < 0) std::_Exit(3);
  }

  bool hopper() const { return version_ >= 12000; }  // loads PTX ISA 8.0
  bool ptx_7_8() const { return version_ >= 11080; }  // griddepcontrol, no sm_90a features
  bool ptx_8_1() const { return version_ >= 12010; }  // st.async
  std::string driver() const {  // "11.8"
    return std::to_string(version_ / 1000) + "." + std::to_string(version_ % 1000 / 10);
  }

  void check(bool ok, const std::string &what) {
    if (ok) return;
    ++failures_;
    std::fprintf(report_, "driver %s: FAILED: %s\n", driver().c_str(), what.c_str());
  }
  void ok(kaio_status s, const std::string &what) {
    check(s == KAIO_OK, what + " -> " + kaio_status_name(s) + ": " + kaio_last_error());
  }
  // The last launch's kernel starts with `prefix`.
  void launched(const std::string &prefix, const std::string &what) {
    const std::string name = kt::last_launch().name;
    check(name.rfind(prefix, 0) == 0, what + " launched " + name + ", expected " + prefix);
  }
  // The KAIO_LOG text written since the last call.
  std::string log() {
    std::fflush(stderr);
    std::string text;
    std::fseek(log_, static_cast<long>(read_), SEEK_SET);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, log_)) > 0;) text.append(buf, n);
    read_ += text.size();
    return text;
  }
  // The log since the last call is one line holding every part.
  void logged(const std::vector<std::string> &parts, const std::string &what) {
    const std::string text = log();
    const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    check(lines == 1, what + ": " + std::to_string(lines) + " log lines: " + text);
    for (const std::string &part : parts)
      check(text.find(part) != std::string::npos,
            what + ": the log lacks \"" + part + "\": " + text);
  }
  // An op created (status `created`) with a log line holding `parts` that,
  // launched on `t`, runs `kernel`.
  void runs(kaio_status created, kaio_op *op, const std::vector<std::string> &parts,
            kaio_stream *stream, const kaio_tensor *t, size_t count, const std::string &kernel,
            const std::string &what) {
    ok(created, what + ": create");
    logged(parts, what);
    ok(kaio_op_launch(op, stream, t, count), what + ": launch");
    launched(kernel, what);
  }
  [[noreturn]] void finish() {
    std::fflush(report_);
    std::_Exit(failures_ ? 1 : 0);
  }

 private:
  int version_;
  FILE *report_ = nullptr;
  FILE *log_ = nullptr;
  size_t read_ = 0;
  int failures_ = 0;
};

// Views at 1 MiB-spaced slots of one buffer.
struct Views {
  kaio_buffer *buf;
  kaio_tensor at(int slot, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf, dt, rows, cols);
    t.offset_bytes = static_cast<uint64_t>(slot) << 20;
    return t;
  }
  kaio_tensor absent() const {
    kaio_tensor t;
    std::memset(&t, 0, sizeof t);
    return t;
  }
};

// The reason AUTO gives for the sm_90a family, or for leaving it.
std::string hopper_reason(const Child &c, const char *fallback) {
  return c.hopper() ? "(AUTO: sm_90a on device 9.0, driver " + c.driver() +
                          " >= 12.0 for PTX 8.0"
                    : std::string(fallback) + "driver " + c.driver() +
                          " < 12.0 needed by sm_90a PTX 8.0";
}

void matmul(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_matmul_desc d;
  c.ok(kaio_matmul_desc_init(&d, sizeof d), "kaio_matmul_desc_init");
  d.in_dtype = KAIO_DTYPE_BF16;
  d.trans_b = KAIO_TRANS_T;
  d.m = 256;
  d.n = 512;
  d.k = 128;
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_matmul(&op, dev, &d);
  kt::Op owned(op);
  const std::string kernel =
      c.hopper() ? "kaio_matmul_sm90_bf16_nt" : "kaio_matmul_sm80_async_bf16_nt";
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_BF16, 256, 128), v.at(1, KAIO_DTYPE_BF16, 512, 128),
                           v.at(2, KAIO_DTYPE_F32, 256, 512)};
  c.runs(s, op,
         {"kaio: kaio_op_create_matmul: M=256 N=512 K=128 bf16 nt -> " + kernel,
          hopper_reason(c, "(AUTO: sm_80 cp.async; ")},
         stream, t, 3, kernel, "matmul");
  // One-shot calls choose the same way and log nothing.
  c.ok(kaio_matmul(stream, &t[0], &t[1], &t[2], &d), "kaio_matmul");
  c.launched(kernel, "kaio_matmul");
  c.check(c.log().empty(), "a one-shot call logged");
}

// One tile and 64 K steps (M = N = 128, K = 4096): K split 4 ways, the
// partials summed over a cluster (PTX 8.1), else by the _sk kernel's last
// CTA (prepared ops, with partials and per-tile counts in the op's
// workspace; a one-shot call has none and splits nothing), else on sm_80 not
// at all.
void split_matmul(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_matmul_desc d;
  c.ok(kaio_matmul_desc_init(&d, sizeof d), "kaio_matmul_desc_init");
  d.in_dtype = KAIO_DTYPE_BF16;
  d.trans_b = KAIO_TRANS_T;
  d.m = d.n = 128;
  d.k = 4096;
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_matmul(&op, dev, &d);
  kt::Op owned(op);
  const std::string kernel = c.ptx_8_1()  ? "kaio_matmul_sm90_bf16_nt_n128_k4"
                             : c.hopper() ? "kaio_matmul_sm90_bf16_nt_n128_sk"
                                          : "kaio_matmul_sm80_async_bf16_nt";
  const std::string one_shot = c.ptx_8_1()  ? kernel
                               : c.hopper() ? "kaio_matmul_sm90_bf16_nt_n64"
                                            : kernel;
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_BF16, 128, 4096), v.at(1, KAIO_DTYPE_BF16, 128, 4096),
                           v.at(2, KAIO_DTYPE_F32, 128, 128)};
  const std::string why = c.ptx_8_1()  ? "K split 4 ways over a cluster"
                          : c.hopper() ? "K split 4 ways, summed in the kernel"
                                       : "";
  c.runs(s, op, {"kaio: kaio_op_create_matmul: M=128 N=128 K=4096 bf16 nt -> " + kernel, why},
         stream, t, 3, kernel, "split matmul");
  if (c.hopper() && !c.ptx_8_1()) {
    uint64_t ws = 0, count = 0;
    c.check(kt::fake().last_launch_param(12, &ws, sizeof ws) == 0 &&
                kt::fake().last_launch_param(13, &count, sizeof count) == 0 && ws != 0 &&
                count == ws + 4u * 128 * 128 * 4,
            "the _sk kernel's workspace: 4 partial tiles, then the counts");
  }
  c.ok(kaio_matmul(stream, &t[0], &t[1], &t[2], &d), "kaio_matmul");
  c.launched(one_shot, "split kaio_matmul");
  c.check(c.log().empty(), "a one-shot call logged");
}

kaio_attention_desc attention_desc(Child &c, kaio_attention_variant variant) {
  kaio_attention_desc d;
  c.ok(kaio_attention_desc_init(&d, sizeof d), "kaio_attention_desc_init");
  d.dtype = KAIO_DTYPE_BF16;
  d.batch = 2;
  d.seq_q = 100;
  d.seq_k = 77;
  d.heads_q = 4;
  d.heads_kv = 2;
  d.head_dim = 64;
  d.variant = variant;
  return d;
}

void attention(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  const kaio_tensor q = v.at(0, KAIO_DTYPE_BF16, 200, 256), k = v.at(1, KAIO_DTYPE_BF16, 154, 128),
                    val = v.at(2, KAIO_DTYPE_BF16, 154, 128), o = v.at(3, KAIO_DTYPE_BF16, 200, 256),
                    lse = v.at(4, KAIO_DTYPE_F32, 8, 100);
  kaio_attention_desc d = attention_desc(c, KAIO_ATTENTION_AUTO);
  kaio_op *op = nullptr;
  kaio_status s = kaio_op_create_attention(&op, dev, &d);
  kt::Op fwd(op);
  const std::string kernel =
      c.hopper() ? "kaio_attn_fwd_sm90_bf16_d64" : "kaio_attn_fwd_m128_bf16_d64";
  const kaio_tensor f[] = {q, k, val, o, lse};
  c.runs(s, op,
         {"kaio: kaio_op_create_attention: forward B=2 Sq=100 Sk=77 Hq=4 Hkv=2 D=64 bf16 -> " +
              kernel,
          hopper_reason(c, "(AUTO: sm_80; ")},
         stream, f, 5, kernel, "attention");

  op = nullptr;
  s = kaio_op_create_attention_backward(&op, dev, &d);
  kt::Op bwd(op);
  const std::string dkdv =
      c.hopper() ? "kaio_attn_bwd_dkdv_sm90_bf16_d64" : "kaio_attn_bwd_dkdv_bf16_d64";
  const kaio_tensor b[] = {v.at(5, KAIO_DTYPE_BF16, 200, 256), q, k, val, o, lse,
                           v.at(6, KAIO_DTYPE_BF16, 200, 256), v.at(7, KAIO_DTYPE_BF16, 154, 128),
                           v.at(8, KAIO_DTYPE_BF16, 154, 128)};
  c.runs(s, op,
         {"kaio: kaio_op_create_attention_backward: backward B=2", "kaio_attn_bwd_pre_bf16", dkdv,
          hopper_reason(c, "(AUTO: sm_80; ")},
         stream, b, 9, dkdv, "attention backward");

  // SM90 by name: the driver must load it.
  d.variant = KAIO_ATTENTION_SM90;
  for (bool backward : {false, true}) {
    const char *fn = backward ? "kaio_op_create_attention_backward" : "kaio_op_create_attention";
    op = nullptr;
    const kaio_status s = backward ? kaio_op_create_attention_backward(&op, dev, &d)
                                   : kaio_op_create_attention(&op, dev, &d);
    kt::Op owned(op);
    if (c.hopper()) {
      c.ok(s, std::string(fn) + " (SM90)");
      c.logged({"(variant KAIO_ATTENTION_SM90)"}, std::string(fn) + " (SM90)");
      continue;
    }
    const std::string msg = kaio_last_error();
    c.check(s == KAIO_ERROR_DRIVER_TOO_OLD && op == nullptr,
            std::string(fn) + " (SM90) -> " + kaio_status_name(s) + ": " + msg);
    for (const std::string &part :
         {std::string(fn) + ": desc->variant is KAIO_ATTENTION_SM90", std::string("PTX ISA 8.0"),
          std::string("CUDA 12.0 (r525) or newer"), "this driver is CUDA " + c.driver(),
          std::string("Update the driver to r525+ or use KAIO_ATTENTION_AUTO")})
      c.check(msg.find(part) != std::string::npos, "the message lacks \"" + part + "\": " + msg);
    c.check(c.log().empty(), "a failed creation logged");
  }
}

void int8_matmul(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_matmul_int8_desc d;
  c.ok(kaio_matmul_int8_desc_init(&d, sizeof d), "kaio_matmul_int8_desc_init");
  d.m = 130;
  d.n = 600;
  d.k = 64;
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_matmul_int8(&op, dev, &d);
  kt::Op owned(op);
  const std::string kernel = c.hopper() ? "kaio_matmul_sm90_s8_nt" : "kaio_matmul_int8_sm80_async";
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_I8, 130, 64), v.at(1, KAIO_DTYPE_I8, 600, 64),
                           v.absent(), v.absent(), v.at(2, KAIO_DTYPE_F32, 130, 600)};
  c.runs(s, op,
         {"kaio: kaio_op_create_matmul_int8: int8 M=130 N=600 K=64 i8 -> " + kernel,
          hopper_reason(c, "(AUTO: sm_80 cp.async; ")},
         stream, t, 5, kernel, "int8 matmul");
}

// M = 72: the fused wgmma kernel, or dequantize into the workspace and run
// the matmul (whose own choice the line names too). The fused kernel splits
// K over 2 CTAs (PTX 8.1) where the driver loads it, else runs unsplit.
void int4_matmul(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_matmul_int4_desc d;
  c.ok(kaio_matmul_int4_desc_init(&d, sizeof d), "kaio_matmul_int4_desc_init");
  d.group_size = 64;
  d.m = 72;  // past 64: the fused kernel on sm_90a (fewer rows run the decode kernel)
  d.n = 96;
  d.k = 256;
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_matmul_int4(&op, dev, &d);
  kt::Op owned(op);
  const std::string head = "kaio: kaio_op_create_matmul_int4: int4 M=72 N=96 K=256 f16 -> ";
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_F16, 72, 256), v.at(1, KAIO_DTYPE_U32, 32, 96),
                           v.absent(), v.at(2, KAIO_DTYPE_F16, 4, 96),
                           v.at(3, KAIO_DTYPE_F32, 72, 96)};
  const std::string fused =
      c.ptx_8_1() ? "kaio_int4_mm_sm90_f16_m64_k2_ss" : "kaio_int4_mm_sm90_f16_m64_ss";
  if (c.hopper())
    c.runs(s, op,
           {head + fused + " (AUTO: M > 16, sm_90a on device 9.0, driver " + c.driver(),
            c.ptx_8_1() ? " for PTX 8.0; K split 2 ways, clusters a wave: 2)"
                        : "; K never split: driver 12.0 < 12.1 needed by sm_90a PTX 8.1"},
           stream, t, 5, fused, "int4 matmul");
  else
    c.runs(s, op,
           {head + "kaio_int4_dequant_f16 (AUTO: M > 16, dequantize then matmul; driver " +
                c.driver() + " < 12.0",
            "; kaio_matmul_sm80_async_f16_nn (AUTO: sm_80 cp.async; driver " + c.driver()},
           stream, t, 5, "kaio_matmul_sm80_async_f16_nn", "int4 matmul");
}

// M = 1: the decode kernel's sm_90 twin as a dependent launch (PTX 7.8: griddepcontrol
// is all it adds), or the sm_80 one.
void int4_decode(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_matmul_int4_desc d;
  c.ok(kaio_matmul_int4_desc_init(&d, sizeof d), "kaio_matmul_int4_desc_init");
  d.group_size = 64;
  d.m = 1;
  d.n = 96;
  d.k = 256;
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_matmul_int4(&op, dev, &d);
  kt::Op owned(op);
  const std::string kernel = c.ptx_7_8() ? "kaio_int4_gemv_f16_m8_pdl" : "kaio_int4_gemv_f16_m8";
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_F16, 1, 256), v.at(1, KAIO_DTYPE_U32, 32, 96),
                           v.absent(), v.at(2, KAIO_DTYPE_F16, 4, 96),
                           v.at(3, KAIO_DTYPE_F32, 1, 96)};
  c.runs(s, op,
         {"kaio: kaio_op_create_matmul_int4: int4 M=1 N=96 K=256 f16 -> " + kernel +
              " (M <= 16: the decode kernel; ",
          c.ptx_7_8() ? "dependent launch (sm_90 on device 9.0, driver " + c.driver()
                      : "plain launch (driver " + c.driver() + " < 11.8 needed by sm_90 PTX 7.8)"},
         stream, t, 5, kernel, "int4 decode");
}

// A decode step's norm and gate: their sm_90 twins as dependent launches (PTX 7.8), or
// the sm_80 kernels (ops/kernel_family.cpp resolve_twin).
void step_ops(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  const std::string why = c.ptx_7_8() ? "dependent launch (sm_90 on device 9.0, driver " + c.driver()
                                      : "plain launch (driver " + c.driver() + " < 11.8 needed by sm_90 PTX 7.8)";
  const std::string twin = c.ptx_7_8() ? "_pdl" : "";
  kaio_op *op = nullptr;
  kaio_status s = kaio_op_create_add_rmsnorm(&op, dev, KAIO_DTYPE_F16, 1, 4096, 1e-5f);
  kt::Op norm(op);
  const kaio_tensor x = v.at(0, KAIO_DTYPE_F16, 1, 4096), r = v.at(1, KAIO_DTYPE_F16, 1, 4096),
                    w = v.at(2, KAIO_DTYPE_F16, 1, 4096), o = v.at(3, KAIO_DTYPE_F16, 1, 4096);
  const kaio_tensor t[] = {x, r, w, o};
  c.runs(s, op, {"kaio: kaio_op_create_add_rmsnorm: 1 x 4096 f16 -> kaio_add_rmsnorm_f16_block" + twin +
                 " (a block per row; " + why},
         stream, t, 4, "kaio_add_rmsnorm_f16_block" + twin, "add_rmsnorm");
  s = kaio_op_create_silu_gate(&op, dev, KAIO_DTYPE_F16, 1, 4096);
  kt::Op silu(op);
  const kaio_tensor g[] = {x, r, o};
  c.runs(s, op, {"kaio: kaio_op_create_silu_gate: 1 x 4096 f16 -> kaio_silu_gate_f16" + twin + " (" + why},
         stream, g, 3, "kaio_silu_gate_f16" + twin, "silu_gate");
  kaio_rope_desc rd;
  c.ok(kaio_rope_desc_init(&rd, sizeof rd), "kaio_rope_desc_init");
  rd.dtype = KAIO_DTYPE_F16;
  rd.heads_q = 2;
  rd.heads_k = 1;
  rd.head_dim = 64;
  s = kaio_op_create_rope_kv_cache_write(&op, dev, &rd);
  kt::Op rope(op);
  const kaio_tensor rt[] = {v.at(4, KAIO_DTYPE_F16, 1, 128), v.at(5, KAIO_DTYPE_F16, 1, 64),
                            v.at(6, KAIO_DTYPE_F16, 1, 64),  v.at(7, KAIO_DTYPE_I32, 1, 1),
                            v.at(8, KAIO_DTYPE_I32, 1, 1),   v.at(9, KAIO_DTYPE_F16, 16, 64),
                            v.at(10, KAIO_DTYPE_F16, 16, 64)};
  // one line naming the cache kernels (not kaio_rope's, which this op never launches)
  c.runs(s, op, {"kaio: kaio_op_create_rope_kv_cache_write: Hq 2 Hk 1 D 64 rot 64 half split f16 scaling 0 -> "
                 "kaio_rope_cache_half_split_f16_vec" + twin + " (with the cache, 16-byte heads; " + why,
                 "; kaio_rope_cache_half_split_f16_scalar" + twin + " (with the cache, any layout; "},
         stream, rt, 7, "kaio_rope_cache_half_split_f16_vec" + twin, "rope_kv_cache_write");
}

// M = 3: the streaming sm_90 matvec (PTX 8.0 too), or the register-fed one.
void kquant_matmul(Child &c, kaio_device *dev, kaio_stream *stream, const Views &v) {
  kaio_op *op = nullptr;
  const kaio_status s = kaio_op_create_quant_matmul(&op, dev, KAIO_QUANT_Q4_K, KAIO_DTYPE_F16,
                                                    KAIO_DTYPE_F32, 3, 40, 512);
  kt::Op owned(op);
  const std::string kernel = c.hopper() ? "kaio_kq_stream_q4_k_f16" : "kaio_kq_mma_q4_k_f16_w4";
  const kaio_tensor t[] = {v.at(0, KAIO_DTYPE_F16, 3, 512), v.at(1, KAIO_DTYPE_U8, 40, 288),
                           v.at(2, KAIO_DTYPE_F32, 3, 40)};
  c.runs(s, op,
         {"kaio: kaio_op_create_quant_matmul: matmul KAIO_QUANT_Q4_K M=3 N=40 K=512 f16 -> " +
              kernel,
          c.hopper() ? "(AUTO: M <= 8, sm_90 on device 9.0, driver " + c.driver()
                     : "(AUTO: M <= 8, sm_80 matvec; driver " + c.driver() +
                           " < 12.0 needed by sm_90 PTX 8.0)"},
         stream, t, 3, kernel, "k-quant matmul");
}

[[noreturn]] void run_at(const char *driver_version) {
  Child c(driver_version);
  kaio_device *dev = nullptr;
  c.ok(kaio_device_open(&dev, 0), "kaio_device_open");
  if (!dev) c.finish();
  kt::Device owned_dev(dev);
  kt::Stream stream = kt::make_stream(dev);
  kt::Buffer buf = kt::make_buffer(dev, 16 << 20);
  const Views v{buf.get()};
  c.check(c.log().empty(), "logged before any op was created");
  matmul(c, dev, stream.get(), v);
  split_matmul(c, dev, stream.get(), v);
  attention(c, dev, stream.get(), v);
  int8_matmul(c, dev, stream.get(), v);
  int4_matmul(c, dev, stream.get(), v);
  int4_decode(c, dev, stream.get(), v);
  step_ops(c, dev, stream.get(), v);
  kquant_matmul(c, dev, stream.get(), v);
  c.finish();
}

class FakeOldDriver : public ::testing::TestWithParam<const char *> {};

TEST_P(FakeOldDriver, AutoRunsWhatTheDriverLoads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver: run through `meson test`";
  EXPECT_EXIT(run_at(GetParam()), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Versions, FakeOldDriver,
                         ::testing::Values("11000", "11080", "12000", "12010", "13000"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           return std::string("Cuda") + info.param;
                         });

}  // namespace
