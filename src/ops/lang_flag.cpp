// The message of a kernel-language bounds flag: which kernel, which read
// (tensor, source position and caret), which index and its value.
#include <cinttypes>
#include <climits>
#include <cstdio>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "lang/diagnostic.hpp"
#include "lang/lower.hpp"
#include "ops/lang_kernel.hpp"

namespace kaio {

kaio_status LangErrorFlag::report(uint64_t value) const {
  const lang::Kernel &k = compiled_->kernel;
  const uint32_t code = static_cast<uint32_t>(value >> 34);
  const uint32_t which = static_cast<uint32_t>(value >> 32) & 3;
  const uint32_t index = static_cast<uint32_t>(value);
  const uint32_t site = lang::kSiteBase - code;
  if (code == 0 || code > lang::kSiteBase || site >= k.sites.size() || which > lang::kFlagCol)
    return fail(KAIO_ERROR_INTERNAL,
                "%s: kernel '%s' left error flag 0x%016" PRIx64 ". Please report this.", api_name(),
                k.name.c_str(), value);
  const lang::AccessSite &s = k.sites[site];
  const char *what = which == lang::kFlagFlat  ? "index"
                     : which == lang::kFlagRow ? "row index"
                                               : "column index";
  char shown[64];
  if (index > INT32_MAX)  // a negative i32 index, or a huge u32 one
    std::snprintf(shown, sizeof shown, "%" PRId32 " (%" PRIu32 " as u32)",
                  static_cast<int32_t>(index), index);
  else
    std::snprintf(shown, sizeof shown, "%" PRIu32, index);
  lang::Diagnostic d{s.pos, std::string(what) + " " + shown + " out of range for tensor '" +
                                k.params[s.param].name + "'; the read was skipped and gave 0"};
  return fail(KAIO_ERROR_KERNEL_BOUNDS,
              "%s: kernel '%s' read outside a view: %s\nFix the index or pass a larger view.",
              api_name(), k.name.c_str(), lang::format_diagnostic(source_, d).c_str());
}

}  // namespace kaio
