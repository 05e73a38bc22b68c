//! Raw declarations of libkaio's C ABI, `include/kaio/kaio.h`, written by hand.
//!
//! Every item keeps its C name. Statuses, dtypes and flags are `i32`/`u32`
//! constants, never Rust enums, so a value from a newer libkaio is never
//! undefined behaviour. Opaque handles are zero-sized `#[repr(C)]` structs that
//! are `!Send`, `!Sync` and `!Unpin`; the safe `kaio` crate decides, from the
//! header's threading contract, which wrappers may cross threads.
//!
//! The header is the documentation: ownership ("caller owns", "borrowed",
//! "retains", "foreign") and threading rules are written on every function
//! there. `tests/c_abi.rs` compiles a C program against the real header and
//! checks every constant, size and field offset below against it.
//!
//! Linking: see `build.rs` (`KAIO_LIB_DIR`, `KAIO_BUILD_DIR`, `pkg-config`, a
//! Meson build dir next to this crate).
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
// `core::ffi::c_char` is 1.64+; this crate builds with Rust 1.63 (Debian 12).
use std::os::raw::{c_char, c_void};

// ---------------------------------------------------------------------------
// Version of the header these declarations were written from.
// ---------------------------------------------------------------------------
pub const KAIO_VERSION_MAJOR: u32 = 0;
pub const KAIO_VERSION_MINOR: u32 = 1;
pub const KAIO_VERSION_PATCH: u32 = 0;
pub const KAIO_VERSION_STRING: &str = "0.1.0";
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, as `KAIO_VERSION_NUMBER` in C.
pub const KAIO_VERSION_NUMBER: u32 =
    KAIO_VERSION_MAJOR * 10000 + KAIO_VERSION_MINOR * 100 + KAIO_VERSION_PATCH;
/// While 0.x the ABI is stable within a minor release; the soname carries it.
pub const KAIO_SOVERSION: &str = "0.1";

// ---------------------------------------------------------------------------
// Status codes
// ---------------------------------------------------------------------------
pub type kaio_status = i32;

pub const KAIO_OK: kaio_status = 0;
pub const KAIO_ERROR_INVALID_ARGUMENT: kaio_status = -100;
pub const KAIO_ERROR_INVALID_HANDLE: kaio_status = -101;
pub const KAIO_ERROR_INVALID_DTYPE: kaio_status = -102;
pub const KAIO_ERROR_SHAPE_MISMATCH: kaio_status = -103;
pub const KAIO_ERROR_OUT_OF_BOUNDS: kaio_status = -104;
pub const KAIO_ERROR_MISALIGNED: kaio_status = -105;
pub const KAIO_ERROR_WRONG_DEVICE: kaio_status = -106;
pub const KAIO_ERROR_BUFFER_TOO_SMALL: kaio_status = -107;
pub const KAIO_ERROR_INVALID_DIMENSION: kaio_status = -108;
pub const KAIO_ERROR_UNSUPPORTED: kaio_status = -109;
pub const KAIO_ERROR_DRIVER_NOT_FOUND: kaio_status = -200;
pub const KAIO_ERROR_DRIVER_TOO_OLD: kaio_status = -201;
pub const KAIO_ERROR_NO_DEVICE: kaio_status = -202;
pub const KAIO_ERROR_UNSUPPORTED_ARCH: kaio_status = -203;
pub const KAIO_ERROR_OUT_OF_HOST_MEMORY: kaio_status = -300;
pub const KAIO_ERROR_OUT_OF_DEVICE_MEMORY: kaio_status = -301;
pub const KAIO_ERROR_PTX_JIT_FAILED: kaio_status = -400;
pub const KAIO_ERROR_KERNEL_NOT_FOUND: kaio_status = -401;
pub const KAIO_ERROR_KERNEL_SOURCE: kaio_status = -402;
pub const KAIO_ERROR_LAUNCH_FAILED: kaio_status = -500;
pub const KAIO_ERROR_DEVICE_FAULT: kaio_status = -501;
pub const KAIO_ERROR_KERNEL_BOUNDS: kaio_status = -502;
pub const KAIO_ERROR_DRIVER: kaio_status = -900;
pub const KAIO_ERROR_INTERNAL: kaio_status = -999;

/// `KAIO_STATUS_CATEGORY(s)`: 0 for OK, else -100, -200, ... -900.
#[allow(non_snake_case)]
pub const fn KAIO_STATUS_CATEGORY(s: kaio_status) -> kaio_status {
    if s >= 0 {
        0
    } else {
        // Written as in C; i32::MIN cannot be negated, so widen first.
        -(((-(s as i64)) / 100) * 100) as kaio_status
    }
}

