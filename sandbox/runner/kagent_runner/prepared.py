"""The prepared candidate process (docs/worker-protocol.md, "Prepared candidate processes"):
a candidate process the worker makes while it judges the evaluation before, so that the
next evaluation does not wait for a process to enter its sandbox and create its CUDA context.
With eight lanes to a GPU, that wait was the largest part of an evaluation's load phase, and
it grew with the lanes of the whole host: creating a context is mostly serialised across it
(docs/benchmarks.md, issue 16).

The process is a candidate process in every respect but its folders: it enters the whole
sandbox (network namespace, limits, the evaluation's uid, Landlock, seccomp) with a scratch
and a cache folder of its own, the worker's, then creates its context and waits, running
nothing but the runner's code, until the worker hands it an evaluation whose device, uid,
limits and libraries are those it was made for. Landlock scopes its signals and tracing away
from the candidate the lane judges meanwhile (same uid, another domain); a process that did
not survive (or would not answer) is ended and the evaluation forks one as before."""
import json
import os
import select
import shutil
import signal
import socket
import time

from . import handover

# The prepared process's two words to the worker, in this order: in its sandbox (running as
# the uid), then ready (its context made).
SANDBOXED = b"\x01"
READY = b"\x02"
# How long the worker waits for a prepared process to enter its sandbox (tens of ms).
SANDBOXED_SECONDS = 30
# How long the worker waits for a prepared process still making its context: past it, a
# fresh process would be no faster.
READY_SECONDS = 60
# A prepared process that no evaluation took for this long ends (it holds a context).
IDLE_SECONDS = 300
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PROCESS_NAME = b"kagent-prepared"


def key(request):
    """What a prepared process was made for: an evaluation it serves must match it."""
    return json.dumps([request.get(name) for name in (
        "device", "device_ordinal", "sandbox_uid", "limits", "sandbox_library",
        "trace_library", "cuda_library")], sort_keys=True)


def folder_for(request):
    """Where a prepared process's folders go: beside the sandbox uid's judge and candidate
    caches (the worker's, never the candidate's), or None without a sandbox cache."""
    judge_cache = request.get("judge_cache_directory")
    if not judge_cache:
        return None
    return os.path.join(os.path.dirname(judge_cache.rstrip("/")),
                        f"prepared-uid{int(request.get('sandbox_uid', 65534))}")


def _empty_folder(path):
    try:
        return not os.listdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def new_candidate(request):
    """Whether the evaluation's candidate has no cache yet. One judged before runs in a
    process made for it, as before, which finds its compiled kernels there; a prepared
    process has a cache of its own (moved to the candidate's after: finish)."""
    return _empty_folder(request.get("cache_directory") or "")


