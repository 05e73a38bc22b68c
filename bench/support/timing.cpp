#include "timing.hpp"

#include <algorithm>

#include "errors.hpp"

namespace kaio_bench {
namespace {

Event make_event(kaio_device *device) {
  kaio_event *e = nullptr;
  CHECK(kaio_event_create(&e, device, KAIO_EVENT_DEFAULT));
  return Event(e);
}

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Timer::Timer(kaio_device *device, kaio_stream *stream, int iters)
    : stream_(stream), spinner_(device) {
  for (int i = 0; i < iters; ++i) {
    starts_.push_back(make_event(device));
    ends_.push_back(make_event(device));
  }
}

// All pairs are enqueued behind the spinner before any is read, so each pair
// brackets GPU time only.
double Timer::median_us(const std::function<void(uint64_t set)> &launch, uint64_t sets) {
  uint64_t set = 0;
  auto next = [&] { set = (set + 1) % sets; };
  for (int i = 0; i < kWarmups; ++i, next()) launch(set);
  // Generous: enqueueing a launch and two records takes a few microseconds
  // (a cuBLAS call somewhat more).
  spinner_.enqueue(stream_, 1000000 + 100000 * starts_.size());
  for (size_t i = 0; i < starts_.size(); ++i, next()) {
    CHECK(kaio_event_record(starts_[i].get(), stream_));
    launch(set);
    CHECK(kaio_event_record(ends_[i].get(), stream_));
  }
  CHECK(kaio_stream_synchronize(stream_));

  std::vector<double> ms;
  for (size_t i = 0; i < starts_.size(); ++i) {
    float t = 0;
    CHECK(kaio_event_elapsed_ms(&t, starts_[i].get(), ends_[i].get()));
    ms.push_back(t);
  }
  return median(ms) * 1e3;
}

double Timer::burst_us(const std::function<void(uint64_t set)> &launch, uint64_t sets,
                       int burst) {
  const uint64_t b = static_cast<uint64_t>(burst);
  return median_us([&](uint64_t set) {
           for (uint64_t i = 0; i < b; ++i) launch((set * b + i) % sets);
         }, sets) / burst;
}

}  // namespace kaio_bench
