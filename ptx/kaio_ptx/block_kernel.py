"""An entry launched with blockDim (256, 1, 1), without annotations; its
static shared declarations are collected in `shared` while the body is
emitted (the elementwise and k-quant kernels)."""

from kaio_ptx.emitter import PtxEmitter

BLOCK = 256


class Kernel(PtxEmitter):
    def __init__(self, name, params, doc):
        self.name, self.params, self.doc = name, params, doc
        super().__init__()
        self.shared = []

    def text(self):
        return self.entry_text(self.name, self.doc, [], self.params, [".maxntid %d, 1, 1" % BLOCK], self.shared)
