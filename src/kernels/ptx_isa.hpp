// PTX ISA versions and the CUDA drivers whose JIT first loads them: the one
// place that rule lives. A driver loads PTX whose .version is at most the ISA
// of its CUDA version; an older driver refuses it with
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION. (Release notes of the CUDA toolkits and
// the PTX ISA manual's version table; r-numbers are the Linux driver branches.)
#pragma once

namespace kaio {

struct PtxIsa {
  int major = 0;
  int minor = 0;
};

struct IsaDriver {
  PtxIsa isa;
  int cuda;           // as cuDriverGetVersion reports it: 1000 * major + 10 * minor
  int driver_branch;  // the Linux driver branch that first ships that CUDA version
};

inline constexpr IsaDriver kIsaDrivers[] = {
    {{7, 0}, 11000, 450}, {{7, 1}, 11010, 455}, {{7, 2}, 11020, 460}, {{7, 3}, 11030, 465},
    {{7, 4}, 11040, 470}, {{7, 5}, 11050, 495}, {{7, 6}, 11060, 510}, {{7, 7}, 11070, 515},
    {{7, 8}, 11080, 520}, {{8, 0}, 12000, 525}, {{8, 1}, 12010, 530}, {{8, 2}, 12020, 535},
    {{8, 3}, 12030, 545}, {{8, 4}, 12040, 550}, {{8, 5}, 12050, 555}, {{8, 6}, 12070, 565},
    {{8, 7}, 12080, 570}, {{8, 8}, 12090, 575}, {{9, 0}, 13000, 580},
};

// The row for `isa`, or nullptr for an ISA the table does not know (the
// embedded PTX is checked against it at build time).
constexpr const IsaDriver *isa_driver(PtxIsa isa) {
  for (const IsaDriver &row : kIsaDrivers)
    if (row.isa.major == isa.major && row.isa.minor == isa.minor) return &row;
  return nullptr;
}

constexpr bool isa_known(PtxIsa isa) {
  for (const IsaDriver &row : kIsaDrivers)
    if (row.isa.major == isa.major && row.isa.minor == isa.minor) return true;
  return false;
}

}  // namespace kaio
