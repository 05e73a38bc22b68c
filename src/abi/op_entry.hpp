// What every op entry point shares: reading a caller's desc, creating an op
// handle (kaio_op_create_*) and a one-shot call. Plan is a family's plan
// type (ops/plan.hpp): plan() at create time, run() at launch.
#pragma once

#include <kaio/kaio.h>

#include <cstring>
#include <memory>
#include <type_traits>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/op_handle.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

namespace kaio {

// Copies a caller's desc of this or any later, larger version (fields this
// version does not know are ignored). init names the desc's init function.
template <class Desc>
kaio_status read_desc(const char *init, const Desc *in, Desc *out) {
  if (!in) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'desc' is NULL.", api_name());
  if (in->struct_size < sizeof(Desc))
    return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                "%s: desc->struct_size is %u but must be at least %zu; initialise the desc with "
                "%s.",
                api_name(), in->struct_size, sizeof(Desc), init);
  std::memcpy(out, in, sizeof *out);
  return KAIO_OK;
}

// A view argument of a one-shot call; an optional one may be NULL (an
// absent view, with a NULL buffer).
struct NamedView {
  const char *name;
  const kaio_tensor *view;
  bool optional = false;
};

// Fails on the first NULL view that is not optional: "argument '<name>' is
// NULL; pass a kaio_tensor<hint>."; otherwise copies the views into out.
kaio_status gather_views(const NamedView *views, size_t count, kaio_tensor *out,
                         const char *hint = "");

template <size_t N>
kaio_status require_views(const NamedView (&views)[N]) {
  kaio_tensor ignored[N];
  return gather_views(views, N, ignored);
}

// kaio_op_create_*: checks out and device, lets fill set up the plan in the
// op (fill may fail, after those checks), plans it as a prepared plan (it
// may own a workspace) and publishes the op.
template <class Plan, class Fill>
kaio_status create_op(kaio_op **out, kaio_device *device, Fill &&fill) {
  if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", api_name());
  *out = nullptr;
  KAIO_TRY(resolve_handle("device", device));
  auto op = std::make_unique<kaio_op>();
  Plan &plan = op->body.template emplace<Plan>();
  KAIO_TRY(fill(&plan));
  plan.prepared = true;
  KAIO_TRY(plan.plan(device));
  return publish_op(out, device, std::move(op));
}

template <class Plan>
kaio_status create_op(kaio_op **out, kaio_device *device, const Plan &plan) {
  return create_op<Plan>(out, device, [&](Plan *p) {
    *p = plan;
    return KAIO_OK;
  });
}

// What a one-shot call takes from its views once the stream is resolved and
// the views are known not to be NULL (dims left at 0 in a desc, a dtype):
// complete(stream, tensors, count, &plan), or complete(&plan) for one
// that has what it needs. The default takes nothing.
struct FromViews {
  template <class Plan>
  kaio_status operator()(Plan *) const {
    return KAIO_OK;
  }
};

template <class Plan, class Complete>
kaio_status complete_plan(Complete &&complete, const kaio_stream *stream,
                          const kaio_tensor *tensors, size_t count, Plan *plan) {
  if constexpr (std::is_invocable_v<Complete, Plan *>)
    return complete(plan);
  else
    return complete(stream, tensors, count, plan);
}

// A one-shot call on a list of tensors: resolves the stream, completes the
// plan, plans it on the stack (an unprepared plan never allocates) and runs
// it.
template <class Plan, class Complete = FromViews>
kaio_status one_shot(kaio_stream *stream, const kaio_tensor *tensors,
                     size_t count, Plan plan, Complete &&complete = {}) {
  KAIO_TRY(resolve_handle("stream", stream));
  KAIO_TRY(complete_plan(complete, stream, tensors, count, &plan));
  KAIO_TRY(plan.plan(stream->device));
  return plan.run(stream, tensors, count);
}

// A one-shot call on view arguments: the same, checking that no view but an
// optional one is NULL (after the stream) and gathering them in order.
template <class Plan, size_t N, class Complete = FromViews>
kaio_status one_shot(kaio_stream *stream, const NamedView (&views)[N], Plan plan,
                     Complete &&complete = {}, const char *hint = "") {
  KAIO_TRY(resolve_handle("stream", stream));
  kaio_tensor tensors[N];
  KAIO_TRY(gather_views(views, N, tensors, hint));
  KAIO_TRY(complete_plan(complete, stream, tensors, N, &plan));
  KAIO_TRY(plan.plan(stream->device));
  return plan.run(stream, tensors, N);
}

}  // namespace kaio