def _ending(status):
    """A wait status in words."""
    if status is None:
        return "still running"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _remove_abandoned(base):
    """Removes the folders of prepared processes whose worker has gone (killed before it could
    remove them): each folder's name starts with its worker's pid."""
    for name in os.listdir(base):
        owner = name.partition("-")[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except OSError:
            pass


class PreparedCandidate(handover.KeptProcess):
    """One prepared process, as the worker sees it."""

    def __init__(self, pid, control, key_, folder):
        super().__init__(pid, control)
        self.key = key_
        self.folder = folder
        self.scratch = os.path.join(folder, "scratch")
        self.cache = os.path.join(folder, "cache")
        self.handed = False
        self.sandboxed = False

    @classmethod
    def start(cls, request, fork_child):
        """Forks a prepared process for evaluations like `request` (its device, uid, limits
        and libraries); None where the request has no sandbox cache to put its folders in.
        `fork_child` is the worker's fork (a new session, the child's failures printed)."""
        base = folder_for(request)
        if base is None:
            return None
        os.makedirs(base, mode=0o711, exist_ok=True)
        _remove_abandoned(base)
        folder = os.path.join(base, f"{os.getpid()}-{time.monotonic_ns()}")
        # the sandbox gives scratch and cache to the uid; the uid only passes through folder
        os.mkdir(folder, 0o711)
        for path in (os.path.join(folder, "scratch"), os.path.join(folder, "cache")):
            os.mkdir(path, 0o700)
        own = dict(request, scratch_directory=os.path.join(folder, "scratch"),
                   cache_directory=os.path.join(folder, "cache"))
        worker_end, prepared_end = socket.socketpair()
        worker = os.getpid()
        # made before the fork: a process made while an evaluation is under way must not
        # keep that evaluation's pipes open
        keep = prepared_end.fileno()

        def child():
            import ctypes

            os.closerange(3, keep)
            os.closerange(keep + 1, 1 << 16)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            libc = ctypes.CDLL(None)
            libc.prctl(PR_SET_NAME, PROCESS_NAME, 0, 0, 0)
            _serve(prepared_end, own, libc, worker)

        pid = fork_child(child)
        prepared_end.close()
        return cls(pid, worker_end, key(request), folder)

    def unfit(self, request):
        """Why it cannot serve evaluations like this one, or None: it must be alive, not yet
        used, and made for their device, uid, limits and libraries."""
        if self.handed:
            return "it served an evaluation already"
        if not self.alive():
            return f"it had ended ({_ending(self.status)})"
        if key(request) != self.key:
            return "it was made for another device, uid, limits or libraries"
        return None

    def _heard(self, word, seconds):
        readable, _, _ = select.select([self.control], [], [], seconds)
        return bool(readable) and self.control.recv(1) == word

    def wait_sandboxed(self):
        """Waits until it runs as the sandbox uid, and says whether it does (one that does not
        is ended): only then may
        the worker let go of the uid's lock, since another worker's sweep of the uid ends
        only the processes that already run as it."""
        try:
            if not self.sandboxed:
                self.sandboxed = self._heard(SANDBOXED, SANDBOXED_SECONDS)
        except OSError:
            pass
        if not self.sandboxed:
            self.end()
        return self.sandboxed

    def hand_over(self, request, fds):
        """Gives it the evaluation: its request (with this process's folders) and sockets,
        once it has said it is ready. Returns None once it has taken the evaluation, else why
        not (the process is then ended)."""
        try:
            # a candidate of its uid cannot signal it (Landlock's scope), but nothing is lost
            os.kill(self.pid, signal.SIGCONT)
            self.wait_sandboxed()
            if self.sandboxed and self._heard(READY, READY_SECONDS):
                handover.send(self.control, {"request": request}, fds)
                self.handed = True
                return None
            why = "it did not say it was ready"
        except OSError as error:
            why = f"handing it the evaluation failed: {error}"
        self.end()
        return f"{why} ({_ending(self.status)})"

    def end(self):
        """As KeptProcess.end; its folders stay until finish()."""
        super().end()
        self.sandboxed = False

    def finish(self, cache_directory):
        """After its evaluation (the process has been ended): the compiled kernels go to the
        candidate's cache, as a process forked for it would have left them, and the rest is
        removed."""
        if cache_directory and _empty_folder(cache_directory):
            try:
                if os.path.isdir(cache_directory):
                    os.rmdir(cache_directory)
                os.rename(self.cache, cache_directory)
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


def _serve(control, request, libc, worker):
    """The prepared process: sandbox, context, then one evaluation. Never returns."""
    from . import candidate

    runner = candidate.CandidateRunner(None, request)
    try:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        runner.enter_sandbox()
        # again: changing the uid cleared it; the process ends with the worker
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != worker:
            os._exit(0)
        control.sendall(SANDBOXED)
        runner.start_context()
        control.sendall(READY)
    except BaseException:  # noqa: B902 - the worker forks a process as before
        os._exit(70)
    readable, _, _ = select.select([control], [], [], IDLE_SECONDS)
    message, fds = handover.receive(control) if readable else (None, {})
    if message is None:
        os._exit(0)
    os.dup2(fds.pop("stdout"), 1)
    os.dup2(fds.pop("stderr"), 2)
    sock = socket.socket(fileno=fds.pop("candidate"))
    evaluation = dict(message["request"], record_fd=fds.pop("record"))
    if "gate" in fds:
        evaluation["gate_fd"] = fds.pop("gate")
    control.close()
    candidate.serve_prepared(runner, sock, evaluation)
