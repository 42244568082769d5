"""The warm evaluation worker (see docs/worker-protocol.md).

It imports torch (and triton) once and never touches CUDA, so that it can fork: for each
evaluation it forks a trusted judge and a sandboxed candidate child, supervises both with
time limits, keeps a capped tail of what the candidate prints, and answers with one JSON line.
The worker must stay single-threaded for fork to be safe.
"""
import argparse
import fcntl
import json
import os
import platform
import select
import signal
import socket
import stat
import sys
import time

from . import PROTOCOL_VERSION, bytecode, gpu_lock, handover, prepared

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
# before torch is imported: its bytecode, where the installation has none (bytecode.py)
bytecode.prepare_from_environment()

import torch  # noqa: E402

MAX_LINE = 64 << 20
# The GPU this worker was started for (kagent worker --gpu N), which it sees as its only
# device; None when it sees every GPU of its parent.
SERVED_GPU = os.environ.get("KAGENT_WORKER_GPU")
# Whether this worker prepares each evaluation's candidate process during the one before
# (kagent worker --prepare-candidates; prepared.py): for workers that serve a stream.
PREPARE_CANDIDATES = os.environ.get("KAGENT_WORKER_PREPARE") == "1"


def hello():
    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - triton is optional on the CPU
        triton_version = None
    return {"type": "hello", "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
            "python": platform.python_version(), "torch": torch.__version__,
            "triton": triton_version, "cuda_runtime": torch.version.cuda}


class CappedTail:
    """Keeps the last `limit` bytes of a stream and counts all of them."""

    def __init__(self, limit):
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    def add(self, chunk):
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self):
        return self.data.decode("utf-8", errors="replace")


def _log(text):
    """A line for the worker's log (its stderr: a session's or a lane's worker log)."""
    print(f"kagent worker: {text}", file=sys.stderr, flush=True)


def _status(status):
    if status is None:
        return {"exit_code": None, "signal": None}
    if os.WIFSIGNALED(status):
        return {"exit_code": None, "signal": os.WTERMSIG(status)}
    return {"exit_code": os.WEXITSTATUS(status), "signal": None}


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_sandbox_user(uid, spare=()):
    """When the worker is root, the sandboxed child runs as a uid of its own (one per GPU);
    anything it left behind (a fork bomb that escaped its process group) is ended by a
    helper of that uid. Never use a uid that other programs run as. `spare`: the pids of the
    worker's own processes that run as that uid too and stay (the kept judge, the prepared
    candidate process); then the helper ends the uid's processes one by one, pass after pass
    until a pass finds none (the uid's process limit bounds a fork bomb, and a killed process
    forks no more)."""
    if os.getuid() != 0 or uid in (0, 65534):
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            if not spare:
                os.kill(-1, signal.SIGKILL)
            else:
                from . import processes

                for _ in range(1000):
                    found = [other for other in processes.user_processes(uid)
                             if other not in spare and other != os.getpid()]
                    if not found:
                        break
                    for other in found:
                        try:
                            os.kill(other, signal.SIGKILL)
                        except OSError:
                            pass
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def _give_tree(path, uid):
    for directory, folders, files in os.walk(path):
        os.chown(directory, uid, uid)
        for name in files:
            os.chown(os.path.join(directory, name), uid, uid, follow_symlinks=False)


def _warm_triton():
    """Does once, before the forks, what every candidate's first Triton launch would repeat:
    the compiler's cache key hashes Triton's own files (libtriton alone is hundreds of MB),
    then the compiler imports its Gluon front end. On an H100 host that was 0.75 s of each
    evaluation, in the candidate's first trial. Likewise torch's first use of CUDA in every
    judge and candidate registers Triton implementations of two sparse operators with
    torch.library: 0.4 s of each process's start with eight evaluation lanes on an H100;
    registered here, it is a table lookup in each fork. None of it touches CUDA, so forking
    stays safe."""
    try:
        from triton.runtime import cache
    except Exception:  # noqa: BLE001 - triton is optional on the CPU
        return
    register = getattr(torch.cuda, "_register_triton_kernels", None)
    if register is not None:
        register()
    cache.triton_key()
    try:
        import triton.experimental.gluon  # noqa: F401
    except Exception:  # noqa: BLE001 - not in every Triton version
        pass


def _judge_folders(request):
    """The judge's home and cache folders, made, and given to the sandbox uid when the worker
    is root: (home, caches)."""
    # outside the candidate's scratch folder, which the candidate (same uid) can write
    judge_home = request.get("judge_directory") or os.path.join(
        os.path.dirname(request["scratch_directory"].rstrip("/")), "judge")
    caches = request.get("judge_cache_directory") or os.path.join(judge_home, "cache")
    for path in (judge_home, caches):
        os.makedirs(path, exist_ok=True)
    uid = int(request.get("sandbox_uid", 65534))
    if os.getuid() == 0 and uid != 0:
        _give_tree(judge_home, uid)
        _give_tree(caches, uid)
    return judge_home, caches


