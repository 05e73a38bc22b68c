//! candle custom ops backed by libkaio's kernels, launched on candle's own
//! CUDA stream and device memory (no copies, no host synchronisation).
//!
//! Build with `--features cuda` (candle's CUDA backend); without it the crate
//! only has its layout checks. Each op checks dtypes, shapes, devices and
//! layouts (a non-zero `start_offset` is fine; where an op needs contiguous
//! rows it says so and names `.contiguous()`), and turns libkaio's status and
//! message into a `candle_core::Error`. libkaio's device, a wrapper of
//! candle's stream and the prepared ops are cached per candle device.
//!
//! ```no_run
//! # #[cfg(feature = "cuda")]
//! # fn main() -> candle_core::Result<()> {
//! use candle_core::{DType, Device, Tensor};
//! let dev = Device::new_cuda(0)?;
//! let a = Tensor::randn(0f32, 1., (64, 128), &dev)?.to_dtype(DType::F16)?;
//! let b = Tensor::randn(0f32, 1., (128, 32), &dev)?.to_dtype(DType::F16)?;
//! let c = kaio_candle::matmul_tc(&a, &b)?; // f32 [64, 32]
//! let y = kaio_candle::rmsnorm(&c, &Tensor::ones(32, DType::F32, &dev)?, 1e-6)?;
//! # let _ = y; Ok(()) }
//! # #[cfg(not(feature = "cuda"))] fn main() {}
//! ```
pub mod error;
pub mod heads;
pub mod layout;

#[cfg(feature = "cuda")]
mod attention;
#[cfg(feature = "cuda")]
mod attention_serving;
#[cfg(feature = "cuda")]
mod context;
#[cfg(feature = "cuda")]
mod isq;
#[cfg(feature = "cuda")]
mod kv_cache;
#[cfg(feature = "cuda")]
mod locked;
#[cfg(feature = "cuda")]
mod matmul;
#[cfg(feature = "cuda")]
mod norms;
#[cfg(feature = "cuda")]
mod prep;
#[cfg(feature = "cuda")]
mod quant;
#[cfg(feature = "cuda")]
mod rope;
#[cfg(feature = "cuda")]
mod rope_kv_cache;
#[cfg(feature = "cuda")]
mod rows;
#[cfg(feature = "cuda")]
mod sampling;
#[cfg(feature = "cuda")]
mod storage;
#[cfg(feature = "cuda")]
mod varlen_backward;

#[cfg(feature = "cuda")]
pub use attention::{
    attention_flash, attention_flash_causal, attention_tc, attention_tc_causal, flash_attention, AttentionFlash, AttentionTc,
    FlashAttention,
};
#[cfg(feature = "cuda")]
pub use attention_serving::{
    flash_attn_varlen, paged_attention, paged_attention_prefill, FlashAttnVarlen, PagedAttention, PagedAttentionPrefill,
};
#[cfg(feature = "cuda")]
pub use context::synchronize;
#[cfg(feature = "cuda")]
pub use kv_cache::{kv_cache_write, KvCacheWrite};
#[cfg(feature = "cuda")]
pub use matmul::{matmul_tc, matmul_tc_async, matmul_tc_bf16, matmul_tc_bf16_async, MatmulTc, MatmulTcOp};
#[cfg(feature = "cuda")]
pub use isq::{quant_matmul, quant_matmul_as, quantize_to_qtensor, QuantMatmul};
#[cfg(feature = "cuda")]
pub use quant::{
    matmul_int4, matmul_int8, matmul_int8_scaled, qkv_project_int4, qkv_project_int8, MatmulInt4, MatmulInt8,
    MatmulInt8Scaled, QkvInt4, QkvInt8,
};
#[cfg(feature = "cuda")]
pub use norms::{add_rmsnorm, layer_norm, AddRmsNorm, LayerNorm};
#[cfg(feature = "cuda")]
pub use rope::{rope, Rope};
#[cfg(feature = "cuda")]
pub use rope_kv_cache::rope_kv_cache_write;
#[cfg(feature = "cuda")]
pub use sampling::{LogitsSampler, Penalties, Sampled, Sampling};
#[cfg(feature = "cuda")]
pub use rows::{gelu, rmsnorm, silu_gate, softmax_last_dim, Gelu, GeluMode, RmsNorm, SiluGate, Softmax};

/// The version of the libkaio loaded at run time.
pub fn libkaio_version() -> kaio::Version {
    kaio::runtime_version()
}

// The README's code blocks run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
