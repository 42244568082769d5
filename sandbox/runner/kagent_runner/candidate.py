"""The sandboxed timed child: the candidate's, or one of the reference's (eager PyTorch, or
torch.compile in a child of its own that the judge may abandon past its cap).

Forked by the worker, it confines itself through libkagent-sandbox.so and opens its device
record (device_record.py) before any untrusted code is imported, then loads ModelNew (or the
problem's Model) and runs it only when the judge asks. Every arm is timed through this same
code (docs/verdict.md, "One harness"). It never holds the reference outputs and never times
anything: the judge owns the clock, reads the outputs of a timed call itself (CUDA IPC handles
of the output allocations, or the judge's shared files on the CPU) and reads the device record
the library writes; what this process sends back is JSON the judge checks, and nothing it
prints is read. Everything here after the candidate's import is untrusted.
"""
import collections
import ctypes
import json
import os
import signal
import sys
import tempfile
import time
import traceback

import torch

from . import compare, device_gate, device_record, kernel_trace, problem, processes, tensors
from .problem import CandidateFailure
from .channel import Channel, ChannelClosed

# A timed call's outputs stay allocated for the next calls, up to these bounds, so that each
# call's outputs land at other addresses of the child's memory: where a child's outputs lie
# moved a 4 MB kernel's time by several percent from one timed child to the next (issue 10),
# and a verdict that averages over many places does not carry one place's luck.
OUTPUT_SPREAD_CALLS = 16
OUTPUT_SPREAD_BYTES = 64 << 20

# Captured before the candidate's code exists, so a replaced function cannot fool the runner.
_synchronize = torch.cuda.synchronize
_no_grad = torch.no_grad
_profile = torch.profiler.profile
_empty_cache = torch.cuda.empty_cache


def _watched_objects():
    """(description, object) pairs whose identity must not change while the candidate runs."""
    import time as time_module

    watched = [
        ("torch.cuda.synchronize", lambda: torch.cuda.synchronize),
        ("torch.cuda.Event", lambda: torch.cuda.Event),
        ("torch.cuda.Event.record", lambda: torch.cuda.Event.record),
        ("torch.cuda.Event.elapsed_time", lambda: torch.cuda.Event.elapsed_time),
        ("torch.cuda.Event.synchronize", lambda: torch.cuda.Event.synchronize),
        ("torch.cuda.Stream", lambda: torch.cuda.Stream),
        ("torch.cuda.current_stream", lambda: torch.cuda.current_stream),
        ("torch.cuda.Stream.synchronize", lambda: torch.cuda.Stream.synchronize),
        ("time.perf_counter", lambda: time_module.perf_counter),
        ("time.perf_counter_ns", lambda: time_module.perf_counter_ns),
        ("time.monotonic", lambda: time_module.monotonic),
        ("time.time", lambda: time_module.time),
        ("torch.profiler.profile", lambda: torch.profiler.profile),
        ("torch.Tensor.copy_", lambda: torch.Tensor.copy_),
        ("torch.nn.Module.__call__", lambda: torch.nn.Module.__call__),
        ("torch.cuda module", lambda: sys.modules.get("torch.cuda")),
        ("time module", lambda: sys.modules.get("time")),
        ("runner synchronize", lambda: globals().get("_synchronize")),
        ("runner profiler", lambda: globals().get("_profile")),
        # the runner's own code answers the judge's clock: replacing it would let "done" come
        # before the work is finished
        ("the runner class", lambda: globals().get("CandidateRunner")),
        ("the channel class", lambda: Channel),
    ]
    for name in ("forward", "synchronize", "serve", "deliver", "publish", "poison", "profile",
                 "counters", "tamper_check", "timed_call"):
        watched.append((f"CandidateRunner.{name}",
                        lambda name=name: getattr(globals().get("CandidateRunner"), name, None)))
    for name in ("send_json", "_send", "receive", "_fill"):
        watched.append((f"Channel.{name}", lambda name=name: getattr(Channel, name, None)))
    try:
        import triton.testing

        watched.append(("triton.testing.do_bench", lambda: triton.testing.do_bench))
    except Exception:  # noqa: BLE001 - triton is optional (CPU runs)
        pass
    return watched


