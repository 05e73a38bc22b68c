#include "l2_rotation.hpp"

#include <algorithm>

#include "errors.hpp"

namespace kaio_bench {
namespace {

// Operands start 256-byte aligned, as kaio_buffer_create's memory does: the
// ops' 16-byte vector paths and the tensor-core kernels need aligned operands.
constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

SetLayout plan_sets(const std::vector<uint64_t> &operand_bytes, uint64_t l2_bytes) {
  SetLayout l;
  for (const uint64_t bytes : operand_bytes) {
    l.offsets.push_back(l.set_stride);
    l.set_stride += align_up(bytes, kAlign);
  }
  // A working set under 2x L2 could be served partly from L2 on the next
  // launch; rotating through enough sets to cover 2x L2 evicts it first.
  if (l.set_stride < 2 * l2_bytes)
    l.sets = std::max<uint64_t>(2, (2 * l2_bytes + l.set_stride - 1) / l.set_stride);
  return l;
}

void replicate_first_set(kaio_buffer *arena, const SetLayout &layout, kaio_stream *stream) {
  for (uint64_t done = 1; done < layout.sets; done *= 2) {
    const uint64_t n = std::min(done, layout.sets - done);
    CHECK(
        kaio_buffer_copy(arena, done * layout.set_stride, arena, 0, n * layout.set_stride, stream));
  }
  CHECK(kaio_stream_synchronize(stream));
}

}  // namespace kaio_bench