def _enter_judge_folders(judge_home, caches):
    os.environ["HOME"] = judge_home
    os.environ["TMPDIR"] = judge_home
    os.environ["USER"] = os.environ["LOGNAME"] = "kagent-judge"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
    # compile workers would count against the candidate's process limit (one uid)
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"


def _drop_judge_privileges(request):
    """Runs the judge as the candidate's uid when the worker is root: CUDA IPC works only
    between processes of one uid. The candidate's Landlock domain and seccomp filter still
    keep it from tracing, reading or signalling the judge (checked on an H100)."""
    _enter_judge_folders(*_judge_folders(request))
    uid = int(request.get("sandbox_uid", 65534))
    if os.getuid() != 0 or uid == 0:
        return
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # changing uid clears the dumpable flag, which leaves /proc/self unwritable for CUDA
    import ctypes

    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE


def _reap_orphans(seconds=5.0):
    """The worker is a child subreaper: processes a candidate forked and abandoned are
    re-parented here once killed, and must be reaped, or their zombies would count against
    the next candidate's process limit. The kept judge and the prepared candidate process,
    children that stay, are left alone (and reaped here only if they have ended)."""
    from . import processes

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        for staying in (_kept_judge, _prepared):
            if staying is not None and pid == staying.pid:
                staying.ended(status)
        if pid == 0:
            if set(processes.children(os.getpid())) <= set(_staying_pids()):
                return
            time.sleep(0.01)


# The process groups of the current evaluation's children, ended if the worker is told to go.
_children = set()
# The socket the worker serves on, (path, inode), removed when it is told to go.
_listening = None


def _remove_socket(path, inode):
    """Removes the worker's socket, unless another worker has taken the path since."""
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def _terminate(signal_number, frame):
    for pid in list(_children):
        _kill_group(pid)
    # gone before the worker is: nothing of the sandbox uid outlives the worker
    for staying in (_kept_judge, _prepared):
        if staying is not None:
            staying.end()
    if _prepared is not None:
        _prepared.finish(None)
    if _listening is not None:
        _remove_socket(*_listening)
    os._exit(0)


def _fork_child(setup):
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            setup()
        except BaseException:  # noqa: B902 - a child never returns into the worker's loop
            import traceback

            traceback.print_exc()
        os._exit(70)
    _children.add(pid)
    return pid


# A kept judge with nothing to judge for this long ends; the next evaluation starts another.
KEPT_JUDGE_IDLE_SECONDS = 300
# How long a kept judge may take to let go of an evaluation (KeptJudge.release) before it is
# ended instead: a collection and handing cached memory back, well under a second as a rule.
KEPT_JUDGE_RELEASE_SECONDS = 30
RELEASED = b"\x01"  # a kept judge's answer to "release", on the control socket
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


class KeptJudge(handover.KeptProcess):
    """The judge process this worker keeps between evaluations of one problem on one device,
    uid and timing lock (docs/worker-protocol.md, "The kept judge"): its CUDA context and
    its start outlive each evaluation, which with eight lanes on one GPU had become an
    evaluation's largest phase (issue 13). It judges each evaluation with a Judge of its
    own; the worker hands it the evaluation's sockets and pipes over `control`."""

    def __init__(self, key, pid, control):
        super().__init__(pid, control)
        self.key = key
        self.last_sent = time.monotonic()

    @classmethod
    def start(cls, request, key):
        worker_end, judge_end = socket.socketpair()
        worker = os.getpid()

        def setup():
            import ctypes

            # nothing of the worker's (its protocol stream, the listening socket) stays open
            keep = judge_end.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, 1 << 16)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            # opened while the judge may still read the lock files (as the worker's user)
            timing_lock = gpu_lock.TimingLock(request.get("timing_lock"))
            _drop_judge_privileges(request)
            libc = ctypes.CDLL(None)
            # after the uid changed, which clears it: the judge ends with the worker
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != worker:
                os._exit(0)
            libc.prctl(PR_SET_NAME, b"kagent-judge", 0, 0, 0)
            _serve_kept_judge(judge_end, timing_lock, devnull)
            os._exit(0)

        pid = _fork_child(setup)
        _children.discard(pid)  # not one evaluation's: it stays
        judge_end.close()
        return cls(key, pid, worker_end)

    def send(self, message, fds):
        """One message, with the file descriptors `fds` ({name: socket or fd}) when given."""
        handover.send(self.control, message, fds)
        self.last_sent = time.monotonic()

    def release(self):
        """Asks it to let go of what the evaluation left it (the problem's module with whatever
        its code holds, the judge's buffers, the candidate's outputs it opened: release_device
        in judge.py) and waits for its answer. The evaluation's result goes out only then: what
        an evaluation held is free once its result is known, which kagentd counts on when it
        evaluates again alone one that ran out of memory beside others. A judge that does not
        answer within KEPT_JUDGE_RELEASE_SECONDS is ended. Returns whether it answered."""
        try:
            self.send({"op": "release"}, {})
            readable, _, _ = select.select([self.control], [], [], KEPT_JUDGE_RELEASE_SECONDS)
            if readable and self.control.recv(1) == RELEASED:
                return True
        except OSError:
            pass
        self.end()
        return False

    def idle_ending(self):
        """Whether it may be ending for want of work (KEPT_JUDGE_IDLE_SECONDS, less a margin):
        an evaluation handed to it then could be lost with it."""
        return time.monotonic() - self.last_sent > KEPT_JUDGE_IDLE_SECONDS - 30


