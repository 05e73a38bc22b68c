/* kaio.hpp: a header-only C++ companion to kaio.h. Not part of the ABI: it
 * only calls the C functions, so it works with any libkaio of the same major
 * version, whatever compiler built the library.
 *
 * What it adds:
 *   - one std::unique_ptr type per handle, whose deleter calls the matching
 *     kaio_*_destroy (kaio::device_ptr, kaio::buffer_ptr, ...). Ownership is
 *     the C API's: destroying a parent early is safe (children keep it alive);
 *   - kaio::error and kaio::check(), which turn a kaio_status into an
 *     exception carrying the status and kaio_last_error()'s text, read on
 *     the thread that made the failing call (only when exceptions are on).
 *
 * Thread safety is that of the wrapped handles (see kaio.h). C++11 or later.
 */
#ifndef KAIO_HPP
#define KAIO_HPP

#ifndef __cplusplus
#error "kaio.hpp is for C++ only; C code includes kaio/kaio.h"
#endif

#include <kaio/kaio.h>

#include <memory>
#include <string>
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#include <stdexcept>
#define KAIO_HPP_EXCEPTIONS 1
#endif

namespace kaio {

struct device_deleter { void operator()(kaio_device *p) const { kaio_device_destroy(p); } };
struct stream_deleter { void operator()(kaio_stream *p) const { kaio_stream_destroy(p); } };
struct event_deleter { void operator()(kaio_event *p) const { kaio_event_destroy(p); } };
struct buffer_deleter { void operator()(kaio_buffer *p) const { kaio_buffer_destroy(p); } };
struct op_deleter { void operator()(kaio_op *p) const { kaio_op_destroy(p); } };
struct module_deleter { void operator()(kaio_module *p) const { kaio_module_destroy(p); } };
struct kernel_deleter { void operator()(kaio_kernel *p) const { kaio_kernel_destroy(p); } };

typedef std::unique_ptr<kaio_device, device_deleter> device_ptr;
typedef std::unique_ptr<kaio_stream, stream_deleter> stream_ptr;
typedef std::unique_ptr<kaio_event, event_deleter> event_ptr;
typedef std::unique_ptr<kaio_buffer, buffer_deleter> buffer_ptr;
typedef std::unique_ptr<kaio_op, op_deleter> op_ptr;
typedef std::unique_ptr<kaio_module, module_deleter> module_ptr;
typedef std::unique_ptr<kaio_kernel, kernel_deleter> kernel_ptr;

#ifdef KAIO_HPP_EXCEPTIONS
/* A failed call: status() is the kaio_status, what() the library's message
 * ("kaio_buffer_create: ..."), copied when the error was raised. */
class error : public std::runtime_error {
 public:
    error(kaio_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}
    kaio_status status() const noexcept { return status_; }

 private:
    kaio_status status_;
};

/* Throws kaio::error unless status is KAIO_OK. Call it right after the C
 * call, on the same thread: the message is that thread's last error. */
inline void check(kaio_status status) {
    if (status != KAIO_OK)
        throw error(status, std::string(kaio_status_name(status)) + ": " + kaio_last_error());
}
#endif

}  // namespace kaio

#endif /* KAIO_HPP */
