//! candle custom ops backed by libkaio.
//!
//! The ops (fused SiLU gate, RMSNorm, softmax, matmul, k-quant matmul) are to
//! be written here as `candle_core::CustomOp*` implementations that launch
//! libkaio kernels on candle's own CUDA stream and device memory, through the
//! safe `kaio` crate. Build with `--features cuda` for the CUDA backend.

/// The version of the libkaio loaded at run time.
pub fn libkaio_version() -> kaio::Version {
    kaio::runtime_version()
}
