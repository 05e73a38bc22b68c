#include "support/small_stack.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cstring>
#include <utility>

namespace kt {
namespace {

constexpr size_t kGuard = 64 * 1024;
constexpr unsigned char kPaint = 0xA5;

struct Job {
  std::function<void()> fn;
};

void *run_job(void *p) {
  static_cast<Job *>(p)->fn();
  return nullptr;
}

#ifdef KT_ASAN
#define KAIO_NO_ASAN __attribute__((no_sanitize_address))
#else
#define KAIO_NO_ASAN
#endif

// Reads stack bytes a finished thread left, which ASan may still poison.
KAIO_NO_ASAN size_t untouched_bytes(const unsigned char *low, size_t size) {
  size_t n = 0;
  while (n < size && low[n] == kPaint) ++n;
  return n;
}

}  // namespace

size_t run_on_small_stack(std::function<void()> fn, size_t stack_bytes) {
  void *map = mmap(nullptr, kGuard + stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EXPECT_NE(map, MAP_FAILED);
  if (map == MAP_FAILED) return 0;
  unsigned char *base = static_cast<unsigned char *>(map);
  EXPECT_EQ(mprotect(base, kGuard, PROT_NONE), 0);
  unsigned char *stack = base + kGuard;
  std::memset(stack, kPaint, stack_bytes);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  EXPECT_EQ(pthread_attr_setstack(&attr, stack, stack_bytes), 0);
  Job job{std::move(fn)};
  pthread_t t;
  const int rc = pthread_create(&t, &attr, run_job, &job);
  EXPECT_EQ(rc, 0);
  if (rc == 0) pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  const size_t used = stack_bytes - untouched_bytes(stack, stack_bytes);
  munmap(map, kGuard + stack_bytes);
  return used;
}

}  // namespace kt
