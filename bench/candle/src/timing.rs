//! GPU time of one call on candle's stream: CUDA events around each call,
//! warm-up first, the median of the timed calls; inputs rotate through
//! enough copies to cover twice the L2, so no call reads what the last left.
use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
use candle_core::cuda_backend::CudaDevice;
use candle_core::Result;

pub const L2_BYTES: usize = 50 << 20; // H100 SXM

/// How many copies of a working set of `bytes` cover 2 x L2 (at least 1).
pub fn sets_for(bytes: usize) -> usize {
    (2 * L2_BYTES).div_ceil(bytes.max(1)).clamp(1, 64)
}

/// Median microseconds of `f(i)` over `iters` timed calls (i counts calls,
/// for rotating inputs), after `warmup` untimed ones. Every call is queued
/// between its own two events with no host sync in between, so the host
/// runs ahead of the GPU and each pair brackets GPU time.
pub fn median_us(dev: &CudaDevice, warmup: usize, iters: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let stream = dev.cuda_stream();
    let w = |e| candle_core::Error::wrap(e);
    for i in 0..warmup {
        f(i)?;
    }
    stream.synchronize().map_err(w)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut pairs = Vec::with_capacity(iters);
    for i in 0..iters {
        let start = stream.record_event(flags).map_err(w)?;
        f(warmup + i)?;
        let end = stream.record_event(flags).map_err(w)?;
        pairs.push((start, end));
    }
    stream.synchronize().map_err(w)?;
    let mut times = pairs
        .iter()
        .map(|(s, e)| s.elapsed_ms(e).map(|ms| ms as f64 * 1e3).map_err(w))
        .collect::<Result<Vec<_>>>()?;
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Ok(times[times.len() / 2])
}
