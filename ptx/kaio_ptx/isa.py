"""The .version and .target a module needs, from the instructions it uses.

A generator's preamble() without a version leaves a mark that cli.main
replaces with required(text): the highest PTX ISA version and target any
line of the module needs, by the table below, and never below FLOOR.  The
table holds the instructions our kernels use whose minimum is above the
floor (and the sm_80 ones, to say so), from the PTX ISA's "PTX ISA Notes"
and "Target ISA Notes" per instruction."""

import re

# libkaio's lowest: sm_80 devices, PTX ISA 7.0 (CUDA 11.0), which has
# mma.sync m16n8k16 bf16, cp.async, cvt.rn.bf16(x2).f32 and fma.rn.bf16x2.
FLOOR = ("7.0", "sm_80")

# (pattern on an instruction or directive, PTX ISA version, target).
# tests/ptx_isa_check.py holds the documented minimum of a sample line of each.
TABLE = (
    # sm_90a: architecture-specific features, which no later GPU runs.
    (r"^wgmma\.", "8.0", "sm_90a"),
    (r"^setmaxnreg\.", "8.0", "sm_90a"),
    # Bulk and tensor (TMA) copies, transaction counts, the async proxy.
    (r"^cp\.async\.bulk\.", "8.0", "sm_90"),
    (r"^prefetch\.tensormap", "8.0", "sm_90"),
    (r"^mbarrier\.(arrive\.)?expect_tx", "8.0", "sm_90"),
    (r"^fence\.proxy\.async", "8.0", "sm_90"),
    (r"^fence\.mbarrier_init", "8.0", "sm_90"),
    (r"^barrier\.cluster\.\w+\.(release|acquire|relaxed)", "8.0", "sm_90"),
    # Stores into a cluster peer's shared memory that complete on its mbarrier.
    (r"^st\.async\.", "8.1", "sm_90"),
    # Clusters (distributed shared memory) and the mbarrier waits of sm_90.
    (r"^barrier\.cluster\.", "7.8", "sm_90"),
    (r"^mapa\.", "7.8", "sm_90"),
    (r"\.shared::cluster", "7.8", "sm_90"),
    (r"^\.reqnctapercluster$", "7.8", "sm_90"),
    (r"^mbarrier\.try_wait(\.parity)?\.(acquire|relaxed)\.", "8.0", "sm_90"),
    (r"^mbarrier\.try_wait", "7.8", "sm_90"),
    # Programmatic dependent launch: let the next grid in, wait for the previous one.
    (r"^griddepcontrol\.", "7.8", "sm_90"),
    # bf16 arithmetic other than fma, and conversions from bf16.
    (r"^cvt\.(\w+\.)*f32\.bf16$", "7.8", "sm_90"),
    (r"^(add|sub|mul)\.rn\.bf16", "7.8", "sm_90"),
    # cp.async with an L2 prefetch size (.L2::64B/128B/256B) or cache hint.
    (r"^cp\.async\.c[ag]\.shared\.global\.L2::", "7.4", "sm_80"),
    (r"^createpolicy\.", "7.4", "sm_80"),
    # Within the floor; listed so that the table says what needs sm_80.
    (r"^mma\.sync\.aligned\.m16n8k\d+\..*bf16", "7.0", "sm_80"),
    (r"^cp\.async\.(ca|cg|commit_group|wait_group|wait_all)", "7.0", "sm_80"),
    (r"^ldmatrix\.", "6.5", "sm_75"),
)

_COMPILED = [(re.compile(p), v, t) for p, v, t in TABLE]
# What preamble() writes where the caller gives no version: replaced by cli.main.
MARK = "<derived>"
_GUARD = re.compile(r"^@!?%\w+\s+")


def version_key(version):
    return tuple(int(x) for x in version.split("."))


def target_key(target):
    """sm_90a above sm_90: it has all of sm_90 and the a-only instructions."""
    m = re.match(r"sm_(\d+)(a?)$", target)
    return (int(m.group(1)), m.group(2))


def opcodes(text):
    """The first word of every instruction or directive line, guards and
    comments removed; the module's own .version/.target lines are skipped."""
    for line in text.split("\n"):
        line = _GUARD.sub("", line.split("//")[0].strip())
        word = line.split(None, 1)[0].rstrip(";") if line else ""
        if word and not word.endswith(":") and word not in (".version", ".target", "{", "}"):
            yield word


def required(text, floor=FLOOR, table=None):
    """(version, target): the lowest that has every instruction in text
    (table: (pattern, version, target) rows, by default TABLE's)."""
    version, target = floor
    rows = _COMPILED if table is None else [(re.compile(p), v, t) for p, v, t in table]
    for word in set(opcodes(text)):
        for pattern, v, t in rows:
            if pattern.search(word):
                version = max(version, v, key=version_key)
                target = max(target, t, key=target_key)
    return version, target


def resolve(text):
    """text with preamble()'s mark replaced by the version and target its
    instructions need; text without the mark unchanged."""
    if MARK not in text:
        return text
    version, target = required(text)
    return text.replace(".version " + MARK, ".version " + version, 1).replace(
        ".target " + MARK, ".target " + target, 1)
