// Just enough of a PTX reader for the fake driver: finds the directives the
// real JIT insists on, and lays out each entry's parameters the way the
// driver lays out a packed argument buffer. It does not compile anything.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kaio::fake::ptx {

struct Param {
  size_t offset = 0;
  size_t size = 0;
  size_t align = 1;
};

struct Entry {
  std::string name;
  std::vector<Param> params;
  size_t param_bytes = 0;           // end of the last parameter, no tail padding
  unsigned maxntid = 0;             // product of .maxntid; 0 when absent
  unsigned reqntid[3] = {0, 0, 0};  // .reqntid x, y, z; all 0 when absent
  unsigned cluster[3] = {0, 0, 0};  // .reqnctapercluster x, y, z; all 0 when absent
  // Static .shared bytes: the entry's own declarations plus the module-scope
  // ones it names (.extern .shared arrays are dynamic and count nothing).
  size_t static_shared_bytes = 0;
};

struct Module {
  int version = 0;             // .version as major * 10 + minor: "8.0" -> 80
  int target_sm = 0;           // .target sm_90a -> 90
  bool arch_specific = false;  // the "a" suffix: runs on exactly that SM only
  std::vector<Entry> entries;

  const Entry *find(std::string_view name) const;
};

// How the real driver classifies a rejected image.
enum class Failure {
  none,
  not_ptx,  // no .version directive: the driver does not recognise the format
  invalid,  // ptxas rejects it
};

struct Result {
  Failure failure = Failure::none;
  std::string log;  // ptxas-style message when failure != none
  Module module;
};

// Parses PTX text. A line containing KAIO_FAKE_JIT_ERROR (comments included,
// so tests can inject one with "// KAIO_FAKE_JIT_ERROR") fails the parse.
Result parse(std::string_view text);

}  // namespace kaio::fake::ptx
