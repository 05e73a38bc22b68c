#!/usr/bin/env python3
"""The library's raw-deflate decoder (tests/inflate_tool) against Python's
zlib: every stream zlib writes (levels 0-9, every strategy, small and large
windows and memory levels; random, text-like and repetitive data; every
built-in PTX file) must inflate to the same bytes, and truncated streams,
wrong sizes and corrupted streams must be rejected (or, for a corruption
that still decodes, give a clean exit), never crash.

usage: inflate_check.py INFLATE_TOOL PTX_DIR
"""
import glob
import os
import random
import subprocess
import sys
import tempfile
import zlib

failures = 0


def fail(what):
    global failures
    failures += 1
    print('FAIL:', what)


def deflate(data, level=9, wbits=15, memlevel=9, strategy=zlib.Z_DEFAULT_STRATEGY):
    z = zlib.compressobj(level, zlib.DEFLATED, -wbits, memlevel, strategy)
    return z.compress(data) + z.flush()


def run(tool, tmp, packed, size):
    src, dst = os.path.join(tmp, 'in'), os.path.join(tmp, 'out')
    with open(src, 'wb') as f:
        f.write(packed)
    if os.path.exists(dst):
        os.remove(dst)
    r = subprocess.run([tool, src, str(size), dst], capture_output=True)
    out = None
    if r.returncode == 0:
        with open(dst, 'rb') as f:
            out = f.read()
    return r.returncode, out


def samples(rng):
    words = [b'ld.global.v4.f32', b'mma.sync', b'%r12', b'add.s32', b'{', b'}', b';\n', b'\t']
    yield 'empty', b''
    yield 'one byte', b'x'
    for n in (100, 5000, 70000):
        yield f'random {n}', bytes(rng.getrandbits(8) for _ in range(n))
    yield 'text-like 200k', b' '.join(rng.choice(words) for _ in range(40000))
    yield 'one byte repeated', b'a' * 100000  # distance-1 overlapping matches
    yield 'long period', bytes(range(256)) * 300  # distance 256 matches, 258-byte lengths
    yield 'far matches', (bytes(rng.getrandbits(8) for _ in range(30000)) * 3)  # distance ~32 KiB


def main():
    tool, ptx_dir = sys.argv[1], sys.argv[2]
    rng = random.Random(2024)
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        def expect_same(what, data, packed):
            nonlocal cases
            cases += 1
            rc, out = run(tool, tmp, packed, len(data))
            if rc != 0 or out != data:
                fail(f'{what}: exit {rc}, {"same" if out == data else "different"} output')

        for name, data in samples(rng):
            for level in (0, 1, 6, 9):
                for strategy in (zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY,
                                 zlib.Z_RLE, zlib.Z_FIXED):
                    expect_same(f'{name}, level {level}, strategy {strategy}', data,
                                deflate(data, level, strategy=strategy))
            expect_same(f'{name}, 512-byte window, memlevel 1', data,
                        deflate(data, 9, wbits=9, memlevel=1))

        ptx = sorted(glob.glob(os.path.join(ptx_dir, '*.ptx')))
        if not ptx:
            fail(f'no PTX files in {ptx_dir}')
        for path in ptx:
            with open(path, 'rb') as f:
                data = f.read()
            # As src/kernels/embed_ptx.py compresses them.
            expect_same(os.path.basename(path), data, deflate(data, 6, 15, 9))

        # Rejections: a short stream, a wrong size, a reserved block type.
        data = b' '.join(rng.choice([b'abc', b'defg', b'hi']) for _ in range(20000))
        packed = deflate(data)
        for cut in (0, 1, 2, len(packed) // 2, len(packed) - 1):
            cases += 1
            rc, _ = run(tool, tmp, packed[:cut], len(data))
            if rc != 1:
                fail(f'stream cut to {cut} of {len(packed)} bytes: exit {rc}, expected 1')
        for size in (len(data) - 1, len(data) + 1):
            cases += 1
            rc, _ = run(tool, tmp, packed, size)
            if rc != 1:
                fail(f'size {size} for {len(data)} bytes: exit {rc}, expected 1')
        cases += 1
        rc, _ = run(tool, tmp, bytes([0b111]), 0)  # final block of type 3
        if rc != 1:
            fail(f'reserved block type: exit {rc}, expected 1')
        # Corruptions may still decode to something: only a crash fails.
        for i in range(200):
            bad = bytearray(packed[:4000])
            for _ in range(1 + i % 4):
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            cases += 1
            rc, _ = run(tool, tmp, bytes(bad), len(data))
            if rc not in (0, 1):
                fail(f'corrupted stream {i}: exit {rc} (crashed?)')
    print(f'inflate_check: {cases} cases, {failures} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
