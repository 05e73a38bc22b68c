// The bad-input table: every wrong argument gets its exact status, a message
// naming the function and the argument, and no kernel launch. Runs on the
// fake driver (tests/fake_cuda), so it runs on every machine.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "support/kaio_test.hpp"

namespace {

// Objects on two fake devices that the cases below misuse.
struct World {
  kt::Device dev0, dev1;
  kt::Stream s0, s1;
  kt::Buffer b0, b1, small0;
  kt::Event e0;
  kt::Op silu, rms, mm;  // mm: f16 16x32 · 32x8 -> f32 16x8
  kt::Module module;
  kt::Kernel kernel;
};

constexpr const char *kGoodPtx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry k(.param .u64 p, .param .f32 s, .param .u32 n)\n.maxntid 256, 1, 1\n{ ret; }\n";

struct Case {
  const char *name;
  kaio_status expected;
  std::vector<const char *> message_parts;  // every one must appear in kaio_last_error()
  std::function<kaio_status(World &)> call;
};

// gtest would print a parameter's bytes, padding included (valgrind: an
// uninitialised read); its name says which case it is.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

kaio_tensor view(kaio_buffer *b, kaio_dtype dt, int64_t rows, int64_t cols) {
  return kaio_tensor_2d(b, dt, rows, cols);
}

kaio_tensor at(kaio_tensor t, uint64_t offset) {
  t.offset_bytes = offset;
  return t;
}

// The matmul op's operands, laid out in one 4 KiB buffer: A at 0, B at 1024,
// C at 2048; each case breaks one thing.
struct MatmulArgs {
  kaio_tensor t[3];
  explicit MatmulArgs(kaio_buffer *b)
      : t{view(b, KAIO_DTYPE_F16, 16, 32), at(view(b, KAIO_DTYPE_F16, 32, 8), 1024),
          at(view(b, KAIO_DTYPE_F32, 16, 8), 2048)} {}
};

kaio_matmul_desc mm_desc() {
  kaio_matmul_desc d;
  EXPECT_EQ(kaio_matmul_desc_init(&d, sizeof d), KAIO_OK);
  d.m = 16;
  d.n = 8;
  d.k = 32;
  return d;
}

kaio_status create_mm(World &w, void (*edit)(kaio_matmul_desc &)) {
  kaio_matmul_desc d = mm_desc();
  edit(d);
  kaio_op *o = nullptr;
  kaio_status s = kaio_op_create_matmul(&o, w.dev0.get(), &d);
  kaio_op_destroy(o);
  return s;
}

kaio_status create_backward(World &w, int64_t m, int64_t n, int64_t k) {
  kaio_matmul_backward_desc d;
  kaio_status s = kaio_matmul_backward_desc_init(&d, sizeof d);
  if (s != KAIO_OK) return s;
  d.m = m;
  d.n = n;
  d.k = k;
  kaio_op *o = nullptr;
  s = kaio_op_create_matmul_backward(&o, w.dev0.get(), &d);
  kaio_op_destroy(o);
  return s;
}

std::vector<Case> cases() {
  using V = std::vector<const char *>;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      {"device_open null out", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_device_open", "'out'"},
       [](World &) { return kaio_device_open(nullptr, 0); }},
      {"device_open negative ordinal", KAIO_ERROR_NO_DEVICE, V{"kaio_device_open", "'ordinal'", "-1"},
       [](World &) { kaio_device *d; return kaio_device_open(&d, -1); }},
      {"device_open ordinal past count", KAIO_ERROR_NO_DEVICE, V{"'ordinal'", "99", "2 device"},
       [](World &) { kaio_device *d; return kaio_device_open(&d, 99); }},
      {"device_get_info null device", KAIO_ERROR_INVALID_HANDLE, V{"kaio_device_get_info", "'device'"},
       [](World &) { kaio_device_info i{}; i.struct_size = sizeof i; return kaio_device_get_info(nullptr, &i); }},
      {"device_get_info null info", KAIO_ERROR_INVALID_ARGUMENT, V{"'info'"},
       [](World &w) { return kaio_device_get_info(w.dev0.get(), nullptr); }},
      {"device_get_info small struct", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size", "4"},
       [](World &w) { kaio_device_info i{}; i.struct_size = 4; return kaio_device_get_info(w.dev0.get(), &i); }},
      {"wrong-type handle as device", KAIO_ERROR_INVALID_HANDLE, V{"kaio_stream_create", "'device'", "not a live"},
       [](World &w) { kaio_stream *s; return kaio_stream_create(&s, reinterpret_cast<kaio_device *>(w.b0.get()), 0); }},
      {"stream_create bad flags", KAIO_ERROR_INVALID_ARGUMENT, V{"'flags'", "0x10"},
       [](World &w) { kaio_stream *s; return kaio_stream_create(&s, w.dev0.get(), 0x10); }},
      {"stream_synchronize null", KAIO_ERROR_INVALID_HANDLE, V{"kaio_stream_synchronize", "'stream'"},
       [](World &) { return kaio_stream_synchronize(nullptr); }},
      {"stream_wrap foreign stream of another device", KAIO_ERROR_WRONG_DEVICE, V{"kaio_stream_wrap", "'cu_stream'", "device 0"},
       [](World &w) { kaio_stream *s; return kaio_stream_wrap(&s, w.dev0.get(), kaio_stream_native(w.s1.get())); }},
      {"event_record null event", KAIO_ERROR_INVALID_HANDLE, V{"kaio_event_record", "'event'"},
       [](World &w) { return kaio_event_record(nullptr, w.s0.get()); }},
      {"event_record across devices", KAIO_ERROR_WRONG_DEVICE, V{"'event'", "device 0", "'stream'", "device 1"},
       [](World &w) { return kaio_event_record(w.e0.get(), w.s1.get()); }},
      {"event_elapsed null out", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_event_elapsed_ms", "'out_ms'"},
       [](World &w) { return kaio_event_elapsed_ms(nullptr, w.e0.get(), w.e0.get()); }},
      {"buffer_create zero bytes", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_buffer_create", "'size_bytes'", "0"},
       [](World &w) { kaio_buffer *b; return kaio_buffer_create(&b, w.dev0.get(), 0); }},
      {"buffer_create null device", KAIO_ERROR_INVALID_HANDLE, V{"kaio_buffer_create", "'device'"},
       [](World &) { kaio_buffer *b; return kaio_buffer_create(&b, nullptr, 16); }},
      {"buffer_create more than the device has", KAIO_ERROR_OUT_OF_DEVICE_MEMORY, V{"kaio_buffer_create", "out of device memory"},
       [](World &w) { kaio_buffer *b; return kaio_buffer_create(&b, w.dev0.get(), uint64_t{1} << 40); }},
      {"buffer_write past the end", KAIO_ERROR_OUT_OF_BOUNDS, V{"kaio_buffer_write", "'buffer'", "4096-byte"},
       [](World &w) { char c[16] = {0}; return kaio_buffer_write(w.b0.get(), 4090, c, 16); }},
      {"buffer_write offset overflow", KAIO_ERROR_OUT_OF_BOUNDS, V{"kaio_buffer_write", "'buffer'"},
       [](World &w) { char c[16] = {0}; return kaio_buffer_write(w.b0.get(), UINT64_MAX - 4, c, 16); }},
      {"buffer_write null src", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_buffer_write", "'src'"},
       [](World &w) { return kaio_buffer_write(w.b0.get(), 0, nullptr, 8); }},
      {"buffer_read null buffer", KAIO_ERROR_INVALID_HANDLE, V{"kaio_buffer_read", "'buffer'"},
       [](World &) { char c[4]; return kaio_buffer_read(nullptr, 0, c, 4); }},
      {"buffer_memset on a stream of another device", KAIO_ERROR_WRONG_DEVICE, V{"kaio_buffer_memset", "device 0", "device 1"},
       [](World &w) { return kaio_buffer_memset(w.b0.get(), w.s1.get(), 0, 0, 16); }},
      {"buffer_copy overlapping ranges", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_buffer_copy", "overlap"},
       [](World &w) { return kaio_buffer_copy(w.b0.get(), 8, w.b0.get(), 0, 64, w.s0.get()); }},
      {"buffer_wrap null pointer", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_buffer_wrap", "'device_ptr'"},
       [](World &w) { kaio_buffer *b; return kaio_buffer_wrap(&b, w.dev0.get(), 0, 16); }},
      {"buffer_wrap past the allocation", KAIO_ERROR_OUT_OF_BOUNDS, V{"kaio_buffer_wrap", "'device_ptr'", "'size_bytes'"},
       [](World &w) { kaio_buffer *b; return kaio_buffer_wrap(&b, w.dev0.get(), kaio_buffer_device_ptr(w.b0.get()) + 64, 4096); }},
      {"buffer_wrap host memory", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_buffer_wrap", "'device_ptr'", "not device memory"},
       [](World &w) { static char host[64]; kaio_buffer *b; return kaio_buffer_wrap(&b, w.dev0.get(), reinterpret_cast<uint64_t>(host), 64); }},
      {"buffer_wrap memory of another device", KAIO_ERROR_WRONG_DEVICE, V{"kaio_buffer_wrap", "device 0"},
       [](World &w) { kaio_buffer *b; return kaio_buffer_wrap(&b, w.dev0.get(), kaio_buffer_device_ptr(w.b1.get()), 64); }},
      {"op_create null out", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_silu_gate", "'out'"},
       [](World &w) { return kaio_op_create_silu_gate(nullptr, w.dev0.get(), KAIO_DTYPE_F32, 4, 4); }},
      {"op_create integer dtype", KAIO_ERROR_INVALID_DTYPE, V{"kaio_op_create_silu_gate", "'dtype'", "i8"},
       [](World &w) { kaio_op *o; return kaio_op_create_silu_gate(&o, w.dev0.get(), KAIO_DTYPE_I8, 4, 4); }},
      {"op_create unknown dtype", KAIO_ERROR_INVALID_DTYPE, V{"'dtype'", "77"},
       [](World &w) { kaio_op *o; return kaio_op_create_softmax(&o, w.dev0.get(), 77, 4, 4); }},
      {"op_create zero rows", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_gelu", "0 x 4"},
       [](World &w) { kaio_op *o; return kaio_op_create_gelu(&o, w.dev0.get(), KAIO_DTYPE_F16, 0, 4, KAIO_GELU_ERF); }},
      {"op_create negative cols", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_rmsnorm", "-5"},
       [](World &w) { kaio_op *o; return kaio_op_create_rmsnorm(&o, w.dev0.get(), KAIO_DTYPE_F32, 3, -5, 1e-5f); }},
      {"op_create element count overflow", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_silu_gate", "overflow"},
       [](World &w) { kaio_op *o; return kaio_op_create_silu_gate(&o, w.dev0.get(), KAIO_DTYPE_F32, INT64_MAX / 2, 4); }},
      {"op_create too many rows for a row op", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_softmax", "rows"},
       [](World &w) { kaio_op *o; return kaio_op_create_softmax(&o, w.dev0.get(), KAIO_DTYPE_F32, int64_t{1} << 33, 4); }},
      {"gelu unknown mode", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_gelu", "'mode'", "9"},
       [](World &w) { kaio_op *o; return kaio_op_create_gelu(&o, w.dev0.get(), KAIO_DTYPE_F32, 4, 4, 9); }},
      {"rmsnorm NaN eps", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_rmsnorm", "'eps'", "nan"},
       [nan](World &w) { kaio_op *o; return kaio_op_create_rmsnorm(&o, w.dev0.get(), KAIO_DTYPE_F32, 4, 4, nan); }},
      {"rmsnorm negative eps", KAIO_ERROR_INVALID_ARGUMENT, V{"'eps'", "-1"},
       [](World &w) { kaio_op *o; return kaio_op_create_rmsnorm(&o, w.dev0.get(), KAIO_DTYPE_F32, 4, 4, -1.0f); }},
      {"op_launch null op", KAIO_ERROR_INVALID_HANDLE, V{"kaio_op_launch", "'op'"},
       [](World &w) { kaio_tensor t[3] = {}; return kaio_op_launch(nullptr, w.s0.get(), t, 3); }},
      {"op_launch null stream", KAIO_ERROR_INVALID_HANDLE, V{"kaio_op_launch", "'stream'"},
       [](World &w) { kaio_tensor t[3] = {}; return kaio_op_launch(w.silu.get(), nullptr, t, 3); }},
      {"op_launch wrong tensor count", KAIO_ERROR_INVALID_ARGUMENT, V{"'count'", "{x, gate, out}"},
       [](World &w) { kaio_tensor t[2] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 2); }},
      {"op_launch null tensors", KAIO_ERROR_INVALID_ARGUMENT, V{"'tensors'"},
       [](World &w) { return kaio_op_launch(w.silu.get(), w.s0.get(), nullptr, 3); }},
      {"op_launch dtype differs from op", KAIO_ERROR_INVALID_DTYPE, V{"'x'", "f16", "f32"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F16, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch gate shape mismatch", KAIO_ERROR_SHAPE_MISMATCH, V{"'gate'", "8 x 15", "8 x 16"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 15), view(w.b1.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch view past the end of its buffer", KAIO_ERROR_OUT_OF_BOUNDS, V{"'out'", "512", "holds 256"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.small0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch offset pushes view past the end", KAIO_ERROR_OUT_OF_BOUNDS, V{"'x'", "offset_bytes 3600"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); x.offset_bytes = 3600; kaio_tensor t[3] = {x, x, view(w.small0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch misaligned offset", KAIO_ERROR_MISALIGNED, V{"'x'", "offset_bytes 2", "4-byte"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); x.offset_bytes = 2; kaio_tensor t[3] = {x, x, x}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch null buffer in view", KAIO_ERROR_INVALID_HANDLE, V{"'gate'", "NULL buffer"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(nullptr, KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch reserved field set", KAIO_ERROR_INVALID_ARGUMENT, V{"'x'", "reserved"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); x.reserved = 1; kaio_tensor t[3] = {x, x, x}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch stride below cols", KAIO_ERROR_INVALID_DIMENSION, V{"'x'", "row_stride 5", "cols 16"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); x.row_stride = 5; kaio_tensor t[3] = {x, x, x}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch strided view for element-wise op", KAIO_ERROR_UNSUPPORTED, V{"'x'", "row_stride 20", "contiguous"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); x.row_stride = 20; kaio_tensor t[3] = {x, x, view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch buffer of another device", KAIO_ERROR_WRONG_DEVICE, V{"'gate'", "device 1", "device 0"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b1.get(), KAIO_DTYPE_F32, 8, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"op_launch stream of another device", KAIO_ERROR_WRONG_DEVICE, V{"kaio_op_launch", "device 0", "'stream'", "device 1"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); kaio_tensor t[3] = {x, x, x}; return kaio_op_launch(w.silu.get(), w.s1.get(), t, 3); }},
      {"op_launch output partly overlaps input", KAIO_ERROR_INVALID_ARGUMENT, V{"'x'", "'out'", "overlap"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); kaio_tensor o = x; o.offset_bytes = 64; kaio_tensor t[3] = {x, x, o}; return kaio_op_launch(w.silu.get(), w.s0.get(), t, 3); }},
      {"rmsnorm weight with two rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_op_launch", "'weight'", "2 x 16", "1 x 16"},
       [](World &w) { kaio_tensor t[3] = {view(w.b0.get(), KAIO_DTYPE_F32, 8, 16), view(w.b1.get(), KAIO_DTYPE_F32, 2, 16), view(w.b0.get(), KAIO_DTYPE_F32, 8, 16)}; t[1].buffer = w.small0.get(); return kaio_op_launch(w.rms.get(), w.s0.get(), t, 3); }},
      {"view whose span overflows 64 bits", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_softmax", "'x'", "64 bits"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, INT64_MAX / 4, 16); kaio_tensor o = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); return kaio_softmax(w.s0.get(), &x, &o); }},
      {"one-shot null gate", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_silu_gate", "'gate'"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_F32, 8, 16); return kaio_silu_gate(w.s0.get(), &x, nullptr, &x); }},
      {"one-shot integer dtype", KAIO_ERROR_INVALID_DTYPE, V{"kaio_gelu", "'x'", "i32"},
       [](World &w) { kaio_tensor x = view(w.b0.get(), KAIO_DTYPE_I32, 8, 16); return kaio_gelu(w.s0.get(), &x, &x, KAIO_GELU_TANH); }},
      {"one-shot zero-initialised view", KAIO_ERROR_INVALID_HANDLE, V{"kaio_rmsnorm", "'x'"},
       [](World &w) { kaio_tensor z{}; return kaio_rmsnorm(w.s0.get(), &z, &z, &z, 1e-5f); }},
      {"module_load null ptx", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_module_load_ptx", "'ptx'", "NULL"},
       [](World &w) { kaio_module *m; return kaio_module_load_ptx(&m, w.dev0.get(), nullptr); }},
      {"module_load bad ptx", KAIO_ERROR_PTX_JIT_FAILED, V{"kaio_module_load_ptx", "JIT log", "fake JIT rejected"},
       [](World &w) { kaio_module *m; return kaio_module_load_ptx(&m, w.dev0.get(), "this is not ptx"); }},
      {"module_get_kernel unknown name", KAIO_ERROR_KERNEL_NOT_FOUND, V{"kaio_module_get_kernel", "'name'", "no_such_kernel"},
       [](World &w) { kaio_kernel *k; return kaio_module_get_kernel(&k, w.module.get(), "no_such_kernel"); }},
      {"module_get_kernel null module", KAIO_ERROR_INVALID_HANDLE, V{"kaio_module_get_kernel", "'module'"},
       [](World &) { kaio_kernel *k; return kaio_module_get_kernel(&k, nullptr, "k"); }},
      {"kernel_launch zero grid", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_kernel_launch", "grid (0, 1, 1)"},
       [](World &w) { kaio_launch_config c = {{0, 1, 1}, {32, 1, 1}, 0, 0}; char a[16] = {0}; return kaio_kernel_launch(w.kernel.get(), w.s0.get(), &c, a, 16); }},
      {"kernel_launch block too large", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_kernel_launch", "2048 threads"},
       [](World &w) { kaio_launch_config c = {{1, 1, 1}, {1024, 2, 1}, 0, 0}; char a[16] = {0}; return kaio_kernel_launch(w.kernel.get(), w.s0.get(), &c, a, 16); }},
      {"kernel_launch wrong argument size", KAIO_ERROR_INVALID_ARGUMENT, V{"'args_size'", "12", "16"},
       [](World &w) { kaio_launch_config c = {{1, 1, 1}, {32, 1, 1}, 0, 0}; char a[16] = {0}; return kaio_kernel_launch(w.kernel.get(), w.s0.get(), &c, a, 12); }},
      {"kernel_launch on another device's stream", KAIO_ERROR_WRONG_DEVICE, V{"'kernel'", "device 0", "'stream'", "device 1"},
       [](World &w) { kaio_launch_config c = {{1, 1, 1}, {32, 1, 1}, 0, 0}; char a[16] = {0}; return kaio_kernel_launch(w.kernel.get(), w.s1.get(), &c, a, 16); }},
      {"kernel_launch too much shared memory", KAIO_ERROR_INVALID_ARGUMENT, V{"shared_bytes", "1048576"},
       [](World &w) { kaio_launch_config c = {{1, 1, 1}, {32, 1, 1}, 1u << 20, 0}; char a[16] = {0}; return kaio_kernel_launch(w.kernel.get(), w.s0.get(), &c, a, 16); }},
      {"kernel_get_attributes zero struct_size", KAIO_ERROR_BUFFER_TOO_SMALL, V{"kaio_kernel_get_attributes", "struct_size"},
       [](World &w) { kaio_kernel_attributes a{}; return kaio_kernel_get_attributes(w.kernel.get(), &a); }},
      {"matmul f32 inputs", KAIO_ERROR_INVALID_DTYPE, V{"kaio_op_create_matmul", "in_dtype", "f32"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.in_dtype = KAIO_DTYPE_F32; }); }},
      {"matmul integer output", KAIO_ERROR_INVALID_DTYPE, V{"out_dtype", "i8"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.out_dtype = KAIO_DTYPE_I8; }); }},
      {"matmul unknown transpose", KAIO_ERROR_INVALID_ARGUMENT, V{"trans_a is 2"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.trans_a = 2; }); }},
      {"matmul unknown variant", KAIO_ERROR_INVALID_ARGUMENT, V{"variant is 9"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.variant = 9; }); }},
      {"matmul K not a multiple of 8", KAIO_ERROR_INVALID_DIMENSION, V{"K is 12", "multiple of 8", "16"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.k = 12; }); }},
      // the backward's products reduce over N (dA) and M (dB): those are named
      {"matmul backward N not a multiple of 8", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_matmul_backward", "N is 4097", "4104"},
       [](World &w) { return create_backward(w, 64, 4097, 64); }},
      {"matmul backward M not a multiple of 8", KAIO_ERROR_INVALID_DIMENSION, V{"M is 30", "32"},
       [](World &w) { return create_backward(w, 30, 64, 64); }},
      {"matmul backward zero K", KAIO_ERROR_INVALID_DIMENSION, V{"M, N, K are 64, 64, 0"},
       [](World &w) { return create_backward(w, 64, 64, 0); }},
      {"matmul zero M", KAIO_ERROR_INVALID_DIMENSION, V{"M, N, K are 0, 8, 32"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.m = 0; }); }},
      {"matmul M past the grid", KAIO_ERROR_INVALID_DIMENSION, V{"Split M"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.m = int64_t{1} << 30; }); }},
      {"matmul infinite alpha", KAIO_ERROR_INVALID_ARGUMENT, V{"alpha is inf"},
       [](World &w) { return create_mm(w, [](kaio_matmul_desc &d) { d.alpha = INFINITY; }); }},
      {"matmul null desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_matmul", "'desc'"},
       [](World &w) { kaio_op *o; return kaio_op_create_matmul(&o, w.dev0.get(), nullptr); }},
      {"matmul desc from an older header", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size is 8", "kaio_matmul_desc_init"},
       [](World &w) { kaio_matmul_desc d = mm_desc(); d.struct_size = 8; kaio_op *o; return kaio_op_create_matmul(&o, w.dev0.get(), &d); }},
      {"matmul A with the wrong shape", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_op_launch", "'A' is 32 x 16", "16 x 32"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[0].rows = 32; m.t[0].cols = 16; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul B of another dtype", KAIO_ERROR_INVALID_DTYPE, V{"'B'", "bf16", "f16"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[1].dtype = KAIO_DTYPE_BF16; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul C of another dtype", KAIO_ERROR_INVALID_DTYPE, V{"'C'", "f16", "f32"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[2].dtype = KAIO_DTYPE_F16; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul A not 16-byte aligned", KAIO_ERROR_MISALIGNED, V{"'A'", "16-byte", "multiple of 8"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[0].offset_bytes = 8; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul B stride not a multiple of 8", KAIO_ERROR_MISALIGNED, V{"'B'", "row_stride 12"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[1].row_stride = 12; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul C overlaps A", KAIO_ERROR_INVALID_ARGUMENT, V{"'A'", "'C'", "overlap"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[2].offset_bytes = 512; return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"matmul operand on another device", KAIO_ERROR_WRONG_DEVICE, V{"'B'", "device 1", "device 0"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[1].buffer = w.b1.get(); return kaio_op_launch(w.mm.get(), w.s0.get(), m.t, 3); }},
      {"one-shot matmul null C", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_matmul_tc", "'C'"},
       [](World &w) { MatmulArgs m(w.b0.get()); return kaio_matmul_tc(w.s0.get(), &m.t[0], &m.t[1], nullptr); }},
      {"one-shot matmul K from A not a multiple of 8", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_matmul_tc_bf16", "K is 30"},
       [](World &w) { MatmulArgs m(w.b0.get()); m.t[0].dtype = m.t[1].dtype = KAIO_DTYPE_BF16; m.t[0].cols = 30; return kaio_matmul_tc_bf16(w.s0.get(), &m.t[0], &m.t[1], &m.t[2]); }},
      {"probe null info", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_probe", "'info'"},
       [](World &) { return kaio_probe(nullptr); }},
      {"probe small struct", KAIO_ERROR_BUFFER_TOO_SMALL, V{"kaio_probe", "struct_size"},
       [](World &) { kaio_probe_info i{}; i.struct_size = 8; return kaio_probe(&i); }},
  };
}

class BadInput : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    if (!kt::on_fake_driver()) return;
    world_ = new World;
    World &w = *world_;
    w.dev0 = kt::open_device(0);
    w.dev1 = kt::open_device(1);
    w.s0 = kt::make_stream(w.dev0.get());
    w.s1 = kt::make_stream(w.dev1.get());
    w.b0 = kt::make_buffer(w.dev0.get(), 4096);
    w.b1 = kt::make_buffer(w.dev1.get(), 4096);
    w.small0 = kt::make_buffer(w.dev0.get(), 256);
    kaio_event *e = nullptr;
    EXPECT_EQ(kaio_event_create(&e, w.dev0.get(), 0), KAIO_OK);
    w.e0.reset(e);
    kaio_op *op = nullptr;
    EXPECT_EQ(kaio_op_create_silu_gate(&op, w.dev0.get(), KAIO_DTYPE_F32, 8, 16), KAIO_OK);
    w.silu.reset(op);
    EXPECT_EQ(kaio_op_create_rmsnorm(&op, w.dev0.get(), KAIO_DTYPE_F32, 8, 16, 1e-5f), KAIO_OK);
    w.rms.reset(op);
    EXPECT_EQ(kaio_op_create_matmul_tc(&op, w.dev0.get(), 16, 8, 32), KAIO_OK) << kaio_last_error();
    w.mm.reset(op);
    kaio_module *m = nullptr;
    EXPECT_EQ(kaio_module_load_ptx(&m, w.dev0.get(), kGoodPtx), KAIO_OK) << kaio_last_error();
    w.module.reset(m);
    kaio_kernel *k = nullptr;
    EXPECT_EQ(kaio_module_get_kernel(&k, m, "k"), KAIO_OK) << kaio_last_error();
    w.kernel.reset(k);
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }
  static World *world_;
};
World *BadInput::world_ = nullptr;

