//! One libkaio device and one wrapped stream per candle CUDA device, and the
//! prepared ops made for it, so a steady-state call creates nothing.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::backend::BackendDevice;
use candle_core::cuda_backend::{CudaDevice, DeviceId};
use candle_core::{DeviceLocation, Result};

use crate::error::KaioResultExt;

/// What a prepared op was made for: the op's name and every number that
/// went into its creation.
pub(crate) type OpKey = (&'static str, Vec<i64>);

/// Ops are kept per calling thread. candle's default CUDA stream is CUDA's
/// per-thread stream (`cu_stream()` is `CU_STREAM_PER_THREAD`), so one candle
/// device launches on one stream per thread, and a prepared op that owns a
/// workspace (split-K, matmul backward with an f32 dC, attention backward,
/// quant_matmul for M > 8, int4 past 16 rows) must not run on two streams at
/// once; on one shared stream, two threads could also interleave the kernels
/// of one op's launch. Each thread's launches are in order, so a per-thread
/// op is always safe.
type Key = (std::thread::ThreadId, OpKey);

/// Bounds the prepared ops kept per device (a server sees many shapes, and
/// some ops hold workspaces); past it the cache starts over. Ops in use stay
/// alive through their `Arc`.
const MAX_OPS: usize = 256;

pub(crate) struct Context {
    pub device: kaio::Device,
    /// candle's own stream (`cuda_stream().cu_stream()`), borrowed.
    pub stream: kaio::Stream,
    ops: Mutex<HashMap<Key, Arc<kaio::Op>>>,
}

impl Context {
    /// The op cached under `key`, made by `make` on first use.
    pub fn op(&self, key: OpKey, make: impl FnOnce(&kaio::Device) -> kaio::Result<kaio::Op>) -> Result<Arc<kaio::Op>> {
        let name = key.0;
        let key = (std::thread::current().id(), key);
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(op) = ops.get(&key) {
            return Ok(op.clone());
        }
        let op = Arc::new(make(&self.device).kaio(name)?);
        if ops.len() >= MAX_OPS {
            ops.clear();
        }
        ops.insert(key, op.clone());
        Ok(op)
    }
}

fn contexts() -> &'static Mutex<HashMap<DeviceId, Arc<Context>>> {
    static CONTEXTS: OnceLock<Mutex<HashMap<DeviceId, Arc<Context>>>> = OnceLock::new();
    CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The context of `dev`, made on first use. A candle device's id is never
/// reused, so an entry stays valid for the process; it holds a primary
/// context reference and a stream wrapper, no memory.
pub(crate) fn context(dev: &CudaDevice) -> Result<Arc<Context>> {
    let mut map = contexts().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(&dev.id()) {
        return Ok(c.clone());
    }
    let ordinal = match dev.location() {
        DeviceLocation::Cuda { gpu_id } => gpu_id as i32,
        other => candle_core::bail!("kaio-candle: {other:?} is not a CUDA device"),
    };
    let device = kaio::Device::open(ordinal).kaio("device")?;
    let cu_stream = dev.cuda_stream().cu_stream();
    // SAFETY: candle's stream lives as long as its device, which outlives
    // every op call made with it; libkaio only enqueues on it.
    let stream = unsafe { kaio::Stream::from_raw(&device, cu_stream as *mut std::ffi::c_void) }.kaio("stream")?;
    let c = Arc::new(Context { device, stream, ops: Mutex::new(HashMap::new()) });
    map.insert(dev.id(), c.clone());
    Ok(c)
}

/// Waits for candle's stream on `dev`, as `Device::synchronize` does, and
/// returns the first device-side error a libkaio kernel raised on it since
/// the last call (a KV-cache slot past its cache, for example), which
/// candle's own synchronisation cannot see. A CPU device has nothing to wait
/// for.
pub fn synchronize(dev: &candle_core::Device) -> Result<()> {
    let candle_core::Device::Cuda(d) = dev else { return Ok(()) };
    context(d)?.stream.synchronize().kaio("synchronize")
}
