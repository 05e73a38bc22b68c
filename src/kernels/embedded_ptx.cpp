#include "kernels/embedded_ptx.hpp"

#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "kernels/inflate.hpp"

namespace kaio {
namespace {

// One per module, filled once: a program pays for (and holds) only the
// modules whose kernels it uses.
struct Slot {
  std::once_flag once;
  std::unique_ptr<char[]> text;
};

// Never destroyed, so that a static destructor that still resolves a
// kernel at exit finds its text.
Slot *slots() {
  static Slot *const s = new Slot[kEmbeddedModuleCount];
  return s;
}

char *inflate_module(const EmbeddedModule &m) {
  std::unique_ptr<char[]> text(new (std::nothrow) char[m.size + 1]);
  if (!text) return nullptr;
  if (!inflate_raw(reinterpret_cast<const unsigned char *>(m.deflated), m.deflated_size,
                   reinterpret_cast<unsigned char *>(text.get()), m.size))
    return nullptr;
  text[m.size] = '\0';
  return text.release();
}

}  // namespace

const EmbeddedModule *embedded_module(const char *name) {
  for (size_t i = 0; i < kEmbeddedModuleCount; ++i)
    if (std::strcmp(kEmbeddedModules[i].name, name) == 0) return &kEmbeddedModules[i];
  return nullptr;
}

const char *embedded_ptx(const char *name) {
  if (const EmbeddedModule *m = embedded_module(name)) {
    Slot &slot = slots()[m - kEmbeddedModules];
    // A failed inflate (out of memory; compiled-in data that does not
    // inflate is not expected) throws out of call_once, so a later call
    // tries again; the caller reports the module missing.
    try {
      std::call_once(slot.once, [&] {
        char *text = inflate_module(*m);
        if (!text) throw std::bad_alloc();
        slot.text.reset(text);
      });
    } catch (const std::bad_alloc &) {
      return nullptr;
    }
    return slot.text.get();
  }
  return nullptr;
}

}  // namespace kaio