TEST_P(BadInput, ReturnsItsStatusAndNamesTheArgument) {
  if (!kt::on_fake_driver())
    GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                    "LIBKAIO_CUDA_DRIVER";
  const Case &c = GetParam();
  unsigned long long launches = kt::fake().launch_count();
  kt::expect_rejected(c.call(*world_), c.expected, c.message_parts, launches);
}

std::string case_name(const ::testing::TestParamInfo<Case> &info) {
  std::string n = info.param.name;
  for (char &ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(cases()), case_name);

TEST(BadInputTable, HasAtLeastFortyCases) { EXPECT_GE(cases().size(), 40u); }

}  // namespace

// A struct_size past any descriptor's size is refused before a byte of the
// caller's memory is written (it says how many bytes init zeroes).
TEST(DescInit, AHugeStructSizeIsRefusedAndWritesNothing) {
  struct Init {
    const char *name;
    kaio_status (*call)(void *, size_t);
  };
  const Init inits[] = {
      {"kaio_matmul_desc_init",
       [](void *p, size_t n) { return kaio_matmul_desc_init(static_cast<kaio_matmul_desc *>(p), n); }},
      {"kaio_matmul_backward_desc_init",
       [](void *p, size_t n) {
         return kaio_matmul_backward_desc_init(static_cast<kaio_matmul_backward_desc *>(p), n);
       }},
      {"kaio_attention_desc_init",
       [](void *p, size_t n) { return kaio_attention_desc_init(static_cast<kaio_attention_desc *>(p), n); }},
      {"kaio_matmul_int8_desc_init",
       [](void *p, size_t n) {
         return kaio_matmul_int8_desc_init(static_cast<kaio_matmul_int8_desc *>(p), n);
       }},
      {"kaio_matmul_int4_desc_init",
       [](void *p, size_t n) {
         return kaio_matmul_int4_desc_init(static_cast<kaio_matmul_int4_desc *>(p), n);
       }},
      {"kaio_qkv_int4_desc_init",
       [](void *p, size_t n) { return kaio_qkv_int4_desc_init(static_cast<kaio_qkv_int4_desc *>(p), n); }},
      {"kaio_qkv_int8_desc_init",
       [](void *p, size_t n) { return kaio_qkv_int8_desc_init(static_cast<kaio_qkv_int8_desc *>(p), n); }},
  };
  for (const Init &init : inits) {
    std::vector<unsigned char> mem(8192, 0xA5);
    for (size_t size : {size_t{4097}, size_t{1} << 32, SIZE_MAX}) {
      EXPECT_EQ(init.call(mem.data(), size), KAIO_ERROR_INVALID_ARGUMENT) << init.name << " " << size;
      std::string msg = kaio_last_error();
      EXPECT_NE(msg.find(init.name), std::string::npos) << msg;
      EXPECT_NE(msg.find("'struct_size'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("sizeof(*desc)"), std::string::npos) << msg;
    }
    for (unsigned char c : mem) ASSERT_EQ(c, 0xA5) << init.name << " wrote the caller's memory";
    EXPECT_EQ(init.call(mem.data(), 4096), KAIO_OK) << init.name;  // the bound itself is fine
  }
}