_kept_judge = None
# The candidate process prepared for the next evaluation (prepared.py), or None.
_prepared = None


def _staying_pids():
    """The pids of the worker's children that outlive an evaluation, while they live."""
    return [staying.pid for staying in (_kept_judge, _prepared)
            if staying is not None and staying.alive()]


def _prepared_for(request):
    """Takes the prepared candidate process if it serves this evaluation's candidate (a new
    one), or None. One made for other evaluations (another device, uid, limits) is ended;
    one kept for the next new candidate stays."""
    global _prepared
    unfit = _prepared.unfit(request) if _prepared is not None else None
    if unfit is not None:
        _log(f"the prepared candidate process {_prepared.pid} was not used: {unfit}")
        _prepared.end()
        _prepared.finish(None)
        _prepared = None
    if _prepared is None or not prepared.new_candidate(request):
        return None
    taken, _prepared = _prepared, None
    return taken


def _prepare_next(request):
    """Forks the process for the next evaluation like this one (prepared.py), on a worker that
    prepares them and has none."""
    global _prepared
    if PREPARE_CANDIDATES and _prepared is None:
        _prepared = prepared.PreparedCandidate.start(request, _fork_child)
        if _prepared is not None:
            _children.discard(_prepared.pid)  # not this evaluation's: it stays


def _kept_judge_key(request):
    """What a kept judge is kept for: the problem (its bytes: a problem's import may change
    torch's global state), the device and the judge's uid, lock and caches."""
    import hashlib

    with open(request["problem_path"], "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return (digest, request.get("device"), int(request.get("gpu_index", 0)),
            int(request.get("sandbox_uid", 65534)), request.get("timing_lock"),
            request.get("judge_cache_directory"))


def _kept_judge_for(request):
    """The kept judge for this request: the one kept, or a new one in its place."""
    global _kept_judge
    key = _kept_judge_key(request)
    if _kept_judge is not None and (_kept_judge.key != key or _kept_judge.idle_ending()
                                    or not _kept_judge.alive()):
        _kept_judge.end()
        _kept_judge = None
    if _kept_judge is None:
        _kept_judge = KeptJudge.start(request, key)
    return _kept_judge


def _serve_kept_judge(control, timing_lock, devnull):
    """The kept judge's loop: an evaluation at a time, each with a fresh Judge; after each,
    once the worker says the candidate is gone ("release"), what it held on the device."""
    from . import judge

    while True:
        readable, _, _ = select.select([control], [], [], KEPT_JUDGE_IDLE_SECONDS)
        if not readable:
            return
        message, named = handover.receive(control)
        if message is None:
            return
        if message.get("op") == "release":
            judge.release_device()
            control.sendall(RELEASED)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        # the judge's and the problem's prints, to this evaluation's pipe
        os.dup2(named["judge_err"], 1)
        os.dup2(named["judge_err"], 2)
        os.close(named.pop("judge_err"))
        result_fd = named.pop("result")
        _enter_judge_folders(message["judge_home"], message["caches"])
        sockets = {name: socket.socket(fileno=fd) for name, fd in named.items()}
        children = {"candidate_record": sockets["candidate_record"],
                    "timing_lock": timing_lock, "candidate_gate": sockets.get("candidate_gate"),
                    "prepared_pid": message.get("prepared_pid")}
        for arm in ("reference", "compile"):
            if arm in sockets:
                children.update({arm: sockets[arm], f"{arm}_pid": message[f"{arm}_pid"],
                                 f"{arm}_record": sockets[f"{arm}_record"],
                                 f"{arm}_scratch": message[f"{arm}_scratch"]})
        children["timing_processes"] = [
            dict(extra, socket=sockets[extra["name"]],
                 record=sockets[extra["name"] + "_record"])
            for extra in message.get("timing_processes") or [] if extra["name"] in sockets]
        try:
            judge.judge_one(sockets["judge"], result_fd, message["request"],
                            message["candidate_pid"], children)
        finally:
            for item in sockets.values():
                item.close()
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)


