#![doc = include_str!("../README.md")]
//!
//! # Threads
//!
//! Every handle is `Send + Sync`, each `unsafe impl` citing the part of
//! kaio.h's threading contract that allows it: devices are internally
//! synchronised, objects made from a device may be used concurrently, and
//! modules, kernels and ops are immutable. libkaio keeps its last error per OS
//! thread; this crate copies it on the calling thread right after the failing
//! call, so an [`Error`] always describes its own call.
//!
//! # Lifetimes
//!
//! Children keep their parents alive inside libkaio, so a `Buffer`, `Stream`,
//! `Event`, `Module` or `Op` does not borrow its `Device` and everything may
//! be dropped in any order. [`TensorView`] borrows its buffer.
#![warn(missing_debug_implementations)]

mod attention;
mod attention_paged;
mod attention_paged_prefill;
mod attention_varlen;
mod buffer;
mod device;
mod dtype;
mod error;
mod handle;
mod kv_cache;
mod lang;
mod matmul;
mod module;
mod norms;
mod ops;
mod qmatmul;
mod quant;
mod rope;
mod sampling;
mod stream;

pub use kaio_sys as sys;

pub use attention::{
    attention, attention_flash, attention_flash_backward, attention_tc, AttentionDesc, AttentionMask, AttentionVariant,
    FlashGrads,
};
pub use attention_paged::{attention_paged, AttentionPagedDesc, PagedKv};
pub use attention_paged_prefill::attention_paged_prefill;
pub use attention_varlen::{attention_varlen, AttentionVarlenDesc};
pub use buffer::{Buffer, TensorView};
pub use device::{device_count, probe, Device, DeviceInfo, Probe};
pub use dtype::{Bf16, Dtype, Element, F16};
pub use error::{check_version, runtime_version, Error, Result, Status, Version, COMPILED_VERSION};
pub use kv_cache::kv_cache_write;
pub use matmul::{matmul, matmul_tc, matmul_tc_backward, MatmulBackwardDesc, MatmulDesc, MatmulTc, MatmulVariant, Trans};
pub use lang::{compile_ptx, LangKernel};
pub use module::{Kernel, KernelArg, KernelArgs, KernelAttributes, LaunchConfig, Module};
pub use norms::{add_rmsnorm, layernorm};
pub use ops::{gelu, rmsnorm, silu_gate, softmax, GeluMode, Op};
pub use qmatmul::{
    int4_repack_kaio, matmul_int4, matmul_int8, qkv_int4_tensors, qkv_int8_tensors, qkv_project_int4, qkv_project_int8,
    Int4Format, Int4Weight, MatmulInt4Desc, MatmulInt8Desc, QkvInt4Desc, QkvInt8Desc,
};
pub use quant::{dequantize, quant_matmul, quantize, QuantFormat, QuantMode};
pub use rope::{rope, rope_kv_cache_write, KvCaches, RopeDesc, RopeScaling, RopeStyle};
pub use sampling::{SamplingDesc, SamplingFeatures, SamplingViews};
pub use stream::{Event, Stream};
