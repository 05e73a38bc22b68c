"""The sm_90a kernels' emitter: mbarrier waits and set-up, the 1 KiB-aligned
shared memory base and wgmma descriptors as methods."""

from kaio_ptx import mbarrier, tma, wgmma
from kaio_ptx.emitter import PtxEmitter

SHARED_LIMIT = 227 * 1024  # dynamic shared memory a block may opt in to (sm_90)


class Kernel(PtxEmitter):
    def wait(self, bar, parity, hint):
        mbarrier.wait(self, bar, parity, hint)

    def smem_base(self, symbol):
        return tma.smem_base(self, symbol)

    def init_mbarriers(self, tid, bars, inits):
        mbarrier.init(self, tid, bars, inits)

    def desc(self, addr, lbo, sbo):
        """64-bit wgmma descriptor of the 128-B-swizzled tile at shared address addr."""
        return wgmma.desc(self, addr, lbo, sbo)
