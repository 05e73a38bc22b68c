// PTX text compiled into the library by src/kernels/embed_ptx.py.
#pragma once

namespace kaio {

// The PTX of module `name` (a file stem in ptx/), or nullptr.
const char *embedded_ptx(const char *name);

}  // namespace kaio
