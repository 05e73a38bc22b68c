"""The sm_90a kernels' emitter: mbarrier waits and set-up, the 1 KiB-aligned
shared memory base and wgmma descriptors as methods."""

from kaio_ptx import mbarrier, tma
from kaio_ptx.emitter import PtxEmitter


class Kernel(PtxEmitter):
    def wait(self, bar, parity, hint):
        mbarrier.wait(self, bar, parity, hint)

    def smem_base(self, symbol):
        return tma.smem_base(self, symbol)

    def init_mbarriers(self, tid, bars, inits):
        mbarrier.init(self, tid, bars, inits)

    def desc(self, addr, lbo, sbo):
        """64-bit wgmma descriptor of the 128-B-swizzled tile at shared address addr."""
        lo = self.r("or.b32", self.r("shr.u32", addr, 4), (lbo >> 4) << 16)
        d = self.reg("rd")
        self.op("mov.b64 %s, {%s, %s}" % (d, lo, self.r("mov.b32", (sbo >> 4) | (1 << 30))))
        return d