def _stop_compile_workers():
    """Ends torch.compile's pool of compile processes once the reference is compiled: no
    process but the timed ones should stand beside the GPU while anything is timed. Killed
    first: inductor's own shutdown waits for each worker to finish starting (7 s of a cold
    baseline's 21 s on an H100), and a killed pool has nothing left to wait for."""
    for pid in processes.descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        from torch._inductor import async_compile

        async_compile.shutdown_compile_workers()
    except Exception:  # noqa: BLE001 - an older torch without the call keeps its pool
        pass


def _classify(error):
    name = type(error).__name__
    if isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in str(error):
        return "oom"
    if "CompilationError" in name or "Error building extension" in str(error):
        return "compile"
    if name == "CompileError" and type(error).__module__ == "kagent_runner.cuda":
        return "compile"
    module = type(error).__module__ or ""
    if module.startswith("triton") and "compil" in module:
        return "compile"
    return "runtime"


def _trace_tail(limit=4000):
    text = traceback.format_exc()
    return text[-limit:]


class CandidateRunner:
    def __init__(self, channel, request):
        self.channel = channel
        self.request = request
        self.device = request["device"]
        self.model = None
        self.model_class = None
        self.inputs = []
        self.receive = []
        self.expected = []
        self.last_output = None
        self.earlier_outputs = collections.deque()  # (bytes, outputs) of recent timed calls
        self.tf32 = {}
        self.watched = []
        self.watched_identity = {}
        # the models this child times, by arm: {"candidate"}, {"eager"} or {"compile"}
        self.arm = request.get("arm", "candidate")
        self.models = {}
        self.compile_error = None
        self.pool = None
        self.pool_layout = []
        self.timed_receive = []
        self.recorder = None
        self.gate = None
        self.exporter = None
        # how long each step of this process's start took, in seconds, for the judge's
        # phase_seconds (candidate_<step>): where a load's time went when lanes share a host.
        # Reported by the child itself, so a diagnostic, never a measure the verdict rests on
        self.load_steps = {}
        self.step_started = time.monotonic()

    def mark(self, step):
        now = time.monotonic()
        self.load_steps[step] = round(now - self.step_started, 4)
        self.step_started = now


    # -- setup ---------------------------------------------------------------------------
    def enter_sandbox(self):
        scratch = self.request["scratch_directory"]
        cache = self.request["cache_directory"]
        directories = {
            "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
            "TORCH_EXTENSIONS_DIR": os.path.join(cache, "torch_extensions"),
            # the reference's compiled arm keeps its cache between evaluations (the candidate
            # cannot write there); a candidate's is its own scratch
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache if self.arm == "reference" else
                                                    scratch, "inductor"),
            "XDG_CACHE_HOME": os.path.join(scratch, "cache"),
            "CUDA_CACHE_PATH": os.path.join(scratch, "nv"),
            "KAGENT_CUDA_CACHE_DIR": os.path.join(cache, "cuda"),
        }
        for variable, path in directories.items():
            os.makedirs(path, exist_ok=True)
            os.environ[variable] = path
        # kagent_runner.cuda (NVRTC kernels) finds libkagent-cuda.so here
        cuda_library = self.request.get("cuda_library")
        if not cuda_library and self.request.get("sandbox_library"):
            cuda_library = os.path.join(os.path.dirname(self.request["sandbox_library"]),
                                        "libkagent-cuda.so")
        if cuda_library and os.path.exists(cuda_library):
            os.environ["KAGENT_CUDA_LIBRARY"] = cuda_library
        # read by the driver when the context is made (docs/verdict.md, "Hardware queues")
        queues = (self.request.get("limits") or {}).get("device_queues")
        if isinstance(queues, int) and queues > 0:
            os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(queues)
        os.environ["TMPDIR"] = scratch
        # the worker's process may have chosen /tmp already, which the sandbox cannot write
        # (inductor's first compile of the reference makes a temporary folder there)
        tempfile.tempdir = scratch
        # compile workers would be processes beside the candidate's timed calls (the seal
        # forbids new ones, and a process holding the GPU is a finding); the reference's
        # child compiles in parallel, long before anything is timed (DenseNet121's compile
        # is most of its first evaluation)
        if self.arm != "reference":
            os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        os.environ["HOME"] = scratch
        # the sandbox uid has no passwd entry; getpass.getuser() must not need one
        os.environ["USER"] = os.environ["LOGNAME"] = "kagent-sandbox"
        policy = self.sandbox_policy(scratch, cache)
        library = ctypes.CDLL(self.request["sandbox_library"])
        library.kagent_sandbox_enter_json.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                      ctypes.c_size_t]
        library.kagent_sandbox_enter_json.restype = ctypes.c_int
        error = ctypes.create_string_buffer(2048)
        result = library.kagent_sandbox_enter_json(json.dumps(policy).encode(), error,
                                                   ctypes.sizeof(error))
        if result != 0:
            raise CandidateFailure("sandbox", "could not enter the sandbox: "
                                   + error.value.decode(errors="replace"))
        os.chdir(scratch)

    def sandbox_policy(self, scratch, cache):
        """What kagent_sandbox_enter_json is given (docs/sandbox.md)."""
        limits = self.request.get("limits", {})
        return {
            "scratch_directory": scratch,
            "writable_paths": [cache],
            "cpu_seconds": float(limits.get("cpu_seconds", 600)),
            "max_processes": int(limits.get("max_processes", 256)),
            "max_file_bytes": int(limits.get("max_file_bytes", 0)),
            "max_address_space_bytes": 0,
            "allow_gpu_devices": 1 if self.device == "cuda" else 0,
            # the lane's GPU's node only, where the worker knows it (command_worker.c)
            "own_gpu_node": os.environ.get("KAGENT_WORKER_GPU_NODE") or None
            if self.device == "cuda" else None,
            "new_network_namespace": 1,
            "unprivileged_id": int(self.request.get("sandbox_uid", 65534)),
        }

    def start_context(self):
        """The device's context, before the record opens; a prepared process (prepared.py)
        makes it before its evaluation is known."""
        if self.device == "cuda":
            torch.cuda.set_device(self.request["device_ordinal"])
            torch.empty(1, device="cuda")
            from . import cuda_ipc

            self.exporter = cuda_ipc.Exporter()

    def start_record(self):
        """The evaluation's device record and gate, from the sockets its request names."""
        if self.device == "cuda" and self.request.get("record_fd") is not None:
            # before the candidate's import: the library reads the judge's key itself
            self.recorder = device_record.ChildRecorder(self.request.get("trace_library"),
                                                        int(self.request["record_fd"]))
        if self.device == "cuda" and self.request.get("gate_fd") is not None:
            self.gate = device_gate.ChildGate(self.request.get("trace_library"),
                                              int(self.request["gate_fd"]))

    def synchronize(self):
        if self.device == "cuda":
            _synchronize()

    def load(self, setup):
        self.watched = _watched_objects()
        self.watched_identity = {name: id(get()) for name, get in self.watched}
        self.tf32 = setup.get("tf32", {})
        if self.arm == "reference":
            return self.load_reference(setup)
        self.mark("setup_wait")
        path = self.request["candidate_path"]
        try:
            module = problem.load_module(path, "kagent_candidate")
        except SyntaxError as error:
            raise CandidateFailure("compile", f"candidate is not valid Python: {error.msg} "
                                   f"(line {error.lineno})", _trace_tail())
        except BaseException as error:  # noqa: B902 - the candidate's failure is the verdict
            raise CandidateFailure("oom" if _classify(error) == "oom" else "compile",
                                   f"candidate does not import: {type(error).__name__}: {error}",
                                   _trace_tail())
        model_class = getattr(module, "ModelNew", None)
        if not isinstance(model_class, type):
            raise CandidateFailure("structure", "candidate defines no class ModelNew")
        self.model_class = model_class
        self.mark("import")
        copied = self.build(setup)
        self.mark("build")
        self.models = {"candidate": self.model}
        return copied

    def load_reference(self, setup):
        """The reference's arm: the problem's Model as eager PyTorch, or (reference_arm
        "compile") the same module under torch.compile, compiled and called once now (beside
        the judge's trials), so its timing starts warm. The compile has a child of its own so
        that the judge can end it past its cap without losing the eager arm."""
        module = problem.load_problem(self.request["problem_path"])
        self.model_class = module.Model
        copied = self.build(setup)
        if self.request.get("reference_arm") != "compile":
            self.models = {"eager": self.model}
        else:
            try:
                compiled = torch.compile(self.model)
                # through forward, as the timed calls run it: the same TF32 flags and grad
                # mode, which torch.compile guards on (else the first timed call recompiles)
                self.forward(compiled, problem.make_inputs(module, 0, "problem", self.device))
                self.last_output = None
                self.models["compile"] = compiled
                _stop_compile_workers()
            except Exception as error:  # noqa: BLE001 - the baseline's failure is reported
                self.compile_error = f"{type(error).__name__}: {str(error)[:500]}"
            if self.device == "cuda":
                _empty_cache()  # the judge's trials and the candidate need the memory
        return copied

    def build(self, setup):
        """ModelNew from the judge's seed and init inputs, with the reference's parameters
        copied in by name; the number copied. Again, at other sizes, for the judge's
        generalisation check."""
        problem.seed_everything(setup["seed"])
        try:
            with torch.device(self.device):
                model = self.model_class(*setup["init_inputs"])
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device)
        except BaseException as error:  # noqa: B902
            raise CandidateFailure("oom" if _classify(error) == "oom" else "structure",
                                   f"ModelNew(*get_init_inputs()) failed: "
                                   f"{type(error).__name__}: {error}", _trace_tail())
        copied = 0
        if isinstance(model, torch.nn.Module):
            own = model.state_dict()
            with _no_grad():
                for name, value in setup["state"].items():
                    target = own.get(name)
                    if (isinstance(target, torch.Tensor) and target.shape == value.shape
                            and target.dtype == value.dtype):
                        target.copy_(value)
                        copied += 1
        self.model = model
        return copied

    # -- running -------------------------------------------------------------------------
    def forward(self, model=None, inputs=None):
        torch.backends.cuda.matmul.allow_tf32 = bool(self.tf32.get("matmul", False))
        torch.backends.cudnn.allow_tf32 = bool(self.tf32.get("cudnn", True))
        model = self.model if model is None else model
        inputs = self.inputs if inputs is None else inputs
        try:
            with _no_grad():
                output = model(*inputs)
            self.synchronize()
        except BaseException as error:  # noqa: B902
            raise CandidateFailure(_classify(error), f"forward failed: {type(error).__name__}: "
                                   f"{error}", _trace_tail())
        self.last_output = output

    def poison(self):
        """Fills freed allocator blocks of the outputs' sizes with NaN (or a sentinel), so an
        output the candidate never writes cannot hold a stale, correct-looking value."""
        with _no_grad():
            for spec in self.expected:
                if spec["kind"] != "tensor":
                    continue
                dtype = tensors.dtype_from_name(spec["dtype"])
                block = torch.empty(spec["shape"], dtype=dtype, device=self.device)
                if dtype.is_floating_point or dtype.is_complex:
                    block.fill_(float("nan"))
                elif dtype == torch.bool:
                    block.fill_(True)
                else:
                    block.fill_(-7 if dtype.is_signed else 7)
                del block

    def deliver(self):
        leaves = compare.flatten(self.last_output)
        described = [compare.describe(path, value) for path, value in leaves]
        for index, ((path, value), info) in enumerate(zip(leaves, described)):
            if info.get("subclass"):
                continue  # the judge fails this output; its data is never copied
            if index >= len(self.expected) or index >= len(self.receive):
                continue
            spec = self.expected[index]
            slot = self.receive[index]
            if (info["kind"] == "tensor" and spec["kind"] == "tensor" and slot is not None
                    and info["dtype"] == spec["dtype"] and info["shape"] == spec["shape"]):
                with _no_grad():
                    torch.Tensor.copy_(slot, value.detach())
        self.synchronize()
        return described

    def release(self):
        """After a trial the outputs are in the judge's buffers: the child lets go of them,
        and of its cached device memory where the judge may need it for the next trial's
        inputs and reference (tensors.RELEASE_ROOM: a 6 GB problem does not fit twice)."""
        room = tensors.tensor_bytes(value for _, value in compare.flatten(self.last_output))
        self.last_output = None
        self.earlier_outputs.clear()
        if self.device == "cuda":
            tensors.release_cached_memory(room + tensors.tensor_bytes(self.inputs or []))

    # -- timed calls -------------------------------------------------------------------------
    def set_pool(self, message):
        """The judge's input pool (one allocation it owns) and where each input lies in it; on
        the CPU also the judge's receive files for the outputs of timed calls."""
        self.pool = tensors.open_shared(message["pool"])[0]
        self.pool_layout = message["layout"]
        self.timed_receive = tensors.open_shared(message.get("receive") or [])

    def timed_call(self, message):
        """One timed call: forward on the shifted inputs, every stream synchronised, then the
        outputs published for the judge to read. The judge's clock runs from its "go" to
        this "done"; the device record shows what ran in between."""
        model = self.models.get(message.get("arm"))
        if model is None:
            raise CandidateFailure("protocol", f"no arm {message.get('arm')!r} in this child")
        self.spread_outputs()
        self.forward(model, tensors.pool_views(self.pool, self.pool_layout,
                                               int(message.get("shift", 0))))
        return self.publish()

    def spread_outputs(self):
        """Moves the previous call's outputs (the judge has read them) to the recent ones and
        lets go of the oldest beyond OUTPUT_SPREAD_*: the next outputs get other memory."""
        if self.last_output is not None:
            size = tensors.tensor_bytes(value for _, value in compare.flatten(self.last_output))
            self.earlier_outputs.append((size, self.last_output))
            self.last_output = None
        while self.earlier_outputs and (
                len(self.earlier_outputs) > OUTPUT_SPREAD_CALLS
                or sum(size for size, _ in self.earlier_outputs) > OUTPUT_SPREAD_BYTES):
            self.earlier_outputs.popleft()

    def publish(self):
        """Describes each output; a CUDA tensor with the IPC handle of its allocation (the judge
        opens it and reads the output itself), a CPU tensor copied into the judge's receive
        file."""
        leaves = compare.flatten(self.last_output)
        described = []
        for index, (path, value) in enumerate(leaves):
            info = compare.describe(path, value)
            if isinstance(value, torch.Tensor) and not info.get("subclass"):
                info["stride"] = list(value.stride())
                if value.is_cuda and self.exporter is not None:
                    try:
                        info["memory"] = self.exporter.describe(value)
                    except Exception as error:  # noqa: BLE001 - the judge fails this output
                        info["memory_error"] = str(error)[:300]
                elif index < len(self.timed_receive):
                    slot = self.timed_receive[index]
                    if slot.shape == value.shape and slot.dtype == value.dtype:
                        with _no_grad():
                            torch.Tensor.copy_(slot, value.detach())
            described.append(info)
        return described

    def profile(self):
        if self.device != "cuda":
            return None
        return kernel_trace.trace(self.forward, self.request.get("trace_library"), _profile)

    def counters(self):
        """One more forward, every kernel replayed under CUPTI's range profiler (never timed)."""
        if self.device != "cuda":
            return {"error": "hardware counters need a GPU"}
        try:
            return kernel_trace.counters(self.forward, self.request.get("trace_library"))
        except kernel_trace.CountersUnavailable as error:
            return {"error": str(error)}

    def seal(self):
        """No new process from now on (the judge checks /proc/PID/status): device work in a
        process the record does not see is then impossible. None, or why it failed."""
        library = ctypes.CDLL(self.request["sandbox_library"])
        cause = ctypes.create_string_buffer(1024)
        if library.kagent_sandbox_forbid_processes(cause, ctypes.sizeof(cause)) != 0:
            return cause.value.decode(errors="replace")
        return None

    def tamper_check(self):
        findings = [f"CandidateRunner.{name} was replaced on the runner itself"
                    for name in ("forward", "synchronize", "deliver", "publish", "poison",
                                 "timed_call")
                    if name in vars(self)]
        findings += [f"Channel.{name} was replaced on the channel itself"
                     for name in ("send_json", "_send", "receive", "_fill")
                     if name in vars(self.channel)]
        for name, get in self.watched:
            try:
                current = id(get())
            except Exception:  # noqa: BLE001 - a deleted attribute is tampering too
                current = None
            if current != self.watched_identity.get(name):
                findings.append(f"{name} was replaced")
        return findings

    # -- the message loop ----------------------------------------------------------------
    def serve(self):
        setup = self.channel.receive()
        copied = self.load(setup)
        self.channel.send_json({"op": "ready", "copied_parameters": copied,
                                "arms": sorted(self.models), "compile_error": self.compile_error,
                                "load_steps": self.load_steps})
        while True:
            message = self.channel.receive()
            operation = message.get("op") if isinstance(message, dict) else None
            if operation == "inputs":
                shared = tensors.open_shared(message["shared"])
                self.inputs = [shared[item["shared"]] if isinstance(item, dict)
                               and "shared" in item else item for item in message["inputs"]]
                self.receive = tensors.open_shared(message["receive"])
                self.expected = message["expected"]
                self.channel.send_json({"op": "ok"})
            elif operation == "rebuild":
                copied = self.build(message)
                self.channel.send_json({"op": "ready", "copied_parameters": copied})
            elif operation == "poison":
                # the first trial's poison, while the judge holds the lock; the gate armed
                # for the call that follows (device_gate.py)
                self.poison()
                self.synchronize()
                error = "this child has no device gate"
                if message.get("gate") and self.gate is not None:
                    error = self.gate.arm()
                self.channel.send_json({"op": "poisoned", "gate_error": error})
            elif operation == "run":
                if not message.get("poisoned"):
                    self.poison()
                self.forward()
                outputs = self.deliver()
                if self.gate is not None:
                    self.gate.disarm()
                self.channel.send_json({"op": "result", "outputs": outputs})
                self.release()
            elif operation == "pool":
                self.set_pool(message)
                self.channel.send_json({"op": "ok"})
            elif operation == "go":
                self.channel.send_json({"op": "done", "outputs": self.timed_call(message)})
            elif operation == "null":
                self.synchronize()
                self.channel.send_json({"op": "done", "outputs": []})
            elif operation == "record":
                error = self.recorder.start() if self.recorder is not None else \
                    "this child has no device record"
                self.channel.send_json({"op": "recording", "error": error})
            elif operation == "flush":
                error = self.recorder.flush() if self.recorder is not None else \
                    "this child has no device record"
                self.channel.send_json({"op": "flushed", "error": error})
            elif operation == "unrecord":
                error = self.recorder.stop() if self.recorder is not None else None
                self.channel.send_json({"op": "unrecorded", "error": error})
            elif operation == "seal":
                self.channel.send_json({"op": "sealed", "error": self.seal()})
            elif operation == "profile":
                self.channel.send_json({"op": "profile", "kernels": self.profile()})
            elif operation == "counters":
                self.channel.send_json({"op": "counters", "counters": self.counters()})
            elif operation == "tamper":
                self.channel.send_json({"op": "tamper", "findings": self.tamper_check()})
            elif operation == "exit":
                return
            else:
                raise CandidateFailure("protocol", f"unknown operation {operation!r}")


