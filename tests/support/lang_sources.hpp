// The kernel-language examples (examples/lang/*.kaio), read from the source
// tree so the tests, the bench and the README share one copy of each.
#pragma once

#include <string>

namespace kt {

// Contents of examples/lang/<name>.kaio (or of $KAIO_LANG_EXAMPLES/<name>.kaio);
// fails the calling test if missing.
std::string lang_example(const std::string &name);

}  // namespace kt