// ---------------------------------------------------------------------------
// Element types, flags and modes
// ---------------------------------------------------------------------------
pub type kaio_dtype = i32;
pub const KAIO_DTYPE_INVALID: kaio_dtype = 0;
pub const KAIO_DTYPE_F32: kaio_dtype = 1;
pub const KAIO_DTYPE_F16: kaio_dtype = 2;
pub const KAIO_DTYPE_BF16: kaio_dtype = 3;
pub const KAIO_DTYPE_I8: kaio_dtype = 4;
pub const KAIO_DTYPE_U8: kaio_dtype = 5;
pub const KAIO_DTYPE_I32: kaio_dtype = 6;
pub const KAIO_DTYPE_U32: kaio_dtype = 7;

pub const KAIO_STREAM_DEFAULT: u32 = 0;
pub const KAIO_STREAM_NON_BLOCKING: u32 = 1;
pub const KAIO_EVENT_DEFAULT: u32 = 0;
pub const KAIO_EVENT_DISABLE_TIMING: u32 = 1;

pub type kaio_gelu_mode = i32;
pub const KAIO_GELU_ERF: kaio_gelu_mode = 1;
pub const KAIO_GELU_TANH: kaio_gelu_mode = 2;

pub type kaio_trans = i32;
pub const KAIO_TRANS_N: kaio_trans = 0;
pub const KAIO_TRANS_T: kaio_trans = 1;

pub type kaio_matmul_variant = i32;
pub const KAIO_MATMUL_AUTO: kaio_matmul_variant = 0;
pub const KAIO_MATMUL_SYNC: kaio_matmul_variant = 1;
pub const KAIO_MATMUL_ASYNC: kaio_matmul_variant = 2;

// GGUF k-quants
pub type kaio_quant_format = i32;
pub const KAIO_QUANT_Q8_0: kaio_quant_format = 1;
pub const KAIO_QUANT_Q4_K: kaio_quant_format = 2;
pub const KAIO_QUANT_Q5_K: kaio_quant_format = 3;
pub const KAIO_QUANT_Q6_K: kaio_quant_format = 4;
pub type kaio_quant_mode = i32;
pub const KAIO_QUANT_MODE_GGML: kaio_quant_mode = 0;
pub const KAIO_QUANT_MODE_CANDLE: kaio_quant_mode = 1;

// Quantized matmul
pub type kaio_int4_format = i32;
pub const KAIO_INT4_GPTQ: kaio_int4_format = 0;
pub const KAIO_INT4_SIGNED: kaio_int4_format = 1;

// Attention
pub type kaio_attention_mask = i32;
pub const KAIO_ATTENTION_MASK_NONE: kaio_attention_mask = 0;
pub const KAIO_ATTENTION_CAUSAL: kaio_attention_mask = 1;
pub const KAIO_ATTENTION_CAUSAL_TOP_LEFT: kaio_attention_mask = 2;
pub type kaio_attention_variant = i32;
pub const KAIO_ATTENTION_AUTO: kaio_attention_variant = 0;
pub const KAIO_ATTENTION_SM80: kaio_attention_variant = 1;
pub const KAIO_ATTENTION_SM80_M128: kaio_attention_variant = 2;
pub const KAIO_ATTENTION_SM90: kaio_attention_variant = 3;
pub const KAIO_ATTENTION_DECODE: kaio_attention_variant = 4;

// Rotary position embeddings
pub type kaio_rope_style = i32;
pub const KAIO_ROPE_HALF_SPLIT: kaio_rope_style = 0;
pub const KAIO_ROPE_INTERLEAVED: kaio_rope_style = 1;
pub type kaio_rope_scaling = i32;
pub const KAIO_ROPE_SCALING_NONE: kaio_rope_scaling = 0;
pub const KAIO_ROPE_SCALING_LINEAR: kaio_rope_scaling = 1;
pub const KAIO_ROPE_SCALING_LLAMA3: kaio_rope_scaling = 2;
pub const KAIO_ROPE_SCALING_YARN: kaio_rope_scaling = 3;

// Token sampling: kaio_sampling_desc.features bits
pub const KAIO_SAMPLING_RANDOM: u32 = 1;
pub const KAIO_SAMPLING_TOP_K: u32 = 2;
pub const KAIO_SAMPLING_TOP_P: u32 = 4;
pub const KAIO_SAMPLING_MIN_P: u32 = 8;
pub const KAIO_SAMPLING_PENALTIES: u32 = 16;
pub const KAIO_SAMPLING_PROBS: u32 = 32;
pub const KAIO_SAMPLING_TOP_P_OF_ROW: u32 = 64;

