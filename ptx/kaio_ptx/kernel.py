"""The kernel class most generators use: one .entry whose launch facts are
fields a body may still change until text() is called."""

from kaio_ptx import manifest
from kaio_ptx.emitter import PtxEmitter


class Kernel(PtxEmitter):
    """block: threads (.maxntid).  shared_bytes: a kaio-shared-bytes
    annotation (dynamic shared bytes) unless None.  cols_per_block: a
    kaio-launch annotation (block and columns per block) unless None.
    annotations: more comment lines after those.  min_ctas: .minnctapersm
    (caps ptxas at 65536 / (block * min_ctas) registers); maxnreg: .maxnreg;
    directives: more lines after those.  shared: static shared declarations
    (one string or a list).  keys: the entry's selector keys for the
    manifest (kaio_ptx/manifest.py)."""

    def __init__(self, name, doc, params, block, shared_bytes=None, cols_per_block=None,
                 annotations=None, shared=None, min_ctas=0, keys=None):
        super().__init__()
        manifest.keys(name, **(keys or {}))
        self.name, self.doc, self.params, self.block = name, doc, params, block
        self.shared_bytes, self.cols_per_block = shared_bytes, cols_per_block
        self.annotations = annotations or []
        self.shared, self.min_ctas, self.maxnreg = shared, min_ctas, 0
        self.directives = []

    def text(self):
        ann = []
        if self.shared_bytes is not None:
            ann.append("// kaio-shared-bytes: %s %d" % (self.name, self.shared_bytes))
        if self.cols_per_block is not None:
            ann.append("// kaio-launch: %s block=%d cols_per_block=%d" % (self.name, self.block, self.cols_per_block))
        directives = [".maxntid %d, 1, 1" % self.block]
        if self.min_ctas:
            directives.append(".minnctapersm %d" % self.min_ctas)
        if self.maxnreg:
            directives.append(".maxnreg %d" % self.maxnreg)
        return self.entry_text(self.name, self.doc, ann + self.annotations, self.params,
                               directives + self.directives, self.shared)
