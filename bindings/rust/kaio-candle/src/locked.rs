//! The CUDA storages of several tensors under candle's locks at once, for an
//! op that writes more than one of them (candle's in-place ops write one).
//! Each distinct storage is locked once, for writing where the op writes a
//! tensor in it and for reading otherwise, so tensors that share a storage
//! (column ranges of one fused QKV output) are views of one locked storage
//! instead of a second lock on it, which would deadlock. Storages are
//! locked in address order, the order candle's own in-place ops use.
use std::cell::RefCell;

use candle_core::{bail, CpuStorage, CudaStorage, InplaceOp1, Layout, Result, Storage, Tensor};

/// One locked storage.
pub(crate) enum Access<'s> {
    Read(&'s CudaStorage),
    Write(&'s mut CudaStorage),
}

impl Access<'_> {
    pub fn storage(&self) -> &CudaStorage {
        match self {
            Access::Read(s) => s,
            Access::Write(s) => s,
        }
    }
}

/// Which storage each tensor lives in: `group[i]` indexes the storages
/// passed to the body for tensor i; the storages in lock order, each with
/// its first tensor and whether any of its tensors is written.
pub(crate) fn groups<'t>(tensors: &[(&'t Tensor, bool)]) -> (Vec<usize>, Vec<(&'t Tensor, bool)>) {
    let ids: Vec<usize> = tensors.iter().map(|(t, _)| storage_id(t)).collect();
    let mut order: Vec<usize> = ids.clone();
    order.sort_unstable();
    order.dedup();
    let group: Vec<usize> = ids.iter().map(|id| order.binary_search(id).expect("every id is in order")).collect();
    let firsts = order
        .iter()
        .enumerate()
        .map(|(g, _)| {
            let members = || tensors.iter().zip(&group).filter(move |(_, &gi)| gi == g).map(|(tw, _)| tw);
            // Lock through a written tensor where there is one: candle
            // checks that its layout can be written.
            let first = members().find(|(_, w)| *w).or_else(|| members().next()).expect("a group has a member");
            (first.0, members().any(|(_, w)| *w))
        })
        .collect();
    (group, firsts)
}

/// Whether `a` and `b` view one storage.
#[cfg(test)]
pub(crate) fn same_storage(a: &Tensor, b: &Tensor) -> bool {
    storage_id(a) == storage_id(b)
}

/// The address of the storage `t` views, the same for every tensor that
/// shares it (a clone of its `Arc`) and stable while one lives.
fn storage_id(t: &Tensor) -> usize {
    let (s, _) = t.storage_and_layout();
    std::ptr::from_ref::<Storage>(&s).addr()
}

/// Runs `body` with the storages of `tensors` (each with whether the op
/// writes it) locked, one [`Access`] per distinct storage, and which of
/// them each tensor lives in. Any tensor on the CPU is refused naming `op`.
pub(crate) fn with_locked(
    op: &str,
    tensors: &[(&Tensor, bool)],
    body: &mut dyn FnMut(&mut [Access<'_>], &[usize]) -> Result<()>,
) -> Result<()> {
    let (group, firsts) = groups(tensors);
    lock_rest(op, &firsts, Vec::new(), &mut |held| body(held, &group))
}

/// Locks `rest` after the storages already `held`, then runs `body`.
fn lock_rest(
    op: &str,
    rest: &[(&Tensor, bool)],
    held: Vec<Access<'_>>,
    body: &mut dyn FnMut(&mut [Access<'_>]) -> Result<()>,
) -> Result<()> {
    let Some((&(t, written), tail)) = rest.split_first() else {
        let mut held = held;
        return body(&mut held);
    };
    if written {
        // candle hands out a storage for writing only to an in-place op.
        let nest = Nest {
            op,
            f: RefCell::new(Some(|s: &mut CudaStorage| {
                let mut inner: Vec<Access<'_>> = held;
                inner.push(Access::Write(s));
                lock_rest(op, tail, inner, body)
            })),
        };
        t.inplace_op1(&nest)
    } else {
        let (s, _) = t.storage_and_layout();
        let Storage::Cuda(c) = &*s else {
            return crate::prep::no_cpu(op);
        };
        let mut inner: Vec<Access<'_>> = held;
        inner.push(Access::Read(c));
        lock_rest(op, tail, inner, body)
    }
}

/// An in-place op of `op` that hands its storage to a closure, once.
struct Nest<'o, F> {
    op: &'o str,
    f: RefCell<Option<F>>,
}

impl<F: FnOnce(&mut CudaStorage) -> Result<()>> InplaceOp1 for Nest<'_, F> {
    fn name(&self) -> &'static str {
        "kaio-locked"
    }
    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout) -> Result<()> {
        crate::prep::no_cpu(self.op)
    }
    fn cuda_fwd(&self, s: &mut CudaStorage, _: &Layout) -> Result<()> {
        match self.f.borrow_mut().take() {
            Some(f) => f(s),
            None => bail!("kaio-candle: internal error: a locked storage was handed out twice"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn tensors_sharing_a_storage_share_a_group() -> candle_core::Result<()> {
        let qkv = Tensor::zeros((4, 12, 8), DType::F32, &Device::Cpu)?;
        let (q, k) = (qkv.narrow(1, 0, 8)?, qkv.narrow(1, 8, 2)?);
        let other = Tensor::zeros(4, DType::I32, &Device::Cpu)?;
        let (group, firsts) = groups(&[(&k, false), (&other, false), (&q, true)]);
        assert_eq!(group[0], group[2]);
        assert_ne!(group[0], group[1]);
        assert!(same_storage(&q, &k) && !same_storage(&q, &other));
        assert_eq!(firsts.len(), 2);
        // The shared storage is locked for writing, through q.
        let (t, w) = firsts[group[0]];
        assert!(w && t.dims() == q.dims());
        assert!(!firsts[group[1]].1);
        // Lock order is address order.
        let ids: Vec<usize> = firsts.iter().map(|(t, _)| storage_id(t)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        Ok(())
    }

    #[test]
    fn cpu_storages_are_refused_naming_the_op() -> candle_core::Result<()> {
        let (a, b) = (Tensor::zeros(4, DType::F32, &Device::Cpu)?, Tensor::zeros(4, DType::F32, &Device::Cpu)?);
        let mut ran = false;
        let e = with_locked("some_op", &[(&a, false), (&b, true)], &mut |_, _| {
            ran = true;
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert!(!ran);
        assert!(e.contains("kaio-candle::some_op") && e.contains("CUDA tensors only"), "{e}");
        Ok(())
    }
}