// ---------------------------------------------------------------------------
// Opaque handles (the nomicon's zero-sized-type pattern)
// ---------------------------------------------------------------------------
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            // Raw pointer: !Send + !Sync; PhantomPinned: !Unpin.
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}
opaque! {
    /// A device and its primary context.
    kaio_device;
    /// An owned or wrapped (foreign) CUDA stream.
    kaio_stream;
    /// A CUDA event.
    kaio_event;
    /// A range of device memory, owned or wrapped (foreign).
    kaio_buffer;
    /// A prepared op: one op kind, dtype, shapes and options.
    kaio_op;
    /// A user PTX module.
    kaio_module;
    /// An `.entry` of a user module.
    kaio_kernel;
    /// A kernel-language kernel, compiled to PTX by libkaio and loaded.
    kaio_lang_kernel;
}

// ---------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------
#[repr(C)]
#[derive(Copy, Clone)]
pub struct kaio_probe_info {
    pub struct_size: u32,
    pub driver_status: kaio_status,
    pub driver_version: i32,
    pub device_count: i32,
    pub message: [c_char; 256],
}

#[repr(C)]
#[derive(Copy, Clone)]
pub struct kaio_device_info {
    pub struct_size: u32,
    pub ordinal: i32,
    pub cc_major: i32,
    pub cc_minor: i32,
    pub sm_count: i32,
    pub max_shared_per_block: i32,
    pub total_memory: u64,
    pub l2_cache_bytes: u64,
    pub name: [c_char; 256],
}

/// A rank-2 row-major view; see "Tensor views" in kaio.h.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct kaio_tensor {
    pub buffer: *mut kaio_buffer,
    pub offset_bytes: u64,
    pub dtype: kaio_dtype,
    /// Must be 0.
    pub reserved: u32,
    pub rows: i64,
    pub cols: i64,
    /// In elements; 0 means `cols` (contiguous).
    pub row_stride: i64,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct kaio_kernel_attributes {
    pub struct_size: u32,
    pub registers: i32,
    pub static_shared_bytes: i32,
    pub local_bytes: i32,
    pub const_bytes: i32,
    pub max_threads_per_block: i32,
    pub param_bytes: i32,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_launch_config {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// Fill with `kaio_matmul_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_matmul_desc {
    pub struct_size: u32,
    pub in_dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub trans_a: kaio_trans,
    pub trans_b: kaio_trans,
    pub variant: kaio_matmul_variant,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub alpha: f32,
    pub beta: f32,
}

/// Fill with `kaio_matmul_backward_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_matmul_backward_desc {
    pub struct_size: u32,
    pub in_dtype: kaio_dtype,
    pub grad_dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub variant: kaio_matmul_variant,
    /// Must be 0.
    pub reserved: u32,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub beta: f32,
    /// Must be 0.
    pub reserved2: u32,
}

/// Fill with `kaio_matmul_int8_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_matmul_int8_desc {
    pub struct_size: u32,
    pub out_dtype: kaio_dtype,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub alpha: f32,
    /// KAIO_MATMUL_AUTO (default) or KAIO_MATMUL_ASYNC (the mma.sync kernel).
    pub variant: kaio_matmul_variant,
}

/// Fill with `kaio_matmul_int4_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_matmul_int4_desc {
    pub struct_size: u32,
    pub in_dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub format: kaio_int4_format,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub group_size: i64,
    pub zeros_offset: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// Fill with `kaio_qkv_int4_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_qkv_int4_desc {
    pub struct_size: u32,
    pub in_dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub format: kaio_int4_format,
    pub m: i64,
    pub k: i64,
    pub n_q: i64,
    pub n_k: i64,
    pub n_v: i64,
    pub group_size: i64,
    pub zeros_offset: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// Fill with `kaio_qkv_int8_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_qkv_int8_desc {
    pub struct_size: u32,
    pub out_dtype: kaio_dtype,
    pub m: i64,
    pub k: i64,
    pub n_q: i64,
    pub n_k: i64,
    pub n_v: i64,
    /// Must be 0.
    pub reserved: u32,
}

/// Fill with `kaio_attention_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_attention_desc {
    pub struct_size: u32,
    pub dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub o_dtype: kaio_dtype,
    pub mask: kaio_attention_mask,
    pub variant: kaio_attention_variant,
    pub deterministic: i32,
    /// Must be 0.
    pub reserved: u32,
    pub batch: i64,
    pub seq_q: i64,
    pub seq_k: i64,
    pub heads_q: i64,
    pub heads_kv: i64,
    pub head_dim: i64,
    pub softmax_scale: f32,
    /// Must be 0.
    pub reserved2: u32,
}

