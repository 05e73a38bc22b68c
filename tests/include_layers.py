#!/usr/bin/env python3
"""Checks that src/'s directories include each other only downwards.

Each directory of src/ is a layer; a file may include headers of its own
layer and of layers below it, never above, so no two layers depend on each
other (an include cycle between directories). The ABI layer also never
calls the driver itself: it checks arguments, resolves handles and hands
the work to the layers below. Usage: include_layers.py SRC_DIR
"""
import pathlib
import re
import sys

# Bottom to top. lang (the kernel-language compiler) is pure host code: it
# sits below ops, which compile and launch its kernels.
LAYERS = ["core", "driver", "runtime", "kernels", "lang", "ops", "abi"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)
DRIVER_CALL = re.compile(r"api->cu\w+")


def edges(src):
    """(from_layer, to_layer, file, line) for every include across layers."""
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h") or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        text = path.read_text(encoding="utf-8")
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target != layer:
                line = text.count("\n", 0, m.start()) + 1
                yield layer, target, path.relative_to(src.parent), line


def find_cycle(graph):
    """A list of layers forming a cycle in graph, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, stack)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = pathlib.Path(sys.argv[1]).resolve()
    problems = []
    graph = {}
    layers = {p.name for p in src.iterdir() if p.is_dir()}
    for name in sorted(layers - set(LAYERS)):
        problems.append(f"src/{name}/ is no layer: add it to LAYERS in {sys.argv[0]}")
    for frm, to, path, line in edges(src):
        graph.setdefault(frm, set()).add(to)
        if frm in RANK and to in RANK and RANK[to] > RANK[frm]:
            problems.append(f"{path}:{line}: {frm} includes {to}, a layer above it "
                            f"(order, bottom up: {' < '.join(LAYERS)})")
    for path in sorted((src / "abi").glob("*.[ch]pp")):
        text = path.read_text(encoding="utf-8")
        for m in DRIVER_CALL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{path.relative_to(src.parent)}:{line}: the ABI layer calls the "
                            f"driver ({m.group(0)}); do it in runtime/ or kernels/")
    cycle = find_cycle(graph)
    if cycle:
        problems.append("include cycle between directories: " + " -> ".join(cycle))
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{sum(len(v) for v in graph.values())} layer edges, all downwards: "
          + " < ".join(LAYERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