def _lock_sandbox_uid(request):
    """One evaluation at a time per sandbox uid, across workers: each ends every process of
    that uid when it finishes, and the GPU's timing must be exclusive anyway. Returns the
    open lock file (closing it releases the lock), or None without a cache folder."""
    folder = request.get("judge_cache_directory")
    if not folder:
        return None
    path = os.path.join(os.path.dirname(folder.rstrip("/")),
                        f"uid-{int(request.get('sandbox_uid', 65534))}.lock")
    handle = open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600),
                  "rb", buffering=0)
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def evaluate(request):
    lock = _lock_sandbox_uid(request)
    try:
        return _evaluate_locked(request)
    finally:
        if lock is not None:
            lock.close()


def _reference_request(request, arm):
    """The request of one of the reference's timed children (arm "eager" or "compile"): the
    candidate's, with the reference arm and a scratch folder of its own outside the
    candidate's (so the candidate cannot reach its inputs or its torch.compile caches)."""
    scratch = os.path.join(request["reference_scratch_directory"], arm)
    cache = request.get("judge_cache_directory") or scratch
    for path in (scratch, cache):
        os.makedirs(path, exist_ok=True)
    return dict(request, arm="reference", reference_arm=arm, scratch_directory=scratch,
                cache_directory=cache)


# The most processes one arm may be timed in (timing.processes): two descriptors each go to the
# kept judge, within handover.MAX_FDS.
MAX_TIMING_PROCESSES = 8


def _timing_processes(request):
    """How many processes time the eager arm and the candidate's (docs/verdict.md, "Processes
    per arm"): the request's timing.processes, capped; on a GPU one where the cached eager
    baseline's calls take timing.processes_below_ms or more, since the state a process brings
    to its calls is a few hundred nanoseconds of a device call, which only short calls feel.
    The judge may use fewer of them (Judge.trim_timing_processes)."""
    from . import harness

    try:
        count = max(1, min(MAX_TIMING_PROCESSES,
                           int((request.get("timing") or {}).get("processes", 1))))
    except (TypeError, ValueError):
        return 1
    eager = (request.get("baselines") or {}).get("eager")
    summary = eager.get("device") if isinstance(eager, dict) else None
    median = summary.get("median_ms") if isinstance(summary, dict) else None
    if isinstance(median, (int, float)) and median >= harness.processes_below_ms(request):
        return 1
    return count


