// Runs code on a thread whose whole stack (thread descriptor and TLS
// included, as glibc places them) is a given size, with a PROT_NONE guard
// below it so an overflow faults, and reports how much of it was touched:
// for compiling deep kernel-language expressions on a small stack.
#pragma once

#include <cstddef>
#include <functional>

#include "support/sanitizers.hpp"

namespace kt {

// 256 KiB; 1 MiB under AddressSanitizer, whose redzones make the
// compiler's frames about five times larger (~250 KiB at depth 48).
constexpr size_t kSmallStack = kAsan ? 1024 * 1024 : 256 * 1024;

// Runs fn to completion on such a thread; returns how many bytes of its
// stack were ever touched (0, with a test failure, if it could not start).
size_t run_on_small_stack(std::function<void()> fn, size_t stack_bytes = kSmallStack);

}  // namespace kt
