// Reading the annotations the PTX generators write before each entry, such
// as `// kaio-shared-bytes: <entry> <bytes>` or
// `// kaio-launch: <entry> block=256 cols_per_block=8`: the PTX is the one
// place that knows its tile sizes, so the host reads them rather than
// repeating them.
#pragma once

#include <cstdint>
#include <string>

namespace kaio {

// The text after "<entry> " on the `// kaio-<tag>: ` line for entry, or ""
// when the PTX has no such line.
std::string ptx_annotation(const char *ptx, const char *tag, const char *entry);

// The integer value of `key=<value>` in an annotation, or fallback.
int64_t annotation_value(const std::string &annotation, const char *key, int64_t fallback);

// The pair `key=<first>,<second>` in an annotation; false if absent.
bool annotation_pair(const std::string &annotation, const char *key, unsigned out[2]);

}  // namespace kaio
