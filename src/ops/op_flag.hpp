// The device-side error flag of the built-in ops. A kernel that finds device
// data it must not act on (a KV-cache slot past the cache, a page id past
// the pool) skips that work and raises this flag with an atomic max of
//   fault code << 56 | where (24 bits) << 32 | the offending value (32 bits);
// the next kaio_stream_synchronize (or kaio_event_synchronize) on a stream
// that launched such a kernel reports it. One flag per device serves every
// op: it is allocated by the first plan that needs it (module-load time,
// never at launch), so a one-shot call allocates nothing in steady state.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>
#include <memory>

#include "runtime/error_flag.hpp"
#include "runtime/stream.hpp"

namespace kaio {

// The fault codes (bits 63..56), as ptx/kaio_ptx/op_fault.py writes them.
enum class OpFault : uint32_t {
  kv_slot = 1,  // kv_cache_write: slot_mapping[where] = value >= the cache's rows
  seq_len = 2,  // paged attention: seq_lens[where] = value outside [0, the op's capacity]
  page_id = 3,  // paged attention: block_table row where holds page id value >= num_pages
  cu_q = 4,     // varlen: cu_seqlens_q[where + 1] = value breaks the sums or max_seqlen_q
  cu_k = 5,     // varlen: the same of cu_seqlens_k and max_seqlen_k
};

// The device's op flag, allocated on first use. Thread-safe.
kaio_status device_op_flag(kaio_device *device, std::shared_ptr<ErrorFlag> *out);

// After a successful launch of a kernel that can raise `flag` on `stream`.
inline void note_op_flag(kaio_stream *stream, const std::shared_ptr<ErrorFlag> &flag) {
  stream->error_flags->note(flag);
}

}  // namespace kaio
