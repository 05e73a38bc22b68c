// PTX text compiled into the library by src/kernels/embed_ptx.py.
#pragma once

#include "kernels/ptx_isa.hpp"

namespace kaio {

// A module as embedded: its text, and its `.version` and `.target` lines as
// embed_ptx.py read them from that text.
struct EmbeddedModule {
  const char *ptx;
  PtxIsa isa;
  const char *target;  // "sm_80", "sm_90", "sm_90a"
};

// Module `name` (a file stem in ptx/), or nullptr.
const EmbeddedModule *embedded_module(const char *name);

// The PTX of module `name`, or nullptr.
const char *embedded_ptx(const char *name);

}  // namespace kaio
