#!/usr/bin/env python3
"""The worker's bytecode cache (kagent_runner/bytecode.py) on a package of our own with no
bytecode: compiled once into the prefix, reused by the next worker, left alone where the
package has bytecode of its own, and imported from the prefix by a new process. Prints TAP."""
import contextlib
import fcntl
import os
import py_compile
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.join(os.environ.get("KAGENT_SOURCE_DIR", "."), "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tap  # noqa: E402
from tap import test  # noqa: E402

from kagent_runner import bytecode  # noqa: E402


def make_package(root, name):
    """A package `name` with a submodule, and no __pycache__ anywhere."""
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, "inner"))
    with open(os.path.join(folder, "__init__.py"), "w") as handle:
        handle.write("VALUE = 1\n")
    with open(os.path.join(folder, "inner", "__init__.py"), "w") as handle:
        handle.write("def twice(x):\n    return 2 * x\n")
    with open(os.path.join(folder, "template.py"), "w") as handle:
        handle.write("{{ not python }}\n")  # a template named .py: left to the importer
    # installed as a distribution that requires one package always and one as an extra
    info = os.path.join(root, f"{name}-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as handle:
        handle.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                     "Requires-Dist: kagent-missing-dependency>=1\n"
                     'Requires-Dist: kagent-optional-dependency; extra == "more"\n')
    with open(os.path.join(info, "RECORD"), "w") as handle:
        for path in ("__init__.py", "inner/__init__.py", "template.py"):
            handle.write(f"{name}/{path},,\n")
        handle.write(f"{name}-1.0.dist-info/METADATA,,\n../../bin/{name},,\n")
    return folder


def in_child(code, root, prefix=None):
    """Runs `code` in a new Python with `root` on its path; its stdout."""
    environment = dict(os.environ, PYTHONPATH=root + os.pathsep + sys.path[0],
                       PYTHONDONTWRITEBYTECODE="1")
    environment.pop("PYTHONPYCACHEPREFIX", None)
    if prefix is not None:
        environment["PYTHONPYCACHEPREFIX"] = prefix
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                          capture_output=True, text=True, check=True).stdout


@contextlib.contextmanager
def installed_probe():
    """(root, folder, prefix): the probe package installed on sys.path; the prefix settings
    prepare() changes are as they were afterwards."""
    saved = sys.pycache_prefix, os.environ.get("PYTHONPYCACHEPREFIX")
    with tempfile.TemporaryDirectory() as root:
        folder = make_package(root, "kagent_bytecode_probe")
        sys.path.insert(0, root)
        try:
            yield root, folder, os.path.join(root, "prefix")
        finally:
            sys.path.remove(root)
            sys.pycache_prefix = saved[0]
            if saved[1] is None:
                os.environ.pop("PYTHONPYCACHEPREFIX", None)
            else:
                os.environ["PYTHONPYCACHEPREFIX"] = saved[1]


def prepare_probe(prefix, **keywords):
    return bytecode.prepare(prefix, distribution="kagent_bytecode_probe",
                            package="kagent_bytecode_probe", **keywords)


@test
def a_package_without_bytecode_is_compiled_once_then_reused():
    with installed_probe() as (root, folder, prefix):
        assert bytecode.package_folders("kagent_bytecode_probe") == [folder]
        first = prepare_probe(prefix, wait=True)
        assert first["sources"] == 3, first
        assert sys.pycache_prefix == prefix and os.environ["PYTHONPYCACHEPREFIX"] == prefix
        compiled = bytecode.importlib.util.cache_from_source(
            os.path.join(folder, "inner", "__init__.py"))
        assert compiled.startswith(prefix) and os.path.exists(compiled), compiled
        # nothing was written beside the sources
        assert not os.path.exists(os.path.join(folder, "__pycache__"))
        second = prepare_probe(prefix)
        assert second == {"prefix": prefix, "reused": True}, second


@test
def the_first_worker_compiles_in_a_process_of_its_own():
    with installed_probe() as (root, folder, prefix):
        first = prepare_probe(prefix)
        assert first == {"prefix": prefix, "compiling": True}, first
        # it returned at once, and left no child behind to wait for
        try:
            assert os.waitpid(-1, os.WNOHANG) == (0, 0), "a child of ours is left"
        except ChildProcessError:
            pass
        compiled = bytecode.importlib.util.cache_from_source(
            os.path.join(folder, "inner", "__init__.py"))
        deadline = time.monotonic() + 60
        stamps = []
        while time.monotonic() < deadline and not stamps:
            stamps = [name for name in os.listdir(prefix) if name.startswith("installation-")]
            time.sleep(0.1)
        assert stamps and os.path.exists(compiled), (os.listdir(prefix), compiled)
        again = prepare_probe(prefix)
        assert again == {"prefix": prefix, "reused": True}, again


@test
def a_compile_in_progress_is_left_to_its_process():
    with tempfile.TemporaryDirectory() as root:
        folder = make_package(root, "kagent_bytecode_probe")
        stamp = os.path.join(root, "installation-x")
        lock = os.open(os.path.join(root, ".lock"), os.O_RDWR | os.O_CREAT)
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process is compiling
        try:
            assert bytecode.compile_once(root, [folder], stamp, wait=False) is None
            assert not os.path.exists(stamp)
        finally:
            os.close(lock)
        assert bytecode.compile_once(root, [folder], stamp, wait=False) == 3
        assert os.path.exists(stamp)
        assert bytecode.compile_once(root, [folder], stamp) == 0  # done already


# Imports the probe counting the sources Python compiles: prints twice(21), the count and
# whether a prefix is set.
COUNTED_IMPORT = """
import importlib.machinery, sys
compiled = []
original = importlib.machinery.SourceFileLoader.source_to_code
def counted(self, data, path, **keywords):
    compiled.append(path)
    return original(self, data, path, **keywords)
importlib.machinery.SourceFileLoader.source_to_code = counted
import kagent_bytecode_probe.inner as inner
print(inner.twice(21), len(compiled), sys.pycache_prefix is not None)
"""


@test
def a_new_process_imports_from_the_prefix_without_compiling():
    with tempfile.TemporaryDirectory() as root:
        folder = make_package(root, "kagent_bytecode_probe")
        prefix = os.path.join(root, "prefix")
        bytecode.compile_into(prefix, [folder])
        # a source compiled from anywhere but the prefix would show in this count
        out = in_child(COUNTED_IMPORT, root, prefix)
        assert out.split() == ["42", "0", "True"], out
        out = in_child(COUNTED_IMPORT, root)
        assert out.split() == ["42", "2", "False"], out  # without it: both modules compiled


@test
def a_package_with_its_own_bytecode_is_left_alone():
    with installed_probe() as (root, folder, prefix):
        py_compile.compile(os.path.join(folder, "__init__.py"), doraise=True)
        saved = sys.pycache_prefix
        assert prepare_probe(prefix) is None
        assert sys.pycache_prefix == saved and not os.path.exists(prefix)


@test
def no_folder_or_no_package_does_nothing():
    assert bytecode.prepare(None) is None
    assert bytecode.prepare("/nonexistent/kagent", package="kagent_no_such_package") is None


@test
def requirements_leave_out_extras():
    with tempfile.TemporaryDirectory() as root:
        make_package(root, "kagent_bytecode_probe")
        sys.path.insert(0, root)
        try:
            names = bytecode.requirement_names("kagent_bytecode_probe")
        finally:
            sys.path.remove(root)
    assert names == ["kagent-missing-dependency"], names
    assert bytecode.requirement_names("kagent-no-such-distribution") == []


if __name__ == "__main__":
    sys.exit(tap.run())
