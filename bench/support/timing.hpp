// The timing method both benches share: warm-ups, then one event pair per
// timed launch, all queued behind a Spinner, and the median of the pairs.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "handles.hpp"
#include "spinner.hpp"

namespace kaio_bench {

// Untimed launches before the timed ones, so that one-time costs stay out of
// the median.
constexpr int kWarmups = 5;

// The median of `values` (not empty): unlike the mean, one launch slowed by
// something else on the machine barely moves it.
double median(std::vector<double> values);

// Times launches on one stream. The events of all `iters` timed launches are
// created once, up front, and reused by every measurement.
class Timer {
 public:
  Timer(kaio_device *device, kaio_stream *stream, int iters);

  // launch(set) enqueues one launch on the stream that reads and writes copy
  // `set` of its operands; successive launches rotate through `sets` copies.
  // Returns the median time of one launch in microseconds.
  double median_us(const std::function<void(uint64_t set)> &launch, uint64_t sets);

  // The time per launch of `burst` back-to-back launches (one event pair per
  // burst, the median over the timed bursts): what a chain of dependent kernels
  // (programmatic dependent launch) costs. Launch b of burst s reads set
  // (s * burst + b) % sets, so consecutive launches never share a set.
  double burst_us(const std::function<void(uint64_t set)> &launch, uint64_t sets, int burst);

 private:
  kaio_stream *stream_;
  Spinner spinner_;
  std::vector<Event> starts_, ends_;
};

}  // namespace kaio_bench
