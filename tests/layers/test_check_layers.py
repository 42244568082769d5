#!/usr/bin/env python3
"""The layer check (check_layers.py) on small trees made here: it passes a tree whose arrows
all point down and names each kind of breach. TAP output."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")
results = []


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as stream:
        stream.write(text)


def good_tree(root):
    write(root, "include/kagent/base/alloc.h", "void *kagent_alloc(int size);\n")
    write(root, "tools/base/alloc.c",
          '#include "kagent/base/alloc.h"\nvoid *kagent_alloc(int size) { return 0; }\n')
    write(root, "include/kagent/llm/sse.h", '#include "kagent/base/alloc.h"\nint kagent_sse(void);\n')
    write(root, "agent/llm/sse.c",
          '#include "kagent/llm/sse.h"\nint kagent_sse(void) { return kagent_alloc(1) != 0; }\n')
    write(root, "agent/main.c", '#include "kagent/llm/sse.h"\nint main(void) { return kagent_sse(); }\n')
    write(root, "tools/base/meson.build", "static_library('kagent-base', 'alloc.c')\n")


def build_objects(root, build, sources):
    """Compiles each source as meson would place its object: <folder>/lib.a.p/<name>.c.o."""
    for source in sources:
        folder = os.path.join(build, os.path.dirname(source), "lib.a.p")
        os.makedirs(folder, exist_ok=True)
        subprocess.run(["cc", "-c", "-I", os.path.join(root, "include"), os.path.join(root, source),
                        "-o", os.path.join(folder, os.path.basename(source) + ".o")], check=True)


def run_check(root, build=None):
    command = [sys.executable, CHECK, root] + (["--build", build] if build else [])
    result = subprocess.run(command, capture_output=True, text=True)
    return result.returncode, result.stdout


def case(name, function):
    with tempfile.TemporaryDirectory() as root:
        try:
            function(root)
            results.append((True, name, ""))
        except AssertionError as failure:
            results.append((False, name, str(failure)))


def test_good_tree(root):
    good_tree(root)
    build = os.path.join(root, "build")
    build_objects(root, build, ["tools/base/alloc.c", "agent/llm/sse.c", "agent/main.c"])
    status, output = run_check(root, build)
    assert status == 0, output
    assert "every arrow points down" in output, output


def test_upward_include(root):
    good_tree(root)
    write(root, "tools/base/alloc.c",
          '#include "kagent/base/alloc.h"\n#include "kagent/llm/sse.h"\n'
          'void *kagent_alloc(int size) { return 0; }\n')
    status, output = run_check(root)
    assert status == 1, output
    assert 'tools/base/alloc.c: includes "kagent/llm/sse.h" of layer llm, above its own layer base' \
        in output, output


def test_upward_call(root):
    good_tree(root)
    # No include: a declaration written by hand still makes the call, which the objects show.
    write(root, "tools/base/alloc.c", "int kagent_sse(void);\n"
          "void *kagent_alloc(int size) { return (void *)(long)kagent_sse(); }\n")
    build = os.path.join(root, "build")
    build_objects(root, build, ["tools/base/alloc.c", "agent/llm/sse.c", "agent/main.c"])
    status, output = run_check(root, build)
    assert status == 1, output
    assert "tools/base/alloc.c: calls kagent_sse of agent/llm/sse.c" in output, output
    assert "circle of base:alloc, llm:sse" in output, output


def test_circle_in_one_layer(root):
    good_tree(root)
    write(root, "agent/llm/retry.c", "int kagent_sse(void);\nint kagent_retry(void) { return kagent_sse(); }\n")
    write(root, "agent/llm/sse.c", "int kagent_retry(void);\nint kagent_sse(void) { return kagent_retry(); }\n")
    build = os.path.join(root, "build")
    build_objects(root, build, ["tools/base/alloc.c", "agent/llm/sse.c", "agent/llm/retry.c"])
    status, output = run_check(root, build)
    assert status == 1, output
    assert "circle of llm:retry, llm:sse" in output, output


def test_meson_reaching_out(root):
    good_tree(root)
    write(root, "sandbox/meson.build", "shared_library('x', 'sandbox.c', '../agent/llm/sse.c')\n")
    status, output = run_check(root)
    assert status == 1, output
    assert "sandbox/meson.build: builds '../agent/llm/sse.c'" in output, output


def test_file_in_no_layer(root):
    good_tree(root)
    write(root, "tools/stray.c", "int stray;\n")
    status, output = run_check(root)
    assert status == 1, output
    assert "tools/stray.c: in no layer" in output, output


def test_agent_top_crowded(root):
    good_tree(root)
    for number in range(13):
        write(root, f"agent/extra{number}.c", "int x;\n")
    status, output = run_check(root)
    assert status == 1, output
    assert "agent/: 14 .c files at its top" in output, output


for name, function in [("a tree whose arrows point down passes", test_good_tree),
                       ("an upward include is named", test_upward_include),
                       ("an upward call without an include is named", test_upward_call),
                       ("a call circle inside one layer is named", test_circle_in_one_layer),
                       ("a meson.build building another folder's source is named",
                        test_meson_reaching_out),
                       ("a file outside every layer is named", test_file_in_no_layer),
                       ("a crowded agent/ top is named", test_agent_top_crowded)]:
    case(name, function)

print(f"1..{len(results)}")
for number, (passed, name, detail) in enumerate(results, 1):
    print(f"{'ok' if passed else 'not ok'} {number} - {name}")
    for line in detail.splitlines():
        print(f"# {line}")
sys.exit(0 if all(passed for passed, _, _ in results) else 1)
