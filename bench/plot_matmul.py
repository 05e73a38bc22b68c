#!/usr/bin/env python3
"""Draws bench_matmul's JSON as an SVG bar chart: TFLOP/s of libkaio's AUTO
variant beside cuBLAS GemmEx for every shape, one panel per input dtype.

    python3 bench/plot_matmul.py bench_matmul.json bench/matmul_h100.svg

Standard library only (the machines here have no matplotlib), so the SVG is
written by hand: a bar pair per shape, labelled with libkaio's % of cuBLAS.
"""
import json
import sys
from xml.sax.saxutils import escape

BAR_W, GAP, PANEL_H, TOP, LEFT = 9, 8, 260, 40, 60
KAIO, CUBLAS = "#d95f02", "#7570b3"


def cublas_version(v):
    return "cuBLAS %d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


def shape_label(r):
    return "%dx%dx%d %s" % (r["m"], r["n"], r["k"], r["layout"])


def panel(rows, dtype, y0, width):
    peak = max(max(r["kaio"]["auto"]["tflops"], r["cublas"]["tflops"]) for r in rows)
    scale = (PANEL_H - 20) / peak
    out = ['<text x="%d" y="%d" font-size="14" font-weight="bold">%s in, f32 out: '
           'TFLOP/s (libkaio AUTO vs cuBLAS GemmEx)</text>' % (LEFT, y0 - 14, dtype)]
    base = y0 + PANEL_H
    for tick in range(0, int(peak) + 1, 100):
        y = base - tick * scale
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (LEFT, y, width, y))
        out.append('<text x="%d" y="%.1f" font-size="9" text-anchor="end">%d</text>'
                   % (LEFT - 4, y + 3, tick))
    x = LEFT + GAP
    for r in rows:
        k, c = r["kaio"]["auto"]["tflops"], r["cublas"]["tflops"]
        for i, (v, colour) in enumerate(((k, KAIO), (c, CUBLAS))):
            h = v * scale
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>'
                       % (x + i * BAR_W, base - h, BAR_W, h, colour))
        out.append('<text x="%d" y="%.1f" font-size="8" text-anchor="middle">%.0f%%</text>'
                   % (x + BAR_W, base - max(k, c) * scale - 3, r["kaio"]["auto"]["pct_of_cublas"]))
        out.append('<text transform="translate(%d,%d) rotate(60)" font-size="8">%s</text>'
                   % (x + BAR_W // 2, base + 8, escape(shape_label(r))))
        x += 2 * BAR_W + GAP
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    results = [r for r in data["results"] if r.get("cublas") and r["kaio"].get("auto")]
    dtypes = sorted({r["dtype"] for r in results}, key=["f16", "bf16"].index)
    count = max(sum(1 for r in results if r["dtype"] == d) for d in dtypes)
    width = LEFT + GAP + count * (2 * BAR_W + GAP) + 20
    panel_step = PANEL_H + 130
    height = TOP + len(dtypes) * panel_step + 10
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13">%s, %s; median of %d after %d warm-ups</text>'
           % (LEFT, escape(data["device"]["name"]), cublas_version(data["cublas"]["version"]),
              data["iters"], data["warmups"]),
           '<rect x="%d" y="24" width="10" height="10" fill="%s"/><text x="%d" y="33" '
           'font-size="11">libkaio</text>' % (width - 170, KAIO, width - 156),
           '<rect x="%d" y="24" width="10" height="10" fill="%s"/><text x="%d" y="33" '
           'font-size="11">cuBLAS</text>' % (width - 100, CUBLAS, width - 86)]
    for i, d in enumerate(dtypes):
        svg += panel([r for r in results if r["dtype"] == d], d, TOP + 30 + i * panel_step, width)
    svg.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
