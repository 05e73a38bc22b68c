// PTX text compiled into the library by src/kernels/embed_ptx.py, raw-deflate
// compressed; each module is inflated the first time it is asked for.
#pragma once

#include <cstddef>

#include "kernels/ptx_isa.hpp"

namespace kaio {

// One module as embed_ptx.py writes it (the generated embedded_ptx_data.cpp),
// with its `.version` and `.target` lines as read from its text, so the
// driver a module needs is derived from the module itself.
struct EmbeddedModule {
  const char *name;
  const char *deflated;  // raw deflate stream
  size_t deflated_size;
  size_t size;  // of the PTX text
  PtxIsa isa;
  const char *target;  // "sm_80", "sm_90", "sm_90a"
};
extern const EmbeddedModule kEmbeddedModules[];
extern const size_t kEmbeddedModuleCount;

// Module `name` (a file stem in <build>/ptx/), or nullptr.
const EmbeddedModule *embedded_module(const char *name);

// The PTX of module `name`, or nullptr when there is no such module (or,
// never expected, its data does not inflate). The text lives until the
// process exits.
const char *embedded_ptx(const char *name);

}  // namespace kaio
