// The driver's CUDA-graph capture API, reached directly (dlsym on the loaded
// libcuda) the way an application mixing kaio with its own CUDA code would.
// Members are null when the driver lacks them.
#pragma once

#include <dlfcn.h>

namespace kt {

struct GraphApi {
  int (*begin)(void *stream, int mode) = nullptr;
  int (*end)(void *stream, void **graph) = nullptr;
  int (*instantiate)(void **exec, void *graph, unsigned long long flags) = nullptr;
  int (*launch)(void *exec, void *stream) = nullptr;
  int (*exec_destroy)(void *exec) = nullptr;
  int (*graph_destroy)(void *graph) = nullptr;
  int (*push)(void *ctx) = nullptr;
  int (*pop)(void **ctx) = nullptr;
};

inline GraphApi graph_api() {
  GraphApi g;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return g;
  g.begin = reinterpret_cast<decltype(g.begin)>(dlsym(lib, "cuStreamBeginCapture_v2"));
  g.end = reinterpret_cast<decltype(g.end)>(dlsym(lib, "cuStreamEndCapture"));
  g.instantiate = reinterpret_cast<decltype(g.instantiate)>(dlsym(lib, "cuGraphInstantiateWithFlags"));
  g.launch = reinterpret_cast<decltype(g.launch)>(dlsym(lib, "cuGraphLaunch"));
  g.exec_destroy = reinterpret_cast<decltype(g.exec_destroy)>(dlsym(lib, "cuGraphExecDestroy"));
  g.graph_destroy = reinterpret_cast<decltype(g.graph_destroy)>(dlsym(lib, "cuGraphDestroy"));
  g.push = reinterpret_cast<decltype(g.push)>(dlsym(lib, "cuCtxPushCurrent_v2"));
  g.pop = reinterpret_cast<decltype(g.pop)>(dlsym(lib, "cuCtxPopCurrent_v2"));
  return g;
}

// Pops the context pushed for raw driver calls (kaio leaves none current).
struct PopContext {
  GraphApi &api;
  ~PopContext() {
    void *ctx = nullptr;
    api.pop(&ctx);
  }
};

}  // namespace kt
