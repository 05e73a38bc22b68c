// A small raw-DEFLATE (RFC 1951) decoder for the built-in PTX, which the
// library carries compressed (src/kernels/embed_ptx.py; 14.8 MB of text is
// 2.6 MB of deflate). Written here so that libkaio needs no zlib.
#pragma once

#include <cstddef>

namespace kaio {

// Decompresses the raw deflate stream `in` (no zlib or gzip header) into
// `out`, which it must fill exactly. False on a malformed or truncated
// stream, or one whose output is not `out_size` bytes; never reads or
// writes out of bounds.
bool inflate_raw(const unsigned char *in, size_t in_size, unsigned char *out, size_t out_size);

}  // namespace kaio
