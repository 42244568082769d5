"""Python bytecode for installations that ship none (docs/worker-protocol.md, "Bytecode").

torch installed without compiled bytecode (uv's default, or a site-packages nobody may write)
makes every process compile torch's modules from source: on an H100 machine a cold
torch.compile baseline spent 6.6 s of its 21 s in Python's own compiler, importing inductor,
and each of inductor's compile workers paid the same again. The worker calls prepare() before
it imports torch: where torch has no bytecode beside its sources, it starts compiling torch
and the packages torch requires into KAGENT_BYTECODE_DIR (in a process of its own, on half
the cores, once per installation) and points sys.pycache_prefix (and PYTHONPYCACHEPREFIX, for
processes started later) there. Its forks read that bytecode; the sandbox cannot write there
(it is outside every sandboxed child's writable folders, and owned by the worker's uid).
Where torch has bytecode of its own this does nothing: a prefix would hide it.

No torch import here: this runs before it.
"""
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import time

STAMP_VERSION = 1


def _origin(package):
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def has_own_bytecode(source):
    """Whether `source` has bytecode beside it (its __pycache__ file), prefix or not."""
    saved = sys.pycache_prefix
    sys.pycache_prefix = None
    try:
        return os.path.exists(importlib.util.cache_from_source(source))
    finally:
        sys.pycache_prefix = saved


def requirement_names(distribution):
    """The distributions `distribution` requires outside its extras, by name."""
    names = []
    try:
        requirements = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return names
    for requirement in requirements:
        if "extra" in requirement.partition(";")[2]:
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            names.append(match.group(1))
    return names


def package_folders(distribution):
    """The top-level package folders of `distribution` and of the distributions it requires
    (one level down, as installed), those holding Python sources."""
    folders = []
    for name in [distribution] + requirement_names(distribution):
        try:
            found = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        tops = set()
        for path in found.files or []:
            parts = path.parts
            if len(parts) > 1 and parts[0] != ".." and path.suffix == ".py" \
                    and not parts[0].endswith((".dist-info", ".data")):
                tops.add(parts[0])
        for top in sorted(tops):
            folder = str(found.locate_file(top))
            if os.path.isdir(folder) and folder not in folders:
                folders.append(folder)
    return folders


def _stamp(folders):
    """Names this installation: Python, the folders and when each package's entry changed."""
    digest = hashlib.sha256(f"{STAMP_VERSION}\n{sys.version}\n".encode())
    for folder in folders:
        entry = os.path.join(folder, "__init__.py")
        changed = os.stat(entry).st_mtime_ns if os.path.exists(entry) else 0
        digest.update(f"{folder}\n{changed}\n".encode())
    return digest.hexdigest()[:32]


def compile_into(directory, folders, workers=None):
    """Compiles every source under `folders` into the prefix `directory`, in parallel (one
    process per core; compileall runs only folders in parallel, never a list of files): the
    number of sources found (sources that do not compile, such as templates named .py, are
    left to the importer, which never imports them)."""
    sources = sum(1 for folder in folders for _, _, names in os.walk(folder)
                  for name in names if name.endswith(".py"))
    environment = dict(os.environ, PYTHONPYCACHEPREFIX=directory)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", str(workers or 0), *folders],
                   env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, umask=0o022)  # readable by the sandbox uid
    return sources


def compile_once(directory, folders, stamp, wait=True, workers=None):
    """Compiles `folders` into `directory` (`workers` processes, every core by default) and
    writes `stamp`, unless the stamp is there: under a lock, so that one process compiles and
    the others (kagentd starts a worker per lane) wait for it, or with wait=False leave it to
    the one compiling. The number of sources compiled (0 where none was needed, None where
    another process is at it)."""
    lock = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                   0o644)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if os.path.exists(stamp):
            return 0
        sources = compile_into(directory, folders, workers)
        with open(stamp, "w", encoding="ascii") as handle:
            handle.write("\n".join(folders) + "\n")
        return sources
    finally:
        os.close(lock)


def _compile_detached(directory, folders, stamp):
    """compile_once in a process of its own that nobody waits for: forked twice, so that it is
    no child of the worker's (whose evaluations reap their orphans and would wait for it), on
    half the cores, leaving the others to the evaluations that start meanwhile."""
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for descriptor in (0, 1, 2):
                    os.dup2(null, descriptor)
                os.umask(0o022)
                runner = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                os.execv(sys.executable, [
                    sys.executable, "-c",
                    "import os, sys; sys.path.insert(0, sys.argv[1]); "
                    "from kagent_runner import bytecode; "
                    "bytecode.compile_once(sys.argv[2], sys.argv[4:], sys.argv[3], wait=False, "
                    "workers=max(1, (os.cpu_count() or 2) // 2))",
                    runner, directory, stamp, *folders])
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def prepare(directory, distribution="torch", package="torch", wait=False):
    """Makes the worker and its children read bytecode from `directory` when `package` has
    none of its own. The first worker of an installation starts compiling it there, in a
    process of its own (wait=False: its own imports compile as before meanwhile, and the
    processes started later, a torch.compile baseline's, find the bytecode ready), or first
    (wait=True). Returns what it did: {"prefix", "reused": True}, {"prefix", "compiling":
    True}, {"prefix", "sources", "seconds"}, or None where nothing was needed (or `package`
    is not installed)."""
    origin = _origin(package)
    if not directory or origin is None or has_own_bytecode(origin):
        return None
    started = time.monotonic()
    os.makedirs(directory, mode=0o755, exist_ok=True)
    folders = package_folders(distribution) or [os.path.dirname(origin)]
    stamp = os.path.join(directory, f"installation-{_stamp(folders)}")
    result = {"prefix": directory, "reused": True}
    if not os.path.exists(stamp):
        if wait:
            sources = compile_once(directory, folders, stamp)
            result = {"prefix": directory, "sources": sources,
                      "seconds": round(time.monotonic() - started, 2)}
        else:
            _compile_detached(directory, folders, stamp)
            result = {"prefix": directory, "compiling": True}
    sys.pycache_prefix = directory
    os.environ["PYTHONPYCACHEPREFIX"] = directory
    return result


def prepare_from_environment():
    """prepare() in the folder kagent names in KAGENT_BYTECODE_DIR (nothing without it)."""
    try:
        return prepare(os.environ.get("KAGENT_BYTECODE_DIR"))
    except OSError as error:
        # the bytecode only saves time: without it every import compiles, as before
        print(f"kagent worker: no bytecode cache: {error}", file=sys.stderr, flush=True)
        return None
