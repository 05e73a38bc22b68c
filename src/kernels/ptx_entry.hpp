// One kernel's PTX out of a module file: the module-scope text (version,
// target, shared and global declarations, device functions) plus that one
// entry. Built-in modules are JIT-compiled per kernel this way, so a program
// pays the driver's JIT only for the kernels it uses: the Hopper matmul file
// alone holds 18 kernels and takes tens of seconds to compile whole.
#pragma once

#include <string>

namespace kaio {

// The module text with every `.entry` definition but `entry`'s removed, or
// "" when the module has no such entry.
std::string ptx_single_entry(const char *ptx, const char *entry);

}  // namespace kaio
