// Lowering of a checked Kernel to PTX text (.version 7.0, .target sm_80).
// Every value gets a fresh virtual register, so no register allocation is
// done here; ptxas allocates. Each kernel becomes two entries:
//   map kernels:  <entry>_scalar (any views) and <entry>_vector (16-byte
//                 accesses; the host picks it when every plainly read or
//                 written view allows them, see vector_width);
//   row kernels:  <entry>_warp (one warp per row, 8 rows per 256-thread
//                 block) and <entry>_block (one 256-thread block per row),
//                 each with a _cached twin for rows of at most
//                 lanes * kRowSlotElems columns whose views allow 16-byte
//                 accesses: the row is read once, into registers.
// Parameters, in order: for each tensor parameter ptr (.u64), rows (.u32),
// cols (.u32), row_stride in elements (.u64); for each scalar its value
// (.f32, .s32, .u32); then err (.u64), the kernel's error flag.
#pragma once

#include <string>

#include "lang/ast.hpp"

namespace kaio::lang {

constexpr int kBlockThreads = 256;
constexpr int kWarpRowsPerBlock = kBlockThreads / 32;
// Elements of a row each lane of a _cached entry holds (per tensor read at
// (row, col)): a warp covers 1024 columns, a block 8192.
constexpr int kRowSlotElems = 32;

// The error flag (.u64) holds, for the lowest failing access site (red.max),
// (kSiteBase - site) << 34 | which << 32 | the index's value (as .u32),
// where which says which index failed; 0 when nothing failed.
constexpr unsigned kSiteBase = 0x10000;
constexpr unsigned kFlagFlat = 0, kFlagRow = 1, kFlagCol = 2;

// Elements per thread-unit of a map kernel's vector entry: 16 bytes of the
// widest element among the tensors read at (row, col) and the outputs.
int vector_width(const Kernel &k);

// "kaio_lang_<name>"; the entries append _scalar/_vector or _warp/_block.
std::string entry_base(const Kernel &k);

std::string lower_to_ptx(const Kernel &k);

}  // namespace kaio::lang