def _evaluate_locked(request):
    global _prepared
    started = time.monotonic()
    # beside the candidate's scratch folder, which is all the candidate may write
    request = dict(request, reference_scratch_directory=os.path.join(
        os.path.dirname(request["scratch_directory"].rstrip("/")), "reference"))
    limits = request.get("limits", {})
    wall = float(limits.get("wall_seconds", 300))
    output_cap = int(limits.get("output_bytes", 65536))
    judge_socket, candidate_socket = socket.socketpair()
    # each timed child's device record goes to the judge over a socket of its own
    judge_record_socket, candidate_record_socket = socket.socketpair()
    # the device gate of the candidate's first trial call (device_gate.py): on a GPU only
    judge_gate_socket, candidate_gate_socket = (socket.socketpair()
                                                if request.get("device") == "cuda" else
                                                (None, None))
    candidate_out_read, candidate_out_write = os.pipe()
    candidate_err_read, candidate_err_write = os.pipe()
    judge_err_read, judge_err_write = os.pipe()
    result_read, result_write = os.pipe()
    own_ends = [candidate_out_write, candidate_err_write, judge_err_write, result_write]
    # the reference's timed children, only when the baselines are not cached: eager, and
    # torch.compile in a child of its own (the judge ends it past its cap: the eager arm
    # stays); the same runner as the candidate's, each in a sandbox of its own
    timing_reference = not request.get("baselines")
    timing_compile = timing_reference and bool(request.get("measure_compile", True))
    judge_reference_socket, reference_socket = socket.socketpair()
    judge_reference_record, reference_record_socket = socket.socketpair()
    judge_compile_socket, compile_socket = socket.socketpair()
    judge_compile_record, compile_record_socket = socket.socketpair()
    eager_request = _reference_request(request, "eager") if timing_reference else None
    compile_request = _reference_request(request, "compile") if timing_compile else None
    # before the children are forked: each closes what it inherits of the worker's
    kept = _kept_judge_for(request)
    taken = _prepared_for(request)
    uid = int(request.get("sandbox_uid", 65534))
    # what else runs as this uid is no process of this evaluation's (another worker's kept
    # judge: kagent eval and kagentd's lane 0 share a uid, one at a time): ended first
    _kill_sandbox_user(uid, _staying_pids() + ([taken.pid] if taken is not None else []))

    def timed_child(child_request, sock, record_socket, out_fd, err_fd, gate_socket=None):
        from . import candidate

        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        # nothing of the worker's (its protocol stream, other pipes) stays open in the sandbox
        keep = sorted(item.fileno() for item in (sock, record_socket, gate_socket)
                      if item is not None)
        start = 3
        for fd in keep:
            os.closerange(start, fd)
            start = fd + 1
        os.closerange(start, 1 << 16)
        child_request = dict(child_request, record_fd=record_socket.fileno())
        if gate_socket is not None:
            child_request["gate_fd"] = gate_socket.fileno()
        candidate.main(sock, child_request)

    candidate_fds = {"candidate": candidate_socket, "record": candidate_record_socket,
                     "stdout": candidate_out_write, "stderr": candidate_err_write}
    if candidate_gate_socket is not None:
        candidate_fds["gate"] = candidate_gate_socket
    # the prepared process runs in folders of its own: the judge is told them too
    in_prepared = None if taken is None else dict(request, scratch_directory=taken.scratch,
                                                  cache_directory=taken.cache)
    marks = {"start": time.monotonic()}
    refused = taken.hand_over(in_prepared, candidate_fds) if taken is not None else None
    if taken is not None and refused is None:
        candidate_cache, request = request["cache_directory"], in_prepared
        candidate_pid = taken.pid
        _children.add(candidate_pid)
    else:
        if taken is not None:
            _log(f"the prepared candidate process {taken.pid} was not used: {refused}")
            taken.finish(None)
            taken = None
        candidate_pid = _fork_child(lambda: timed_child(request, candidate_socket,
                                                        candidate_record_socket,
                                                        candidate_out_write, candidate_err_write,
                                                        candidate_gate_socket))
    marks["candidate"] = time.monotonic()
    _prepare_next(request)
    reference_pid = compile_pid = None
    if timing_reference:
        reference_pid = _fork_child(lambda: timed_child(eager_request, reference_socket,
                                                        reference_record_socket,
                                                        judge_err_write, judge_err_write))
    if timing_compile:
        compile_pid = _fork_child(lambda: timed_child(compile_request, compile_socket,
                                                      compile_record_socket,
                                                      judge_err_write, judge_err_write))
    # the eager arm's and the candidate's further timed processes (timing.processes): the
    # same runner in the same sandbox as their arm's first, loading beside the trials
    extras = []
    for index in range(1, _timing_processes(request)):
        for arm, arm_request, out_fd, err_fd in (
                ("candidate", request, candidate_out_write, candidate_err_write),
                ("eager", eager_request, judge_err_write, judge_err_write)):
            if arm_request is None:
                continue
            judge_end, child_end = socket.socketpair()
            judge_record, child_record = socket.socketpair()
            pid = _fork_child(lambda: timed_child(arm_request, child_end, child_record,
                                                  out_fd, err_fd))
            extras.append({"name": f"{arm}_process{index}", "arm": arm, "pid": pid,
                           "scratch": arm_request["scratch_directory"],
                           "sockets": (judge_end, child_end, judge_record, child_record)})

    judge_fds = {"judge": judge_socket, "result": result_write, "judge_err": judge_err_write,
                 "candidate_record": judge_record_socket}
    if judge_gate_socket is not None:
        judge_fds["candidate_gate"] = judge_gate_socket
    message = {"op": "evaluate", "request": request, "candidate_pid": candidate_pid,
               "prepared_pid": _prepared.pid if _prepared is not None else None}
    for arm, pid, arm_request, judge_end, record_end in (
            ("reference", reference_pid, eager_request, judge_reference_socket,
             judge_reference_record),
            ("compile", compile_pid, compile_request, judge_compile_socket,
             judge_compile_record)):
        if pid is not None:
            judge_fds.update({arm: judge_end, f"{arm}_record": record_end})
            message.update({f"{arm}_pid": pid,
                            f"{arm}_scratch": arm_request["scratch_directory"]})
    for extra in extras:
        judge_fds.update({extra["name"]: extra["sockets"][0],
                          extra["name"] + "_record": extra["sockets"][2]})
    message["timing_processes"] = [{key: extra[key] for key in ("name", "arm", "pid", "scratch")}
                                   for extra in extras]
    message["judge_home"], message["caches"] = _judge_folders(request)
    try:
        kept.send(message, judge_fds)
    except OSError:
        # it ended since it was asked: a new one in its place
        kept.end()
        kept = _kept_judge_for(request)
        kept.send(message, judge_fds)
    for fd in own_ends:
        os.close(fd)
    for ours in (judge_socket, candidate_socket, judge_record_socket, candidate_record_socket,
                 judge_reference_socket, reference_socket, judge_reference_record,
                 reference_record_socket, judge_compile_socket, compile_socket,
                 judge_compile_record, compile_record_socket, judge_gate_socket,
                 candidate_gate_socket, *(item for extra in extras
                                          for item in extra["sockets"])):
        if ours is not None:
            ours.close()

    tails = {"stdout": CappedTail(output_cap), "stderr": CappedTail(output_cap),
             "judge": CappedTail(output_cap), "result": CappedTail(MAX_LINE)}
    open_fds = {candidate_out_read: "stdout", candidate_err_read: "stderr",
                judge_err_read: "judge", result_read: "result"}
    statuses = {candidate_pid: None}
    references = [pid for pid in (reference_pid, compile_pid) if pid is not None]
    references += [extra["pid"] for extra in extras]
    for pid in references:
        statuses[pid] = None
    killed_for_timeout = judged = False
    deadline = started + wall + 30
    while open_fds or any(status is None for status in statuses.values()):
        if not judged and (result_read not in open_fds or not kept.alive()):
            # the judge has spoken (or died): the others have nothing left to do
            judged = True
            marks["judged"] = time.monotonic()
            _kill_group(candidate_pid)
            for reference in references:
                _kill_group(reference)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if killed_for_timeout:
                break  # ten seconds after SIGKILL: stop waiting for the pipes
            killed_for_timeout = True
            for pid in statuses:
                _kill_group(pid)
            kept.end()
            deadline = time.monotonic() + 10
            continue
        if open_fds:
            readable, _, _ = select.select(list(open_fds), [], [], min(remaining, 0.2))
        else:
            readable = []
            time.sleep(0.02)
        for fd in readable:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                tails[open_fds[fd]].add(chunk)
            else:
                os.close(fd)
                del open_fds[fd]
        for pid in statuses:
            if statuses[pid] is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    statuses[pid] = status
    for fd in open_fds:
        os.close(fd)
    for pid in statuses:
        if statuses[pid] is None:
            _kill_group(pid)
            statuses[pid] = os.waitpid(pid, 0)[1]
    _kill_group(candidate_pid)
    marks["ended"] = time.monotonic()
    kept_alive = kept.alive()
    # the next evaluation's process must have its uid before the uid's lock goes: another
    # worker's sweep of the uid must see it (prepared.py)
    if _prepared is not None and not _prepared.wait_sandboxed():
        _log(f"the prepared candidate process {_prepared.pid} did not enter its sandbox "
             f"within {prepared.SANDBOXED_SECONDS} s: ended")
        _prepared.finish(None)
        _prepared = None
    _kill_sandbox_user(uid, _staying_pids())
    _reap_orphans()
    _children.clear()
    marks["swept"] = time.monotonic()
    if taken is not None:
        taken.end()
        taken.finish(candidate_cache)
    marks["finished"] = time.monotonic()
    if kept_alive:
        kept.release()
    marks["released"] = time.monotonic()
    judge_process = (dict(_status(None), kept=True, pid=kept.pid) if kept_alive else
                     dict(_status(kept.status), kept=False, pid=kept.pid))

    judge_result = None
    raw = bytes(tails["result"].data).strip()
    if raw:
        try:
            judge_result = json.loads(raw)
        except ValueError:
            judge_result = None
    candidate_status = _status(statuses[candidate_pid])
    if isinstance(judge_result, dict) and isinstance(judge_result.get("phase_seconds"), dict):
        judge_result["phase_seconds"].update(_worker_phases(started, marks))
    if judge_result and (judge_result.get("candidate_error") or {}).get("kind") == "timeout":
        killed_for_timeout = True
    return {
        "type": "result", "id": request.get("id"), "wall_seconds": time.monotonic() - started,
        "judge": judge_result,
        "judge_process": dict(judge_process, stderr=tails["judge"].text()),
        "candidate_process": dict(candidate_status, killed_for_timeout=killed_for_timeout,
                                  prepared=taken is not None,
                                  stdout=tails["stdout"].text(), stderr=tails["stderr"].text(),
                                  stdout_bytes=tails["stdout"].total,
                                  stderr_bytes=tails["stderr"].total),
    }


