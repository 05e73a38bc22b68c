#include "ops/plan_log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/call_context.hpp"
#include "core/env.hpp"
#include "kernels/module_cache.hpp"

namespace kaio {
namespace {

struct Pending {
  int depth = 0;        // planners open on this thread
  std::string kernels;  // "name (why); name (why)"
};
thread_local Pending t_pending;

bool creates_op(const char *name) {
  static constexpr char kPrefix[] = "kaio_op_create_";
  return std::strncmp(name, kPrefix, sizeof kPrefix - 1) == 0;
}

}  // namespace

bool log_enabled() {
  static const bool on = [] {
    const char *v = read_env("KAIO_LOG");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void log_kernel(const kaio_device *device, cu::CUfunction f, const std::string &why) {
  log_kernel(device, f, why.c_str());
}

void log_kernel(const kaio_device *device, cu::CUfunction f, const char *why) {
  if (!log_enabled() || t_pending.depth == 0) return;
  std::string &k = t_pending.kernels;
  if (!k.empty()) k += "; ";
  k += device->modules->kernel_name(f);
  k += " (";
  k += why;
  k += ")";
}

kaio_status log_plan(const std::function<kaio_status()> &plan,
                     const std::function<std::string()> &subject) {
  if (!log_enabled()) return plan();
  ++t_pending.depth;
  kaio_status s;
  try {
    s = plan();
  } catch (...) {
    --t_pending.depth;
    t_pending.kernels.clear();
    throw;
  }
  if (--t_pending.depth > 0) return s;
  std::string kernels;
  kernels.swap(t_pending.kernels);
  if (s == KAIO_OK && creates_op(api_name())) {
    const std::string line = "kaio: " + std::string(api_name()) + ": " + subject() + " -> " +
                             (kernels.empty() ? "(no kernel)" : kernels) + "\n";
    std::fputs(line.c_str(), stderr);
  }
  return s;
}

}  // namespace kaio