def _serve_until_done(runner, steps):
    """Runs `steps`, then the runner's message loop, reporting any failure to the judge; never
    returns."""
    code = 0
    try:
        for name, step in steps:
            step()
            runner.mark(name)
        runner.serve()
    except ChannelClosed:
        code = 3
    except CandidateFailure as failure:
        code = 4
        try:
            runner.channel.send_json({"op": "error", "kind": failure.kind,
                                      "message": failure.message, "traceback": failure.trace})
        except ChannelClosed:
            pass
    except BaseException as error:  # noqa: B902 - report anything, then leave
        code = 5
        try:
            runner.channel.send_json({"op": "error", "kind": _classify(error),
                                      "message": f"{type(error).__name__}: {error}",
                                      "traceback": _trace_tail()})
        except ChannelClosed:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(0)
    os._exit(code)


def main(sock, request):
    """Entry point in the forked child; never returns."""
    runner = CandidateRunner(Channel(sock, accept_pickles=True), request)
    _serve_until_done(runner, [("sandbox", runner.enter_sandbox),
                               ("context", runner.start_context),
                               ("record", runner.start_record)])


def serve_prepared(runner, sock, request):
    """A prepared process's evaluation (prepared.py): `runner` has entered its sandbox and
    made its context for an earlier request; now the evaluation's request (the same folders,
    limits and device) and its candidate socket have come. The record opens and the candidate
    is served as main does. Never returns."""
    runner.channel = Channel(sock, accept_pickles=True)
    runner.request = request
    # its sandbox and context were made before: only this evaluation's steps count
    runner.load_steps = {}
    runner.step_started = time.monotonic()
    _serve_until_done(runner, [("record", runner.start_record)])