/// Fill with `kaio_rope_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_rope_desc {
    pub struct_size: u32,
    pub style: kaio_rope_style,
    pub dtype: kaio_dtype,
    pub scaling: kaio_rope_scaling,
    pub heads_q: i64,
    pub heads_k: i64,
    pub head_dim: i64,
    /// 0 means head_dim.
    pub rotary_dim: i64,
    pub theta: f64,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: i64,
    pub beta_fast: f64,
    pub beta_slow: f64,
    pub attention_factor: f64,
    pub mscale: f64,
    pub mscale_all_dim: f64,
    pub truncate: i32,
    /// Must be 0.
    pub reserved: u32,
    /// Must be 0.
    pub reserved2: [u64; 4],
}

/// Fill with `kaio_attention_paged_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_attention_paged_desc {
    pub struct_size: u32,
    pub page_size: i32,
    /// Must be 0.
    pub reserved: [u64; 2],
}

/// Fill with `kaio_sampling_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct kaio_sampling_desc {
    pub struct_size: u32,
    pub dtype: kaio_dtype,
    pub batch: i64,
    pub vocab: i64,
    pub max_prev: i64,
    /// `KAIO_SAMPLING_*` bits.
    pub features: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// Fill with `kaio_attention_varlen_desc_init` before use.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct kaio_attention_varlen_desc {
    pub struct_size: u32,
    pub dtype: kaio_dtype,
    pub out_dtype: kaio_dtype,
    pub o_dtype: kaio_dtype,
    pub mask: kaio_attention_mask,
    pub variant: kaio_attention_variant,
    /// Must be 0.
    pub reserved: u32,
    pub batch: i64,
    pub max_seqlen_q: i64,
    pub max_seqlen_k: i64,
    pub total_q: i64,
    pub total_k: i64,
    pub heads_q: i64,
    pub heads_kv: i64,
    pub head_dim: i64,
    pub softmax_scale: f32,
    /// Must be 0.
    pub reserved2: u32,
}

// Layout asserts: the sizes kaio.h's structs have on every 64-bit target
// (tests/c_abi.rs checks these, and every field offset, against a C compiler).
const _: () = assert!(std::mem::size_of::<kaio_tensor>() == 48);
const _: () = assert!(std::mem::align_of::<kaio_tensor>() == 8);
const _: () = assert!(std::mem::size_of::<kaio_launch_config>() == 32);
const _: () = assert!(std::mem::size_of::<kaio_probe_info>() == 272);
const _: () = assert!(std::mem::size_of::<kaio_device_info>() == 296);
const _: () = assert!(std::mem::align_of::<kaio_device_info>() == 8);
const _: () = assert!(std::mem::size_of::<kaio_kernel_attributes>() == 28);
const _: () = assert!(std::mem::size_of::<kaio_matmul_desc>() == 56);
const _: () = assert!(std::mem::size_of::<kaio_matmul_backward_desc>() == 56);
const _: () = assert!(std::mem::size_of::<kaio_matmul_int8_desc>() == 40);
const _: () = assert!(std::mem::size_of::<kaio_matmul_int4_desc>() == 56);
const _: () = assert!(std::mem::size_of::<kaio_qkv_int4_desc>() == 72);
const _: () = assert!(std::mem::size_of::<kaio_qkv_int8_desc>() == 56);
const _: () = assert!(std::mem::size_of::<kaio_attention_desc>() == 88);
const _: () = assert!(std::mem::align_of::<kaio_attention_desc>() == 8);
const _: () = assert!(std::mem::size_of::<kaio_rope_desc>() == 168);
const _: () = assert!(std::mem::size_of::<kaio_attention_paged_desc>() == 24);
const _: () = assert!(std::mem::size_of::<kaio_sampling_desc>() == 40);
const _: () = assert!(std::mem::size_of::<kaio_attention_varlen_desc>() == 104);
const _: () = assert!(std::mem::size_of::<kaio_status>() == 4);
const _: () = assert!(std::mem::size_of::<*mut kaio_buffer>() == 8);
const _: () = assert!(KAIO_STATUS_CATEGORY(KAIO_ERROR_DEVICE_FAULT) == -500);
const _: () = assert!(KAIO_STATUS_CATEGORY(KAIO_ERROR_INTERNAL) == -900);
const _: () = assert!(KAIO_STATUS_CATEGORY(KAIO_OK) == 0);
const _: () = assert!(KAIO_STATUS_CATEGORY(KAIO_ERROR_KERNEL_SOURCE) == -400);

/// `kaio_tensor_2d`, a `static inline` function in C (so not in the library):
/// a contiguous view of a whole buffer from its start.
#[inline]
pub fn kaio_tensor_2d(buffer: *mut kaio_buffer, dtype: kaio_dtype, rows: i64, cols: i64) -> kaio_tensor {
    kaio_tensor { buffer, offset_bytes: 0, dtype, reserved: 0, rows, cols, row_stride: 0 }
}

