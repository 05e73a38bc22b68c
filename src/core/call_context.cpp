#include "core/call_context.hpp"

namespace kaio {
namespace {

// A plain pointer: no construction, no allocation, so setting it cannot fail.
thread_local const char *t_api_name = nullptr;

}  // namespace

const char *api_name() noexcept { return t_api_name ? t_api_name : "libkaio"; }

ApiCall::ApiCall(const char *name) noexcept : previous_(t_api_name) { t_api_name = name; }

ApiCall::~ApiCall() { t_api_name = previous_; }

}  // namespace kaio