def _worker_phases(started, marks):
    """The worker's own phases of an evaluation (docs/verdict.md, phase_seconds), from the
    moments `marks` names: its setup before the candidate's process, the candidate's start
    (a fork, or the hand-over to a prepared process and its wait for it), and after the
    judge's result the wait for the evaluation's processes to end, the uid's sweep, the
    prepared process's folders, and the kept judge's release."""
    steps = [("worker_setup", None, "start"), ("worker_candidate", "start", "candidate"),
             ("worker_processes_end", "judged", "ended"), ("worker_sweep", "ended", "swept"),
             ("worker_folders", "swept", "finished"),
             ("worker_release", "finished", "released"), ("worker_wall", None, "released")]
    moments = dict(marks)
    moments[None] = started
    return {name: round(moments[end] - moments[begin], 4) for name, begin, end in steps
            if begin in moments and end in moments}


def check_problem(request):
    """The check_problem request: the problem is loaded, its Model built and its inputs made
    and run once, in a child set up as the judge is (its prints never reach the protocol
    stream, and it runs as the sandbox uid when the worker is root), within the wall limit."""
    lock = _lock_sandbox_uid(request)
    try:
        return _check_problem_locked(request)
    finally:
        if lock is not None:
            lock.close()


def _check_problem_locked(request):
    started = time.monotonic()
    wall = float(request.get("limits", {}).get("wall_seconds", 300))
    output_read, output_write = os.pipe()
    result_read, result_write = os.pipe()

    def setup():
        from . import judge, model

        os.close(output_read)
        os.close(result_read)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_write, 1)
        os.dup2(output_write, 2)
        _drop_judge_privileges(request)
        # a whole model's analysis (kagent model) is this check and more
        if isinstance(request.get("model_analysis"), dict):
            model.analyze_child(request, result_write)
        judge.check_problem_child(request, result_write)

    pid = _fork_child(setup)
    os.close(output_write)
    os.close(result_write)
    tails = {output_read: CappedTail(65536), result_read: CappedTail(MAX_LINE)}
    deadline, timed_out, watching = started + wall, False, set(tails)
    # until the child has answered or ended; what it left running must not hold the worker
    while result_read in watching:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        readable, _, _ = select.select(list(watching), [], [], min(remaining, 0.2))
        for fd in readable:
            chunk = os.read(fd, 1 << 16)
            tails[fd].add(chunk)
            if not chunk:
                watching.discard(fd)
    done, status = 0, None
    # a child that answered is exiting: give it a moment, so that its status is its own
    for _ in range(0 if timed_out else 100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    _kill_group(pid)
    if not done:
        status = os.waitpid(pid, 0)[1]
    while output_read in watching and select.select([output_read], [], [], 0)[0]:
        chunk = os.read(output_read, 1 << 16)
        if not chunk:
            break
        tails[output_read].add(chunk)
    for fd in tails:
        os.close(fd)
    _kill_sandbox_user(int(request.get("sandbox_uid", 65534)), _staying_pids())
    _reap_orphans()
    _children.clear()
    try:
        answer = json.loads(bytes(tails[result_read].data).strip() or b"null")
    except ValueError:
        answer = None
    process = dict(_status(status), stderr=tails[output_read].text())
    if not isinstance(answer, dict):
        last = (process["stderr"].strip().splitlines() or [""])[-1][:1000]
        suffix = f": {last}" if last else ""
        # a hang or a crash while only the problem's code and torch ran is the problem's;
        # an exit without an answer is the child's own failure (setup, see _fork_child)
        if timed_out or process["signal"]:
            ended = (f"did not finish within {wall:g} s" if timed_out
                     else f"ended with signal {process['signal']}")
            answer = {"problem_error": f"loading the problem and running its reference {ended}"
                                       f"{suffix}"}
        else:
            answer = {"internal_error": f"the check's child exited with status "
                                        f"{process['exit_code']}{suffix}"}
    return {"type": "problem_check", "id": request.get("id"),
            "wall_seconds": time.monotonic() - started,
            "problem_error": answer.get("problem_error"),
            "internal_error": answer.get("internal_error"), "process": process,
            "model_analysis": answer.get("model_analysis")}


def _handle_check_problem(request):
    missing = [key for key in ("problem_path", "device", "scratch_directory")
               if key not in request]
    if missing:
        return {"type": "error", "id": request.get("id"),
                "message": "request lacks " + ", ".join(missing)}
    return check_problem(request)


def place_on_device(request, served_gpu):
    """Sets the request's device_ordinal, its GPU (gpu_index) as this process and its children
    number devices (torch.cuda.set_device). A worker started for GPU N sees only that GPU, as
    device 0, and refuses a request for another; a worker that sees every GPU of its parent
    numbers them as the request does. Returns why the request cannot run here, or None."""
    if request.get("device") != "cuda":
        request["device_ordinal"] = 0
        return None
    gpu = request.get("gpu_index", 0)
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        return f"gpu_index {gpu!r} is not a GPU number"
    if served_gpu is None:
        request["device_ordinal"] = gpu
        return None
    if not served_gpu.isdigit():
        return f"this worker's KAGENT_WORKER_GPU {served_gpu!r} is not a GPU number"
    if gpu != int(served_gpu):
        return f"this worker serves GPU {served_gpu}, not GPU {gpu}"
    request["device_ordinal"] = 0
    return None


def handle(line):
    try:
        request = json.loads(line)
    except ValueError as error:
        return {"type": "error", "message": f"request is not JSON: {error}"}
    if not isinstance(request, dict):
        return {"type": "error", "message": "request is not a JSON object"}
    misplaced = place_on_device(request, SERVED_GPU)
    if misplaced is not None:
        return {"type": "error", "id": request.get("id"), "message": misplaced}
    if request.get("type") == "check_problem":
        return _handle_check_problem(request)
    if request.get("type") != "evaluate":
        return {"type": "error", "id": request.get("id"),
                "message": f"unknown request type {request.get('type')!r}"}
    missing = [key for key in ("problem_path", "candidate_path", "device", "scratch_directory",
                               "cache_directory", "sandbox_library") if key not in request]
    if missing:
        return {"type": "error", "id": request.get("id"),
                "message": "request lacks " + ", ".join(missing)}
    return evaluate(request)


def serve(reader, writer):
    writer.write(json.dumps(hello()).encode() + b"\n")
    writer.flush()
    while True:
        line = reader.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE:
            # drain the rest of the oversized line
            while line and not line.endswith(b"\n"):
                line = reader.readline(MAX_LINE)
            response = {"type": "error", "message": f"request line exceeds {MAX_LINE} bytes"}
        elif not line.strip():
            continue
        else:
            response = handle(line)
        writer.write(json.dumps(response).encode() + b"\n")
        writer.flush()


def _socket_problem(path):
    """What is wrong with serving on path, or None: the error to print instead of a traceback."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return f"{path} is a folder; name the socket inside it, e.g. {path}/worker.sock"
    if os.path.lexists(path) and not stat.S_ISSOCK(os.lstat(path).st_mode):
        return f"{path} exists and is not a socket; remove it or name another path"
    if not os.path.isdir(folder):
        return f"no folder {folder} for the socket {path}; create it first or name another path"
    return None


def _listen(path):
    """A listening socket at path. It is bound under a temporary name and renamed once it
    listens (replacing a dead worker's socket), so that no socket file ever exists that
    refuses connections while its worker lives: runs remove such files as left by a crash."""
    global _listening
    temporary = os.path.join(os.path.dirname(path) or ".", f".{os.getpid()}.bind")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(temporary)
    os.chmod(temporary, 0o600)
    # the kernel's largest backlog: a daemon's sessions may all connect to one shared worker
    # at once, and a full backlog makes a Unix socket's connect fail with EAGAIN at once
    listener.listen(socket.SOMAXCONN)
    os.rename(temporary, path)
    _listening = (path, os.lstat(path).st_ino)
    return listener


def main(argv=None):
    import ctypes

    parser = argparse.ArgumentParser(prog="kagent_runner.worker")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true")
    mode.add_argument("--socket")
    parser.add_argument("--parent", type=int,
                        help="end when this process, which started the worker, ends")
    arguments = parser.parse_args(argv)
    problem = arguments.socket and _socket_problem(arguments.socket)
    if problem:
        parser.error(problem)
    torch.set_num_threads(1)
    _warm_triton()
    signal.signal(signal.SIGTERM, _terminate)
    libc = ctypes.CDLL(None)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: see _reap_orphans
    if arguments.parent is not None:
        # PR_SET_PDEATHSIG: SIGTERM (_terminate) when the parent dies, even by kill -9; it may
        # have died before this took effect.
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != arguments.parent:
            return 0
    if arguments.stdio:
        serve(sys.stdin.buffer, sys.stdout.buffer)
        return 0
    listener = _listen(arguments.socket)
    print(f"kagent worker listening on {arguments.socket}", file=sys.stderr, flush=True)
    while True:
        connection, _ = listener.accept()
        with connection:
            reader = connection.makefile("rb")
            writer = connection.makefile("wb")
            try:
                serve(reader, writer)
            except (BrokenPipeError, ConnectionResetError):
                pass


if __name__ == "__main__":
    sys.exit(main())