// ---------------------------------------------------------------------------
// Functions, in the header's order
// ---------------------------------------------------------------------------
extern "C" {
    // Status and errors
    pub fn kaio_status_name(status: kaio_status) -> *const c_char;
    pub fn kaio_last_error() -> *const c_char;
    pub fn kaio_last_error_status() -> kaio_status;
    pub fn kaio_last_error_copy(buf: *mut c_char, cap: usize) -> usize;
    pub fn kaio_last_error_driver_code() -> i32;

    // Version
    pub fn kaio_version_number() -> u32;
    pub fn kaio_version_string() -> *const c_char;

    // Probe
    pub fn kaio_probe(info: *mut kaio_probe_info) -> kaio_status;

    // Element types
    pub fn kaio_dtype_size(dtype: kaio_dtype) -> usize;
    pub fn kaio_dtype_name(dtype: kaio_dtype) -> *const c_char;

    // Device
    pub fn kaio_device_count(out_count: *mut i32) -> kaio_status;
    pub fn kaio_device_open(out: *mut *mut kaio_device, ordinal: i32) -> kaio_status;
    pub fn kaio_device_destroy(device: *mut kaio_device);
    pub fn kaio_device_get_info(device: *const kaio_device, info: *mut kaio_device_info) -> kaio_status;
    pub fn kaio_device_native_context(device: *const kaio_device) -> *mut c_void;

    // Stream and event
    pub fn kaio_stream_create(out: *mut *mut kaio_stream, device: *mut kaio_device, flags: u32) -> kaio_status;
    pub fn kaio_stream_wrap(out: *mut *mut kaio_stream, device: *mut kaio_device, cu_stream: *mut c_void) -> kaio_status;
    pub fn kaio_stream_synchronize(stream: *mut kaio_stream) -> kaio_status;
    pub fn kaio_stream_wait_event(stream: *mut kaio_stream, event: *mut kaio_event) -> kaio_status;
    pub fn kaio_stream_native(stream: *const kaio_stream) -> *mut c_void;
    pub fn kaio_stream_device(stream: *const kaio_stream) -> *mut kaio_device;
    pub fn kaio_stream_destroy(stream: *mut kaio_stream);

    pub fn kaio_event_create(out: *mut *mut kaio_event, device: *mut kaio_device, flags: u32) -> kaio_status;
    pub fn kaio_event_record(event: *mut kaio_event, stream: *mut kaio_stream) -> kaio_status;
    pub fn kaio_event_synchronize(event: *mut kaio_event) -> kaio_status;
    pub fn kaio_event_elapsed_ms(out_ms: *mut f32, start: *mut kaio_event, end: *mut kaio_event) -> kaio_status;
    pub fn kaio_event_destroy(event: *mut kaio_event);

    // Buffer
    pub fn kaio_buffer_create(out: *mut *mut kaio_buffer, device: *mut kaio_device, size_bytes: u64) -> kaio_status;
    pub fn kaio_buffer_wrap(
        out: *mut *mut kaio_buffer,
        device: *mut kaio_device,
        device_ptr: u64,
        size_bytes: u64,
    ) -> kaio_status;
    pub fn kaio_buffer_destroy(buffer: *mut kaio_buffer);
    pub fn kaio_buffer_write(buffer: *mut kaio_buffer, offset: u64, src: *const c_void, size: u64) -> kaio_status;
    pub fn kaio_buffer_read(buffer: *const kaio_buffer, offset: u64, dst: *mut c_void, size: u64) -> kaio_status;
    pub fn kaio_buffer_write_async(
        buffer: *mut kaio_buffer,
        stream: *mut kaio_stream,
        offset: u64,
        src: *const c_void,
        size: u64,
    ) -> kaio_status;
    pub fn kaio_buffer_read_async(
        buffer: *const kaio_buffer,
        stream: *mut kaio_stream,
        offset: u64,
        dst: *mut c_void,
        size: u64,
    ) -> kaio_status;
    pub fn kaio_buffer_memset(
        buffer: *mut kaio_buffer,
        stream: *mut kaio_stream,
        offset: u64,
        value: u8,
        size: u64,
    ) -> kaio_status;
    pub fn kaio_buffer_copy(
        dst: *mut kaio_buffer,
        dst_offset: u64,
        src: *const kaio_buffer,
        src_offset: u64,
        size: u64,
        stream: *mut kaio_stream,
    ) -> kaio_status;
    pub fn kaio_buffer_device_ptr(buffer: *const kaio_buffer) -> u64;
    pub fn kaio_buffer_size(buffer: *const kaio_buffer) -> u64;
    pub fn kaio_buffer_device(buffer: *const kaio_buffer) -> *mut kaio_device;

    // Ops
    pub fn kaio_op_create_silu_gate(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
    ) -> kaio_status;
    pub fn kaio_op_create_gelu(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
        mode: kaio_gelu_mode,
    ) -> kaio_status;
    pub fn kaio_op_create_rmsnorm(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
        eps: f32,
    ) -> kaio_status;
    pub fn kaio_op_create_softmax(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
    ) -> kaio_status;
    pub fn kaio_op_launch(
        op: *const kaio_op,
        stream: *mut kaio_stream,
        tensors: *const kaio_tensor,
        count: usize,
    ) -> kaio_status;
    pub fn kaio_op_destroy(op: *mut kaio_op);

    pub fn kaio_silu_gate(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        gate: *const kaio_tensor,
        out: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_gelu(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        out: *const kaio_tensor,
        mode: kaio_gelu_mode,
    ) -> kaio_status;
    pub fn kaio_rmsnorm(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        weight: *const kaio_tensor,
        out: *const kaio_tensor,
        eps: f32,
    ) -> kaio_status;
    pub fn kaio_softmax(stream: *mut kaio_stream, x: *const kaio_tensor, out: *const kaio_tensor) -> kaio_status;

    // Paged KV cache
    pub fn kaio_op_create_kv_cache_write(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        tokens: i64,
        width: i64,
        cache_rows: i64,
    ) -> kaio_status;
    pub fn kaio_kv_cache_write(
        stream: *mut kaio_stream,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        slot_mapping: *const kaio_tensor,
        k_cache: *const kaio_tensor,
        v_cache: *const kaio_tensor,
    ) -> kaio_status;

    // Normalisations
    pub fn kaio_op_create_add_rmsnorm(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
        eps: f32,
    ) -> kaio_status;
    pub fn kaio_op_create_layernorm(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        dtype: kaio_dtype,
        rows: i64,
        cols: i64,
        eps: f32,
    ) -> kaio_status;
    pub fn kaio_add_rmsnorm(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        residual: *const kaio_tensor,
        weight: *const kaio_tensor,
        out: *const kaio_tensor,
        eps: f32,
    ) -> kaio_status;
    pub fn kaio_layernorm(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        weight: *const kaio_tensor,
        bias: *const kaio_tensor,
        out: *const kaio_tensor,
        eps: f32,
    ) -> kaio_status;

    // Rotary position embeddings
    pub fn kaio_rope_desc_init(desc: *mut kaio_rope_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_rope(out: *mut *mut kaio_op, device: *mut kaio_device, desc: *const kaio_rope_desc) -> kaio_status;
    pub fn kaio_rope(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        positions: *const kaio_tensor,
        desc: *const kaio_rope_desc,
    ) -> kaio_status;
    pub fn kaio_op_create_rope_kv_cache_write(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_rope_desc,
    ) -> kaio_status;
    #[allow(clippy::too_many_arguments)]
    pub fn kaio_rope_kv_cache_write(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        positions: *const kaio_tensor,
        slot_mapping: *const kaio_tensor,
        k_cache: *const kaio_tensor,
        v_cache: *const kaio_tensor,
        desc: *const kaio_rope_desc,
    ) -> kaio_status;

    // Paged attention
    pub fn kaio_attention_paged_desc_init(desc: *mut kaio_attention_paged_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_attention_paged(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_desc,
        paged: *const kaio_attention_paged_desc,
    ) -> kaio_status;
    pub fn kaio_attention_paged(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k_pool: *const kaio_tensor,
        v_pool: *const kaio_tensor,
        block_table: *const kaio_tensor,
        seq_lens: *const kaio_tensor,
        o: *const kaio_tensor,
        lse: *const kaio_tensor,
        desc: *const kaio_attention_desc,
        paged: *const kaio_attention_paged_desc,
    ) -> kaio_status;

    // Token sampling
    pub fn kaio_sampling_desc_init(desc: *mut kaio_sampling_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_sampling(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_sampling_desc,
    ) -> kaio_status;

    // Attention on variable-length batches
    pub fn kaio_attention_varlen_desc_init(desc: *mut kaio_attention_varlen_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_attention_varlen(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_varlen_desc,
    ) -> kaio_status;
    pub fn kaio_attention_varlen(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        cu_seqlens_q: *const kaio_tensor,
        cu_seqlens_k: *const kaio_tensor,
        o: *const kaio_tensor,
        lse: *const kaio_tensor,
        desc: *const kaio_attention_varlen_desc,
    ) -> kaio_status;
    pub fn kaio_op_create_attention_varlen_backward(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_varlen_desc,
    ) -> kaio_status;
    pub fn kaio_op_create_attention_paged_prefill(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_varlen_desc,
        paged: *const kaio_attention_paged_desc,
    ) -> kaio_status;
    #[allow(clippy::too_many_arguments)]
    pub fn kaio_attention_paged_prefill(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k_pool: *const kaio_tensor,
        v_pool: *const kaio_tensor,
        cu_seqlens_q: *const kaio_tensor,
        block_table: *const kaio_tensor,
        seq_lens: *const kaio_tensor,
        o: *const kaio_tensor,
        lse: *const kaio_tensor,
        desc: *const kaio_attention_varlen_desc,
        paged: *const kaio_attention_paged_desc,
    ) -> kaio_status;

    // Tensor-core matmul
    pub fn kaio_matmul_desc_init(desc: *mut kaio_matmul_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_matmul(out: *mut *mut kaio_op, device: *mut kaio_device, desc: *const kaio_matmul_desc) -> kaio_status;
    pub fn kaio_matmul(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        c: *const kaio_tensor,
        desc: *const kaio_matmul_desc,
    ) -> kaio_status;
    pub fn kaio_matmul_tc(stream: *mut kaio_stream, a: *const kaio_tensor, b: *const kaio_tensor, c: *const kaio_tensor) -> kaio_status;
    pub fn kaio_matmul_tc_async(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        c: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_matmul_tc_bf16(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        c: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_matmul_tc_bf16_async(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        c: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_op_create_matmul_tc(out: *mut *mut kaio_op, device: *mut kaio_device, m: i64, n: i64, k: i64) -> kaio_status;
    pub fn kaio_op_create_matmul_tc_async(out: *mut *mut kaio_op, device: *mut kaio_device, m: i64, n: i64, k: i64) -> kaio_status;
    pub fn kaio_op_create_matmul_tc_bf16(out: *mut *mut kaio_op, device: *mut kaio_device, m: i64, n: i64, k: i64) -> kaio_status;
    pub fn kaio_op_create_matmul_tc_bf16_async(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        m: i64,
        n: i64,
        k: i64,
    ) -> kaio_status;
    pub fn kaio_matmul_backward_desc_init(desc: *mut kaio_matmul_backward_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_matmul_backward(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_matmul_backward_desc,
    ) -> kaio_status;
    pub fn kaio_matmul_tc_backward(
        stream: *mut kaio_stream,
        dc: *const kaio_tensor,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        da: *const kaio_tensor,
        db: *const kaio_tensor,
    ) -> kaio_status;

    // User kernels
    pub fn kaio_module_load_ptx(out: *mut *mut kaio_module, device: *mut kaio_device, ptx: *const c_char) -> kaio_status;
    pub fn kaio_module_destroy(module: *mut kaio_module);
    pub fn kaio_module_get_kernel(out: *mut *mut kaio_kernel, module: *mut kaio_module, name: *const c_char) -> kaio_status;
    pub fn kaio_kernel_destroy(kernel: *mut kaio_kernel);
    pub fn kaio_kernel_get_attributes(kernel: *const kaio_kernel, attrs: *mut kaio_kernel_attributes) -> kaio_status;
    pub fn kaio_kernel_launch(
        kernel: *const kaio_kernel,
        stream: *mut kaio_stream,
        config: *const kaio_launch_config,
        args: *const c_void,
        args_size: usize,
    ) -> kaio_status;

    // GGUF k-quants
    pub fn kaio_quant_block_elems(format: kaio_quant_format) -> i64;
    pub fn kaio_quant_block_bytes(format: kaio_quant_format) -> i64;
    pub fn kaio_quant_row_bytes(format: kaio_quant_format, cols: i64) -> i64;
    pub fn kaio_op_create_quantize(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        format: kaio_quant_format,
        mode: kaio_quant_mode,
        in_dtype: kaio_dtype,
        rows: i64,
        cols: i64,
    ) -> kaio_status;
    pub fn kaio_quantize(
        stream: *mut kaio_stream,
        x: *const kaio_tensor,
        q: *const kaio_tensor,
        format: kaio_quant_format,
        mode: kaio_quant_mode,
    ) -> kaio_status;
    pub fn kaio_op_create_dequantize(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        format: kaio_quant_format,
        out_dtype: kaio_dtype,
        rows: i64,
        cols: i64,
    ) -> kaio_status;
    pub fn kaio_dequantize(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        y: *const kaio_tensor,
        format: kaio_quant_format,
    ) -> kaio_status;
    pub fn kaio_op_create_quant_matmul(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        format: kaio_quant_format,
        a_dtype: kaio_dtype,
        out_dtype: kaio_dtype,
        m: i64,
        n: i64,
        k: i64,
    ) -> kaio_status;
    pub fn kaio_quant_matmul(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        w: *const kaio_tensor,
        c: *const kaio_tensor,
        format: kaio_quant_format,
    ) -> kaio_status;

    // Quantized matmul
    pub fn kaio_matmul_int8_desc_init(desc: *mut kaio_matmul_int8_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_matmul_int8(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_matmul_int8_desc,
    ) -> kaio_status;
    pub fn kaio_matmul_int8(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        b: *const kaio_tensor,
        sa: *const kaio_tensor,
        sb: *const kaio_tensor,
        c: *const kaio_tensor,
        desc: *const kaio_matmul_int8_desc,
    ) -> kaio_status;
    pub fn kaio_matmul_int4_desc_init(desc: *mut kaio_matmul_int4_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_matmul_int4(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_matmul_int4_desc,
    ) -> kaio_status;
    pub fn kaio_matmul_int4(
        stream: *mut kaio_stream,
        a: *const kaio_tensor,
        qweight: *const kaio_tensor,
        qzeros: *const kaio_tensor,
        scales: *const kaio_tensor,
        c: *const kaio_tensor,
        desc: *const kaio_matmul_int4_desc,
    ) -> kaio_status;
    pub fn kaio_int4_repack_kaio(stream: *mut kaio_stream, src: *const kaio_tensor, dst: *const kaio_tensor) -> kaio_status;
    pub fn kaio_qkv_int4_desc_init(desc: *mut kaio_qkv_int4_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_qkv_project_int4(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_qkv_int4_desc,
    ) -> kaio_status;
    pub fn kaio_qkv_project_int4(
        stream: *mut kaio_stream,
        tensors: *const kaio_tensor,
        count: usize,
        desc: *const kaio_qkv_int4_desc,
    ) -> kaio_status;
    pub fn kaio_qkv_int8_desc_init(desc: *mut kaio_qkv_int8_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_qkv_project_int8(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_qkv_int8_desc,
    ) -> kaio_status;
    pub fn kaio_qkv_project_int8(
        stream: *mut kaio_stream,
        tensors: *const kaio_tensor,
        count: usize,
        desc: *const kaio_qkv_int8_desc,
    ) -> kaio_status;

    // Attention
    pub fn kaio_attention_desc_init(desc: *mut kaio_attention_desc, struct_size: usize) -> kaio_status;
    pub fn kaio_op_create_attention(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_desc,
    ) -> kaio_status;
    pub fn kaio_attention(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        o: *const kaio_tensor,
        lse: *const kaio_tensor,
        desc: *const kaio_attention_desc,
    ) -> kaio_status;
    pub fn kaio_op_create_attention_backward(
        out: *mut *mut kaio_op,
        device: *mut kaio_device,
        desc: *const kaio_attention_desc,
    ) -> kaio_status;
    pub fn kaio_attention_tc(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_tc_causal(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash_causal(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash_with_stats(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
        lse: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash_causal_with_stats(
        stream: *mut kaio_stream,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
        lse: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash_backward(
        stream: *mut kaio_stream,
        dout: *const kaio_tensor,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
        lse: *const kaio_tensor,
        dq: *const kaio_tensor,
        dk: *const kaio_tensor,
        dv: *const kaio_tensor,
    ) -> kaio_status;
    pub fn kaio_attention_flash_causal_backward(
        stream: *mut kaio_stream,
        dout: *const kaio_tensor,
        q: *const kaio_tensor,
        k: *const kaio_tensor,
        v: *const kaio_tensor,
        out: *const kaio_tensor,
        lse: *const kaio_tensor,
        dq: *const kaio_tensor,
        dk: *const kaio_tensor,
        dv: *const kaio_tensor,
    ) -> kaio_status;

    // Kernel language
    pub fn kaio_lang_kernel_create(
        out: *mut *mut kaio_lang_kernel,
        device: *mut kaio_device,
        source: *const c_char,
    ) -> kaio_status;
    pub fn kaio_lang_kernel_destroy(kernel: *mut kaio_lang_kernel);
    pub fn kaio_lang_compile_ptx(source: *const c_char, buf: *mut c_char, cap: usize, out_length: *mut usize) -> kaio_status;
    pub fn kaio_lang_kernel_ptx(
        kernel: *const kaio_lang_kernel,
        buf: *mut c_char,
        cap: usize,
        out_length: *mut usize,
    ) -> kaio_status;
    pub fn kaio_lang_kernel_launch(
        kernel: *const kaio_lang_kernel,
        stream: *mut kaio_stream,
        tensors: *const kaio_tensor,
        tensor_count: usize,
        scalars: *const f64,
        scalar_count: usize,
    ) -> kaio_status;
    pub fn kaio_lang_kernel_check(kernel: *const kaio_lang_kernel) -> kaio_status;
}
