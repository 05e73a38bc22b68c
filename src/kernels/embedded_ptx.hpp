// PTX text compiled into the library by src/kernels/embed_ptx.py, raw-deflate
// compressed; each module is inflated the first time it is asked for.
#pragma once

#include <cstddef>

namespace kaio {

// The PTX of module `name` (a file stem in ptx/), or nullptr when there is
// no such module (or, never expected, its data does not inflate). The text
// lives until the process exits.
const char *embedded_ptx(const char *name);

// One module as embed_ptx.py writes it (the generated embedded_ptx_data.cpp).
struct EmbeddedModule {
  const char *name;
  const char *deflated;    // raw deflate stream
  size_t deflated_size;
  size_t size;             // of the PTX text
};
extern const EmbeddedModule kEmbeddedModules[];
extern const size_t kEmbeddedModuleCount;

}  // namespace kaio
