// The built-in ops' device-side error flag and its messages.
#include <cinttypes>
#include <mutex>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/op_flag.hpp"

namespace kaio {
namespace {

class OpErrorFlag final : public ErrorFlag {
 public:
  kaio_status report(uint64_t value) const override {
    const uint32_t code = static_cast<uint32_t>(value >> 56);
    const uint32_t where = static_cast<uint32_t>(value >> 32) & 0xffffffu;
    const uint32_t what = static_cast<uint32_t>(value);
    const char *more = where == 0xffffffu ? " (or a later token)" : "";
    switch (static_cast<OpFault>(code)) {
      case OpFault::kv_slot:
        return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                    "%s: a KV-cache write on this stream found slot_mapping[%" PRIu32 "]%s = "
                    "%" PRIu32 ", past the last row of its caches; that token was not written. "
                    "A slot is page * page_size + offset and must be below the caches' rows "
                    "(num_pages * page_size), or negative to skip the token.",
                    api_name(), where, more, what);
      case OpFault::seq_len:
        return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                    "%s: a paged attention call on this stream found seq_lens[%" PRIu32 "] = %" PRId32
                    ", outside [0, the op's key capacity] (desc->seq_k, or max_seqlen_k for a "
                    "chunked prefill); the length was clamped and that sequence's O and LSE were "
                    "written as NaN. Pass lengths within the capacity the op was made for.",
                    api_name(), where, static_cast<int32_t>(what));
      case OpFault::page_id:
        return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                    "%s: a paged attention call on this stream found page id %" PRId32
                    " in block_table row %" PRIu32 ", outside [0, num_pages); page 0 was read "
                    "instead and that sequence's O and LSE were written as NaN. Fix the block "
                    "table: every page a sequence's length reaches must be a page of the pools.",
                    api_name(), static_cast<int32_t>(what), where);
      case OpFault::cu_q:
      case OpFault::cu_k: {
        const char *side = static_cast<OpFault>(code) == OpFault::cu_q ? "q" : "k";
        return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                    "%s: a varlen attention call on this stream found cu_seqlens_%s[%" PRIu32
                    "] = %" PRId32 " (the end of sequence %" PRIu32 "), which is below its start, "
                    "past total_%s, or more than max_seqlen_%s past its start; that sequence was "
                    "treated as empty (its output rows were not written). Pass prefix sums from 0 "
                    "that rise by at most max_seqlen_%s per sequence up to total_%s.",
                    api_name(), side, where + 1, static_cast<int32_t>(what), where, side, side,
                    side, side);
      }
    }
    return fail(KAIO_ERROR_INTERNAL,
                "%s: a built-in kernel left error flag 0x%016" PRIx64 ". Please report this.",
                api_name(), value);
  }
};

std::mutex g_flag_mu;

}  // namespace

kaio_status device_op_flag(kaio_device *device, std::shared_ptr<ErrorFlag> *out) {
  std::lock_guard<std::mutex> lock(g_flag_mu);
  if (!device->op_flag) {
    auto flag = std::make_shared<OpErrorFlag>();
    KAIO_TRY(flag->allocate(device, false));
    device->op_flag = std::move(flag);
  }
  *out = device->op_flag;
  return KAIO_OK;
}

}  // namespace kaio
