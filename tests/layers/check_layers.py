#!/usr/bin/env python3
"""Holds the code to its layers (docs/layers.md): every arrow points down, and no circle.

Reads the source tree (and, with --build, the object files of a build) and fails on:
- an #include from a file of a lower layer into a file of a higher one;
- a circle of modules (a module is x.c with its header x.h), through includes or, with
  --build, through calls: an object file that uses a symbol another one defines;
- a call from a lower layer into a higher one (with --build);
- a meson.build that names a source of another folder than its own (each folder builds its
  own library and links the layers below it);
- more than MAX_AGENT_TOP_FILES .c files at the top of agent/.

Usage: check_layers.py SOURCE_ROOT [--build BUILD_ROOT]
Prints one line per finding and exits 1 when there is any, else prints a summary and exits 0.
"""
import os
import re
import subprocess
import sys

# Lowest first. A file belongs to the longest prefix that matches its path; its header in
# include/kagent/<name>/ belongs to the same layer as the folder of that name.
LAYERS = [
    ("base", ["tools/base/", "include/kagent/base/"]),
    ("toolchain", ["tools/cuda/", "include/kagent/cuda/"]),
    ("evaluator", ["tools/evaluator/", "include/kagent/evaluator/"]),
    ("sandbox", ["sandbox/", "include/kagent/sandbox/"]),
    ("llm", ["agent/llm/", "include/kagent/llm/"]),
    ("records", ["agent/records/", "include/kagent/records/"]),
    ("model_tools", ["agent/model_tools/", "include/kagent/model_tools/"]),
    ("session", ["agent/session/", "include/kagent/session/"]),
    ("daemon", ["agent/daemon/", "include/kagent/daemon/"]),
    ("cli", ["agent/cli/", "include/kagent/cli/"]),
    ("main", ["agent/"]),
]
SOURCE_FOLDERS = ("tools/", "sandbox/", "agent/", "include/kagent/")
MAX_AGENT_TOP_FILES = 12
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    best = None
    for rank, (name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if path.startswith(prefix) and (best is None or len(prefix) > best[2]):
                best = (rank, name, len(prefix))
    return None if best is None else best[:2]


def module_of(path):
    """x.c, include/kagent/<layer>/x.h, a private x.h beside x.c and the x_internal.h its
    parts share (as libuv's internal.h) are one module."""
    base = os.path.splitext(os.path.basename(path))[0]
    if base.endswith("_internal"):
        base = base[: -len("_internal")]
    layer = layer_of(path)
    return f"{layer[1] if layer else '?'}:{base}"


def source_files(root):
    found = []
    for folder in SOURCE_FOLDERS:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if name.endswith((".c", ".h")):
                    found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(set(found))


def resolve_include(root, path, target):
    for candidate in (os.path.join(os.path.dirname(path), target),
                      os.path.join("include", target)):
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None  # a system or toolkit header


def find_circles(edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def check_includes(root, files, findings, module_edges):
    for path in files:
        layer = layer_of(path)
        text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
        for target in INCLUDE.findall(text):
            resolved = resolve_include(root, path, target)
            if resolved is None:
                continue
            target_layer = layer_of(resolved)
            if layer and target_layer and target_layer[0] > layer[0]:
                findings.append(f"{path}: includes \"{target}\" of layer {target_layer[1]}, "
                                f"above its own layer {layer[1]}")
            if module_of(path) != module_of(resolved):
                module_edges.setdefault(module_of(path), {})[module_of(resolved)] = \
                    f"{path} includes {target}"


def object_sources(root, build, sources):
    """Object files of the build's libraries and programs, with the source each was made of."""
    objects = {}
    for directory, _, names in os.walk(build):
        relative = os.path.relpath(directory, build)
        if not relative.endswith(".p") or relative.startswith("tests"):
            continue
        owner_folder = os.path.dirname(relative)
        for name in names:
            if not name.endswith(".c.o"):
                continue
            # meson names the object of a source in another folder by its path, '/' as '_'.
            for source in sources:
                inside = os.path.relpath(source, owner_folder or ".")
                if inside.replace("/", "_").replace("..", "") == name[:-2].replace("..", ""):
                    objects[os.path.join(directory, name)] = source
                    break
    return objects


def check_calls(root, build, sources, findings, module_edges):
    objects = object_sources(root, build, [path for path in sources if path.endswith('.c')])
    if not objects:
        findings.append(f"{build}: no object files found (build first)")
        return 0
    defined, used = {}, {}
    for object_path, source in objects.items():
        output = subprocess.run(["nm", "--defined-only", "-g", object_path],
                                capture_output=True, text=True, check=True).stdout
        for line in output.splitlines():
            parts = line.split()
            if len(parts) == 3:
                defined.setdefault(parts[2], set()).add(source)
        output = subprocess.run(["nm", "--undefined-only", object_path],
                                capture_output=True, text=True, check=True).stdout
        used[source] = {line.split()[-1] for line in output.splitlines() if line.strip()}
    for source, symbols in sorted(used.items()):
        layer = layer_of(source)
        for symbol in sorted(symbols):
            for provider in sorted(defined.get(symbol, ())):
                if provider == source:
                    continue
                provider_layer = layer_of(provider)
                if layer and provider_layer and provider_layer[0] > layer[0]:
                    findings.append(f"{source}: calls {symbol} of {provider}, layer "
                                    f"{provider_layer[1]}, above its own layer {layer[1]}")
                if module_of(source) != module_of(provider):
                    module_edges.setdefault(module_of(source), {}).setdefault(
                        module_of(provider), f"{source} uses {symbol} of {provider}")
    return len(objects)


def check_meson(root, findings):
    for directory, _, names in os.walk(root):
        relative = os.path.relpath(directory, root)
        if relative.startswith(("build", ".", "tests")) or "meson.build" not in names:
            continue
        text = open(os.path.join(directory, "meson.build"), encoding="utf-8").read()
        for literal in re.findall(r"'([^']*\.c)'", text):
            if "/" in literal:
                findings.append(f"{os.path.join(relative, 'meson.build')}: builds '{literal}', a "
                                f"source of another folder (link that folder's library instead)")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = argv[1]
    build = argv[argv.index("--build") + 1] if "--build" in argv else None
    findings, module_edges = [], {}
    files = source_files(root)
    for path in files:
        if layer_of(path) is None:
            findings.append(f"{path}: in no layer (add its folder to LAYERS in {argv[0]})")
    check_includes(root, files, findings, module_edges)
    objects = check_calls(root, build, files, findings, module_edges) if build else 0
    check_meson(root, findings)
    for circle in find_circles(module_edges):
        ties = [module_edges[a][b] for a in circle for b in circle if b in module_edges.get(a, {})]
        findings.append("circle of " + ", ".join(circle) + ": " + "; ".join(ties))
    top = [name for name in os.listdir(os.path.join(root, "agent")) if name.endswith(".c")]
    if len(top) > MAX_AGENT_TOP_FILES:
        findings.append(f"agent/: {len(top)} .c files at its top, more than {MAX_AGENT_TOP_FILES}")
    for finding in findings:
        print(finding)
    if findings:
        print(f"layers: {len(findings)} finding(s)")
        return 1
    print(f"layers: {len(files)} files and {objects} objects in {len(LAYERS)} layers; "
          "every arrow points down, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
