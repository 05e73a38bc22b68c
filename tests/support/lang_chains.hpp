// Random long chains for the kernel-language fuzz harness: one kind of
// chain per program (+, *, the other binary operators, casts, comparisons,
// && and ||, prefix operators, nested calls, nested indexing) at a random
// length that is mostly around the expression-depth limit (48) and
// sometimes far beyond it (up to tens of thousands of links), with the
// depth of the tree it builds. Same seed, same program, on every platform.
#pragma once

#include <cstdint>
#include <string>

namespace kt {

struct RandomChain {
  std::string kind;    // e.g. "&&", "as", "call", "index"
  std::string source;  // a whole kernel, well typed
  int depth = 0;       // its deepest expression's tree depth
};

RandomChain random_chain(uint64_t seed);

}  // namespace kt
