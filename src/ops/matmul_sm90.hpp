// The Hopper matmul path: wgmma fed by TMA (ptx/gen_matmul_sm90.py). A and
// B reach the kernel as tensor maps encoded from the views at each launch.
#pragma once

#include <string>

#include "ops/matmul.hpp"

namespace kaio {

// AUTO's plan where check_family(matmul_sm90) passed; `why` is its reason,
// for KAIO_LOG.
kaio_status plan_matmul_sm90(kaio_device *device, MatmulPlan *plan, const std::string &why);

// The two halves of a launch (prepare_matmul, enqueue_matmul): A's and B's
// tensor maps from the checked views, then the kernel (and split-K's
// reduction).
kaio_status encode_matmul_sm90_maps(const MatmulPlan &plan, MatmulViews *views);
kaio_status enqueue_matmul_sm90(const MatmulPlan &plan, kaio_stream *stream,
                                const MatmulViews &views);

}  // namespace kaio
