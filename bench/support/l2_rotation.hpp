// Device memory laid out so that timed launches never find their operands in
// L2: the operands of one launch are packed into a "set", and the set repeated
// until the sets together cover 2 x L2. Launches rotate through the sets, so
// each one reads data that the previous launches have evicted from L2.
#pragma once

#include <kaio/kaio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kaio_bench {

struct SetLayout {
  std::vector<uint64_t> offsets;  // of each operand within a set
  uint64_t set_stride = 0;        // bytes from one set to the next
  uint64_t sets = 1;

  // Byte offset of `operand` in set `set`.
  uint64_t offset(uint64_t set, size_t operand) const {
    return set * set_stride + offsets[operand];
  }
};

// Packs operands of these sizes in order, each 256-byte aligned, and picks
// the number of sets: 1 when one set already covers 2 x L2, else enough (at
// least 2) to cover it.
SetLayout plan_sets(const std::vector<uint64_t> &operand_bytes, uint64_t l2_bytes);

// Once set 0 holds its data, copies it to every other set on the device,
// doubling the filled range each time (log2(sets) copies rather than a host
// upload per set), and waits for the copies.
void replicate_first_set(kaio_buffer *arena, const SetLayout &layout, kaio_stream *stream);

}  // namespace kaio_bench
