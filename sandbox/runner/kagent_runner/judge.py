"""The trusted judge child.

It loads the problem, builds every input on the device from seeds, runs the reference, shares
inputs and receive buffers with the sandboxed candidate child and compares what comes back;
then it times eager PyTorch and torch.compile (each in a timed child of the reference's; the
compile is abandoned past its cap) and the candidate with one harness (harness.py): device time from each child's device record and wall time on
the judge's clock. The reference outputs, the clock and the verdict on the device record never
enter a timed child's address space.
"""
import gc
import json
import math
import os
import platform
import random
import signal
import sys
import time
import traceback

import torch

from . import (compare, cuda_ipc, device_gate, device_record, gpu_lock, harness, kernel_trace,
               problem, processes, tensors)
from .problem import CandidateFailure
from .channel import Channel, ChannelClosed, ChannelProtocolError, ChannelTimeout


def _finite_or_none(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    return value


# how many input-sized and output-sized buffers exist at once at an evaluation's peak: the
# judge's own inputs and the shared copy; the reference outputs, the receive buffers and
# the candidate's outputs (bench/eval_memory.py measures it on a GPU)
JUDGE_INPUT_COPIES = 2
JUDGE_OUTPUT_COPIES = 3
# The first reference, and a copy of the inputs for the mutation check, stay on the device when
# the free memory is this many times their size: room for them, the next trial's inputs and
# outputs, and the comparison's chunks. Else the reference goes to host memory and the inputs
# are checked by a keyed fingerprint, which needs no copy but costs several passes.
KEEP_ON_DEVICE_ROOM = 3
# The arms are timed in alternating rounds when the timing's pool (the problem's input bytes)
# and every timed child's outputs (its output bytes, each child) fit at once in this share of
# the device's free memory, the rest left to the children's own work and the judge's copies of
# each call's inputs; else one after the other, each reference child ended (its memory freed)
# before the next one starts its calls. On the CPU always together (docs/verdict.md).
INTERLEAVE_SHARE = 0.25


def _same_bytes(first, second):
    """Whether two tensors hold the same bytes (NaNs included), compared in bounded chunks."""
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    first = first.detach().reshape(-1).contiguous().view(torch.uint8)
    second = second.detach().reshape(-1).contiguous().view(torch.uint8)
    step = tensors.chunk_elements() * 8
    return all(torch.equal(first[start:start + step], second[start:start + step])
               for start in range(0, first.numel(), step))


def _poison(tensor):
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(-7 if tensor.dtype.is_signed else 7)


class Judge:
    def __init__(self, channel, request, candidate_pid, children):
        """children: the worker's sockets and pids for the timed children: "candidate_record"
        (the candidate's device record), and, when the baselines are not cached, "reference"
        (the eager reference's timed child's channel), "reference_pid", "reference_record" and
        "reference_scratch", and when torch.compile is timed too the same four for its child
        ("compile", "compile_pid", ...); "timing_lock" (gpu_lock.TimingLock, opened before
        privileges were dropped); "candidate_gate" (the device gate's socket, on a GPU);
        "prepared_pid" (the process the worker prepared for the next evaluation, which runs as
        the sandbox uid and holds the device but runs nothing: prepared.py), or None;
        "timing_processes": the further timed processes of the eager arm and the candidate's
        (timing.processes), each {"arm", "pid", "socket", "record", "scratch"}."""
        self.channel = channel
        self.request = request
        self.candidate_pid = candidate_pid
        self.device = request["device"]
        self.tolerances = request.get("tolerances", {})
        self.limits = request.get("limits", {})
        self.phase = "load"
        self.model = None
        self.module = None
        self.shared = None
        self.receive = None
        self.input_slots = []
        self.expected = []
        self.flush_buffer = None
        self.l2_reset_error = None
        self.children = children
        self.timing_lock = children.get("timing_lock") or gpu_lock.TimingLock(None)
        # the candidate's first trial call compiles outside the lock (device_gate.py)
        self.gate = (device_gate.JudgeGate(children["candidate_gate"], self.timing_lock)
                     if children.get("candidate_gate") is not None else None)
        self.candidate = harness.TimedChild(self, channel, candidate_pid,
                                            children.get("candidate_record"), "candidate")
        # the reference's timed children by arm, when the baselines are not cached: eager, and
        # torch.compile in a child of its own; they load (and compile) beside the trials
        self.references = {}
        for arm, key in (("eager", "reference"), ("compile", "compile")):
            if children.get(key) is not None:
                child = harness.TimedChild(self, Channel(children[key], accept_pickles=False),
                                           children[f"{key}_pid"], children.get(f"{key}_record"),
                                           arm)
                child.scratch = children.get(f"{key}_scratch")
                self.references[arm] = child
        # the further processes each arm is timed in beside its first ("Processes per arm"):
        # they load beside the trials too; a candidate's is the candidate's own code
        self.extra_processes = {"candidate": [], "eager": []}
        for extra in children.get("timing_processes") or []:
            if extra.get("arm") not in self.extra_processes:
                continue
            child = harness.TimedChild(self, Channel(extra["socket"], accept_pickles=False),
                                       int(extra["pid"]), extra.get("record"), extra["name"])
            child.scratch = extra.get("scratch") if extra["arm"] == "eager" else None
            self.extra_processes[extra["arm"]].append(child)
        self.extra_candidate_pids = {child.pid for child in self.extra_processes["candidate"]}
        self.processes_per_arm = {"candidate": 1, "eager": 1, "compile": 1,
                                        "dropped": []}
        # every reference child's pid, an abandoned compile child's included
        self.reference_pids = {child.pid for child in self.references.values()} | {
            child.pid for child in self.extra_processes["eager"]}
        self.baseline_arms = []  # the arms whose child is ready to be timed
        self.reference_error = None
        self.compile_error = None
        self.compile_abandoned = False
        self.compile_started = None
        self.importer = None
        self.timing_pool = None  # on a GPU, the one pool every timed child reads (give_pool)
        self.pickler = tensors.pickler_for(self.device)
        self.secret = random.Random(int.from_bytes(os.urandom(8), "little"))
        # detects changed inputs; its key never leaves this process
        self.fingerprint = tensors.Fingerprint(int.from_bytes(os.urandom(8), "little") >> 1)
        self.free_bytes = None  # the device's free memory before the judge allocated any
        self.trial_bytes = 0  # the inputs and outputs of the trial in progress
        self.result = {"problem_error": None, "phase": "load", "candidate_error": None,
                       "environment": None, "trials": [], "signed_skipped": None,
                       "degenerate": None, "timing": None, "baselines": None, "kernels": None,
                       "tamper": [], "roofline": None, "compute": None,
                       "reference_kernels": None, "counters": None, "reference_counters": None,
                       "generalisation": None, "timing_window": None, "phase_seconds": {},
                       "phase_peak_bytes": {}}
        self.phase_started = self.started = time.monotonic()

    # -- talking to the candidate --------------------------------------------------------
    def ask(self, message, timeout, pickled=False, channel=None, watch=None):
        """Sends a message to the candidate (or another timed child's channel) and returns
        its answer; a child's failure is a CandidateFailure. watch: Channel.receive's."""
        channel = self.channel if channel is None else channel
        try:
            try:
                if pickled:
                    channel.send_pickle(message, self.pickler)
                else:
                    channel.send_json(message)
            except ChannelClosed:
                # the candidate may have said why it left before the judge spoke
                timeout = 1.0
            reply = channel.receive(timeout, watch)
        except ChannelTimeout:
            # a reference child's is ended by its caller (judge.reference_failed): the
            # candidate goes on to be judged
            if channel is self.channel:
                self.kill_candidate()
            for child in self.extra_processes["candidate"]:
                if channel is child.channel:
                    self.end_child(child, kill=True)
            raise CandidateFailure("timeout", f"the candidate did not answer within {timeout:g} s "
                                   f"during {self.phase}")
        except ChannelClosed:
            raise CandidateFailure("crash", f"the candidate process ended during {self.phase}")
        except ChannelProtocolError as error:
            raise CandidateFailure("protocol", f"the candidate sent an invalid message: {error}")
        if reply.get("op") == "error":
            kind = reply.get("kind")
            if kind not in ("compile", "runtime", "oom", "structure", "protocol", "sandbox"):
                kind = "runtime"
            raise CandidateFailure(kind, str(reply.get("message", ""))[:4000],
                                   str(reply.get("traceback") or "")[:4000])
        return reply

    def other_timed_children(self):
        """Every timed child but the candidate's first process: the reference arms' and each
        arm's further processes."""
        return (list(self.references.values()) + self.extra_processes["eager"] +
                self.extra_processes["candidate"])

    def kill_candidate(self):
        try:
            os.killpg(self.candidate_pid, signal.SIGKILL)
        except OSError:
            pass

    def synchronize(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    # -- setup ---------------------------------------------------------------------------
    def environment(self):
        environment = {"device": self.device, "torch": torch.__version__,
                       "cuda_runtime": torch.version.cuda, "python": platform.python_version(),
                       "gpu": None, "compute_capability": None, "triton": None,
                       "device_queues": None}
        try:
            import triton

            environment["triton"] = triton.__version__
        except ImportError:
            pass
        if self.device == "cuda":
            index = torch.cuda.current_device()
            environment["gpu"] = torch.cuda.get_device_name(index)
            major, minor = torch.cuda.get_device_capability(index)
            environment["compute_capability"] = f"{major}.{minor}"
            # what every timed child's context was made with (candidate.enter_sandbox)
            environment["device_queues"] = (self.request.get("limits") or {}).get(
                "device_queues")
        return environment

    def start(self):
        # first: each timed child's library waits for its key before untrusted code exists
        self.candidate.send_key()
        for child in self.other_timed_children():
            child.send_key()
        if self.device == "cuda":
            torch.cuda.set_device(self.request["device_ordinal"])
            self.free_bytes = torch.cuda.mem_get_info()[0]
            properties = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2_bytes = int(getattr(properties, "L2_cache_size", 50 << 20) or (50 << 20))
            self.flush_buffer = torch.empty(2 * l2_bytes // 8, dtype=torch.int64, device="cuda")
            self.flush_sum = torch.empty((), dtype=torch.int64, device="cuda")
        self.result["environment"] = self.environment()
        # read before the candidate runs: it may be able to change files it can reach
        with open(self.request["candidate_path"], encoding="utf-8", errors="replace") as handle:
            self.own_names = problem.own_kernel_names(handle.read())
        self.module = problem.load_problem(self.request["problem_path"])
        model, init_inputs, seed = build_reference(self.module, self.request, self.device)
        self.model = model
        setup = setup_message(model, init_inputs, seed)
        # answered later (wait_for_baselines): they load and compile while the trials run
        for child in self.other_timed_children():
            try:
                child.channel.send_pickle(setup, self.pickler)
            except ChannelClosed:
                pass
        self.compile_started = time.monotonic()
        # inside load: the candidate's own load (its record opened, its module imported, its
        # model built), as the judge waits for it
        ready = self.ask(setup, float(self.limits.get("wall_seconds", 300)), pickled=True)
        phases = self.result["phase_seconds"]
        phases["load_candidate"] = round(time.monotonic() - self.compile_started, 4)
        # the child's own account of its start (candidate.py, load_steps): a diagnostic only
        steps = ready.get("load_steps")
        for step in ("sandbox", "context", "record", "setup_wait", "import", "build"):
            value = steps.get(step) if isinstance(steps, dict) else None
            if (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value) and 0 <= value < 1e6):
                phases["candidate_" + step] = round(float(value), 4)

    def reference(self, inputs):
        return run_reference(self.model, inputs)

    def share(self, inputs, reference_leaves):
        """Allocates shared input and receive buffers shaped like this trial's, once."""
        tensor_inputs = [value for value in inputs if isinstance(value, torch.Tensor)]
        expected = []
        for path, value in reference_leaves:
            info = compare.describe(path, value)
            info.pop("subclass", None)
            expected.append(info)
        signature = ([(tuple(t.shape), t.dtype) for t in tensor_inputs], expected)
        if self.shared is not None and signature == self.signature:
            return
        self.signature = signature
        scratch = self.request["scratch_directory"]
        self.shared = tensors.SharedBuffers(tensor_inputs, self.device, scratch, "input")
        receive_templates = [value for _, value in reference_leaves
                             if isinstance(value, torch.Tensor)]
        self.receive = tensors.SharedBuffers(receive_templates, self.device, scratch, "output")
        slots, index = [], 0
        for value in inputs:
            if isinstance(value, torch.Tensor):
                slots.append({"shared": index})
                index += 1
            else:
                slots.append(value)
        self.input_slots = slots
        # receive buffer i belongs to the i-th leaf; non-tensor leaves get no buffer
        receive_descriptors, buffer_index = [], 0
        self.receive_for_leaf = []
        for _, value in reference_leaves:
            if isinstance(value, torch.Tensor):
                receive_descriptors.append(self.receive.descriptors[buffer_index])
                self.receive_for_leaf.append(self.receive.tensors[buffer_index])
                buffer_index += 1
            else:
                receive_descriptors.append(None)
                self.receive_for_leaf.append(None)
        self.receive_descriptors = receive_descriptors
        self.expected = expected
        self.ask({"op": "inputs", "shared": self.shared.descriptors, "inputs": slots,
                  "receive": [d for d in receive_descriptors if d is not None],
                  "expected": expected}, float(self.limits.get("call_seconds", 20)), pickled=True)
        # the candidate receives only the tensor slots, in leaf order
        self.candidate_receive = [t for t in self.receive_for_leaf if t is not None]

    def load_inputs(self, inputs):
        with torch.no_grad():
            for shared, value in zip(self.shared.tensors,
                                     [v for v in inputs if isinstance(v, torch.Tensor)]):
                shared.copy_(value)

    # -- correctness -----------------------------------------------------------------------
    def check_outputs(self, reference_leaves, described, read=None):
        """Per-output records; the candidate's description is checked before its data is read.
        read(leaf index, tensor slot, description, reference) gives a tensor output's data
        (by default the trial's receive buffer); it may raise ValueError, TypeError or
        cuda_ipc.DriverError for data that cannot be read."""
        if read is None:
            def read(index, slot, info, reference):
                return self.candidate_receive[slot]
        records = []
        if len(described) != len(reference_leaves):
            records.append({"path": "output", "kind": "structure", "passed": False,
                            "reason": f"the candidate returned {len(described)} output(s), "
                                      f"the reference {len(reference_leaves)}"})
        tensor_slot = 0
        for index, (path, reference) in enumerate(reference_leaves):
            info = described[index] if index < len(described) and isinstance(described[index], dict) else {}
            record = {"path": path}
            if isinstance(reference, torch.Tensor):
                slot = tensor_slot
                tensor_slot += 1
                record.update({"kind": "tensor", "dtype": tensors.dtype_name(reference.dtype),
                               "shape": list(reference.shape),
                               "candidate_dtype": info.get("dtype"),
                               "candidate_shape": info.get("shape")})
                if info.get("kind") != "tensor":
                    record.update({"passed": False, "reason": f"expected a tensor, got "
                                   f"{info.get('kind', 'nothing')}"})
                elif info.get("dtype") != record["dtype"]:
                    record.update({"passed": False, "reason": f"dtype {info.get('dtype')}, "
                                   f"expected {record['dtype']}"})
                elif info.get("shape") != record["shape"]:
                    record.update({"passed": False, "reason": f"shape {info.get('shape')}, "
                                   f"expected {record['shape']}"})
                elif info.get("subclass"):
                    record.update({"passed": False, "reason": "a tensor subclass was returned"})
                else:
                    try:
                        value = read(index, slot, info, reference)
                    except (ValueError, TypeError, cuda_ipc.DriverError) as error:
                        record.update({"passed": False,
                                       "reason": f"output not readable: {error}"})
                    else:
                        tolerance = compare.tolerance_for(reference.dtype, self.tolerances)
                        record.update(compare.compare_tensors(reference, value, tolerance))
            elif isinstance(reference, (bool, int, float)):
                record.update({"kind": "scalar"})
                if info.get("kind") != "scalar":
                    record.update({"passed": False, "reason": f"expected a scalar, got "
                                   f"{info.get('kind', 'nothing')}"})
                else:
                    tolerance = compare.tolerance_for(torch.float32, self.tolerances)
                    record.update(compare.compare_scalar(reference, info.get("value"), tolerance))
            elif reference is None:
                record.update({"kind": "none", "passed": info.get("kind") == "none"})
                if not record["passed"]:
                    record["reason"] = "expected None"
            else:
                record.update({"kind": "other", "passed": False,
                               "reason": f"reference output of type {type(reference).__name__} "
                                         "cannot be compared"})
            records.append(record)
        return records

    def passes(self, reference_leaves, candidate_values):
        """Whether given values (a trivial answer) would pass this trial's checks."""
        if len(candidate_values) != len(reference_leaves):
            return False
        for (_, reference), value in zip(reference_leaves, candidate_values):
            if isinstance(reference, torch.Tensor):
                if (not isinstance(value, torch.Tensor) or value.shape != reference.shape
                        or value.dtype != reference.dtype):
                    return False
                tolerance = compare.tolerance_for(reference.dtype, self.tolerances)
                if not compare.compare_tensors(reference, value, tolerance)["passed"]:
                    return False
            else:
                return False
        return True

    def trials(self, probe_degenerate, plan=None):
        """The correctness trials (plan: (seed, distribution) pairs, the request's by default).
        At any moment the judge holds the shared inputs and receive buffers, one trial's own
        inputs (until they are in the shared buffers) and its reference outputs: every earlier
        trial's data is gone before the next is made, the inputs are checked for changes by a
        copy where it fits, else a fingerprint (input_witness), and the trivial answers are probed before the
        candidate runs, while the trial's own inputs are still there."""
        if plan is None:
            plan = [(int(s), "problem") for s in self.request.get("seeds", [])]
            plan += [(int(s), "signed") for s in self.request.get("signed_seeds", [])]
        degenerate = {"constant_output": None, "zeros_pass": True, "identity_pass": True}
        first_reference = {}
        all_passed = True
        first_call = True
        # where the phase's time goes under load: waiting for the lock, the candidate's calls
        waited, calls_seconds = self.timing_lock.waited, 0.0
        for seed, distribution in plan:
            # a timer of another evaluation on this GPU waits for one step of a trial only (the
            # judge's preparation, the candidate's call, the comparison): while it waits, no
            # new trial work may start on the device, so the steps are kept short (issue 13)
            self.timing_lock.yield_to_timer()
            inputs = problem.make_inputs(self.module, seed, distribution, self.device)
            leaves = compare.flatten(self.reference(inputs))
            if distribution == "signed" and any(
                    isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())
                    and not bool(torch.isfinite(v).all()) for _, v in leaves):
                self.result["signed_skipped"] = ("the reference is not finite on signed inputs, "
                                                 "so only the problem's own inputs were used")
                inputs = leaves = None
                continue
            self.trial_bytes = tensors.tensor_bytes(inputs) + tensors.tensor_bytes(
                value for _, value in leaves)
            if probe_degenerate:
                self.probe(degenerate, leaves, inputs, distribution, first_reference)
            self.share(inputs, leaves)
            # taken of the judge's own inputs, before the candidate can reach the shared copy
            before = self.input_witness(inputs)
            self.load_inputs(inputs)
            inputs = None  # the shared buffers hold them now
            with torch.no_grad():
                for buffer in self.candidate_receive:
                    _poison(buffer)
            self.synchronize()
            self.release_cache()
            self.timing_lock.yield_to_timer()
            # the first call may compile the candidate's kernels (Triton JIT, load_inline)
            timeout = float(self.limits.get("first_call_seconds" if first_call else "call_seconds",
                                            120 if first_call else 20))
            call_started = time.monotonic()
            if first_call and self.gate is not None and not self.gate.used:
                reply = self.gated_call(timeout)
            else:
                reply = self.ask({"op": "run"}, timeout)
            calls_seconds += time.monotonic() - call_started
            first_call = False
            self.timing_lock.yield_to_timer()
            described = reply.get("outputs") if isinstance(reply.get("outputs"), list) else []
            records = self.check_outputs(leaves, described)
            unchanged = self.inputs_unchanged(before, self.shared.tensors)
            passed = unchanged and all(record.get("passed") for record in records)
            trial = {"seed": seed, "distribution": distribution, "passed": passed,
                     "inputs_unchanged": unchanged, "outputs": records,
                     "reason": None if passed else (
                         "the candidate changed its inputs" if not unchanged else
                         next(f"{r['path']}: {r.get('reason')}" for r in records
                              if not r.get("passed")))}
            self.result["trials"].append(trial)
            all_passed = all_passed and passed
            leaves = None  # this trial's reference outputs, before the next trial's are made
        first_reference.clear()
        self.release_cache()
        self.result["phase_seconds"]["trials_lock_wait"] = round(
            self.timing_lock.waited - waited, 4)
        self.result["phase_seconds"]["trials_calls"] = round(calls_seconds, 4)
        if probe_degenerate:
            degenerate["constant_output"] = bool(degenerate["constant_output"])
            self.result["degenerate"] = degenerate
        return all_passed

    def gated_call(self, timeout):
        """The candidate's first call, its compile outside the timing lock (device_gate.py):
        the poison while the judge holds the lock, the gate armed, the lock let go; the
        candidate's first device work asks for it again, and the judge holds it from then on.
        Where the gate cannot be armed the lock stays held, as for any other call."""
        self.gate.used = True
        error = self.ask({"op": "poison", "gate": True}, self.call_seconds()).get("gate_error")
        if error:
            print(f"kagent judge: the device gate is closed: {str(error)[:300]}",
                  file=sys.stderr)
            return self.ask({"op": "run", "poisoned": True}, timeout)
        self.timing_lock.release()
        reply = self.ask({"op": "run", "poisoned": True}, timeout, watch=self.gate.watch())
        self.timing_lock.shared()
        # how long the first call ran before its first device work: the compile the lock
        # no longer waits for
        if self.gate.asked_after is not None:
            self.result["phase_seconds"]["first_call_unlocked"] = round(self.gate.asked_after,
                                                                        4)
        return reply

    def release_cache(self):
        """Hands the judge's cached but unused device memory back to the driver where the
        candidate (another process) may need it for this trial (tensors.RELEASE_ROOM)."""
        if self.device == "cuda":
            tensors.release_cached_memory(self.trial_bytes)

    def probe(self, degenerate, leaves, inputs, distribution, first_reference):
        """Which trivial answers would pass: zeros (a broadcast zero, never materialised), the
        first input, and the first reference of the distribution (kept in host memory between
        trials when the judge runs on a GPU, so that it takes no device memory)."""
        tensors_out = [v for _, v in leaves]
        if degenerate["zeros_pass"]:
            degenerate["zeros_pass"] = all(isinstance(v, torch.Tensor) for v in tensors_out) and \
                self.passes(leaves, [torch.zeros((), dtype=v.dtype, device=v.device).expand(v.shape)
                                     for v in tensors_out])
        if degenerate["identity_pass"]:
            first_input = next((v for v in inputs if isinstance(v, torch.Tensor)), None)
            degenerate["identity_pass"] = (len(tensors_out) == 1 and first_input is not None
                                           and self.passes(leaves, [first_input]))
        # constant_output: None until two references of one distribution have been compared
        if degenerate["constant_output"] is not False:
            if distribution not in first_reference:
                first_reference[distribution] = self.keep_reference(tensors_out)
            else:
                degenerate["constant_output"] = self.passes(leaves, first_reference[distribution])

    def fits_on_device(self, values):
        size = sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
        return self.device == "cuda" and torch.cuda.mem_get_info()[0] > KEEP_ON_DEVICE_ROOM * size

    def input_witness(self, inputs):
        """What later shows whether the candidate changed its inputs, taken of the judge's own
        inputs before the candidate can reach the shared copy: a copy on the device where it
        fits (one copy and one comparison: about 1 s less a trial than the fingerprint on
        6.4 GB), else the keyed fingerprint."""
        if self.fits_on_device(inputs):
            return ("copy", [v.clone() for v in inputs if isinstance(v, torch.Tensor)])
        return ("fingerprint", self.fingerprint(inputs))

    def inputs_unchanged(self, witness, values):
        kind, kept = witness
        if kind == "fingerprint":
            return self.fingerprint(values) == kept
        current = [v for v in values if isinstance(v, torch.Tensor)]
        return len(current) == len(kept) and all(map(_same_bytes, kept, current))

    def keep_reference(self, tensors_out):
        """The first reference of a distribution, kept for the constant-output probe: on the
        device while the device has room for it beside the next trials (the comparison then
        costs no transfer: copying 6.4 GB out and back in took about 1 s a trial on an H100),
        in host memory otherwise."""
        if self.fits_on_device(tensors_out):
            return list(tensors_out)
        return [v.to("cpu") if isinstance(v, torch.Tensor) else v for v in tensors_out]

    # -- generalisation ----------------------------------------------------------------------
    def generalise(self):
        """The generalisation gate (docs/verdict.md): one more correctness trial with the
        problem's module-level sizes halved and made odd, against a fresh Model and a fresh
        ModelNew built from the new init inputs. Tried first with every size the input
        functions read; where the problem itself cannot run at those (a size that must divide
        another), with the sizes only get_inputs reads. A candidate that fails there keeps
        its verdict: the report says so."""
        report = {"sizes": {}, "trial": None, "candidate_error": None, "skipped": None}
        self.result["generalisation"] = report
        try:
            self.resized_trial(report)
        except Exception as error:  # noqa: BLE001 - the gate must not cost the verdict
            report.update(trial=None, candidate_error=None,
                          skipped=f"the check failed: {type(error).__name__}: {error}"[:4000])

    def resized_trial(self, report):
        """generalise()'s work: fills the report from the first usable set of sizes."""
        every = problem.size_globals(self.module, ("get_inputs", "get_init_inputs"))
        init_only = problem.size_globals(self.module, ("get_init_inputs",))
        attempts = [every, {name: value for name, value in every.items()
                            if name not in init_only}]
        problem_errors = []
        for sizes in attempts:
            changed = {name: [value, problem.smaller_size(value)]
                       for name, value in sizes.items() if problem.smaller_size(value) != value}
            if not changed or changed == report["sizes"]:
                continue
            report["sizes"] = changed
            with problem.resized(self.module, {name: new for name, (_, new) in changed.items()}):
                try:
                    model, init_inputs, seed = build_reference(self.module, self.request,
                                                               self.device)
                    run_reference(model, problem.make_inputs(self.module, seed, "problem",
                                                             self.device))
                except problem.ProblemError as error:
                    problem_errors.append(f"{sizes_text(changed)}: {error}")
                    continue
                self.model = model
                try:
                    self.ask(dict(setup_message(model, init_inputs, seed), op="rebuild"),
                             float(self.limits.get("wall_seconds", 300)), pickled=True)
                    self.trials(False, [(seed, "problem")])
                    # the trial belongs to this report, not to the problem's own trials
                    report["trial"] = self.result["trials"].pop()
                except CandidateFailure as failure:
                    report["candidate_error"] = {"kind": failure.kind,
                                                 "message": failure.message[:4000]}
            return
        report["sizes"] = {}
        report["skipped"] = ("the problem cannot run at smaller sizes: "
                             + "; ".join(problem_errors) if problem_errors else
                             "the problem's input functions read no integer size")

    # -- timing ----------------------------------------------------------------------------
    def make_problem_inputs(self, seed):
        return problem.make_inputs(self.module, seed, "problem", self.device)

    def flush_l2(self):
        """The judge's own pass over twice the L2, and persisting lines reset to normal: no
        timed call starts with its data, or a child's access-policy window, in the cache.
        The pass reads and does not write: the lines it leaves are clean, so a timed call that
        evicts them writes nothing back. A writing pass (zero_) left the cache full of dirty
        lines whose write-back fell into the timed call: about 8% of a 4 MB ReLU's device time,
        and a verdict-to-verdict spread of 1.4% at 64 MB against 0.5% now (issue 10)."""
        if self.flush_buffer is not None:
            torch.sum(self.flush_buffer, dim=0, out=self.flush_sum)
            if self.l2_reset_error is None:
                self.l2_reset_error = cuda_ipc.reset_persisting_l2()

    def measure_bandwidth(self):
        return measure_bandwidth(self.device)

    def needs_baselines(self):
        cached = self.request.get("baselines")
        return not (isinstance(cached, dict) and cached.get("eager"))

    def compile_seconds(self):
        """The cap on waiting for the torch.compile baseline (docs/verdict.md)."""
        return float(self.limits.get("compile_seconds", 60))

    def wait_for_baselines(self):
        """The reference's timed children load (and compile) beside the trials; the judge waits
        for them before anything is timed, since they share the GPU: for eager as long as an
        evaluation may last, for torch.compile until its cap from the moment it was given the
        problem. Past the cap the compile child is ended and the verdict goes without it."""
        if not self.references:
            return
        # its own phase: on a large model (DenseNet121) the first evaluation's time is here
        self.enter("compile_wait")
        for arm, child in list(self.references.items()):
            timeout = float(self.limits.get("wall_seconds", 300))
            if arm == "compile":
                # a compile already done when the cap passed is still taken: the select sees it
                timeout = max(0.05, self.compile_started + self.compile_seconds() -
                              time.monotonic())
            try:
                message = child.channel.receive(timeout)
            except ChannelTimeout:
                if arm == "compile":
                    self.abandon_compile(child)
                    continue
                message = {"op": "error", "message": f"the reference's timed child did not "
                           f"answer within {timeout:g} s"}
            except (ChannelClosed, ChannelProtocolError) as error:
                message = {"op": "error", "message": f"the reference's timed child failed: "
                           f"{error}"}
            if message.get("op") == "ready" and arm in (message.get("arms") or []):
                self.baseline_arms.append(arm)
            elif message.get("op") == "ready" and message.get("compile_error"):
                self.compile_error = str(message["compile_error"])[:600]
            elif arm == "compile":
                self.compile_error = str(message.get("message", "the compile child failed"))[:600]
            else:
                self.reference_error = str(message.get("message",
                                                       "the reference child failed"))[:600]
            if arm == "compile":
                # the child's load, compile and first call, from the judge's start (beside the
                # trials until compile_wait began)
                self.result["phase_seconds"]["compile_child"] = round(
                    time.monotonic() - self.started, 3)

    def wait_for_extra_processes(self):
        """The further timed processes' loads, begun beside the trials. One that failed to
        load or did not answer within the first call's limit is ended and left out (named in
        timing.processes.dropped): its arm is timed in the others, and for the candidate a
        failure only the further process met is no verdict on its code."""
        deadline = time.monotonic() + float(self.limits.get("first_call_seconds", 120))
        for arm, children in self.extra_processes.items():
            for child in list(children):
                try:
                    message = child.channel.receive(max(0.05, deadline - time.monotonic()))
                except (ChannelTimeout, ChannelClosed, ChannelProtocolError) as error:
                    message = {"op": "error", "message": f"{type(error).__name__}: {error}"}
                if message.get("op") != "ready":
                    self.drop_extra_process(arm, child, str(message.get(
                        "message", "it did not load"))[:300])

    def drop_extra_process(self, arm, child, reason):
        """Ends a further timed process and leaves it out of its arm; reason is recorded."""
        self.extra_processes[arm].remove(child)
        if reason:
            self.processes_per_arm["dropped"].append(f"{child.label}: {reason}")
        self.end_child(child, kill=True)

    def trim_timing_processes(self, reference_ms):
        """How many processes time each arm (docs/verdict.md, "Processes per arm"): the ones
        loaded, unless on a GPU the reference's call took timing.processes_below_ms or more
        here (the worker chose the count before any call was known; a process's own state
        is a few hundred nanoseconds of a device call, which long calls do not feel; on the
        CPU a count asked for is used as it is), and no more than the device's memory holds,
        each process with its outputs beside the timing's pool (INTERLEAVE_SHARE). The
        processes left out are ended now."""
        below = harness.processes_below_ms(self.request)
        loaded = [len(children) for children in self.extra_processes.values() if children]
        count = 1 + min(loaded) if loaded else 1
        if self.device == "cuda" and reference_ms >= below:
            count = 1
        while count > 1 and not self.fits_processes(count):
            count -= 1
        for arm, children in self.extra_processes.items():
            for child in children[count - 1:]:
                self.drop_extra_process(arm, child, None)
        self.processes_per_arm.update(
            {"candidate": 1 + len(self.extra_processes["candidate"]),
             "eager": 1 + len(self.extra_processes["eager"]), "reference_call_ms": reference_ms})

    def reference_call_ms(self):
        """The reference's call on the problem's inputs, the quickest of up to three, as
        trim_timing_processes reads it: on a GPU its device time between two CUDA events of the
        judge's (its wall time also holds Python's dispatch and the synchronisation, about as
        long as a 4 MB call itself, and one slow call of 0.11 ms had left a 4 MB verdict in one
        process an arm in one verdict of ten), on the CPU its wall time. A call of ten times
        timing.processes_below_ms or more is not repeated: it is long whatever the others
        take. Also notes the outputs' bytes (fits_processes)."""
        quickest = math.inf
        long_ms = 10 * harness.processes_below_ms(self.request)
        for _ in range(3):
            self.synchronize()
            if self.device == "cuda":
                started, ended = torch.cuda.Event(enable_timing=True), \
                    torch.cuda.Event(enable_timing=True)
                started.record()
                outputs = self.reference(self.result_inputs)
                ended.record()
                ended.synchronize()
                call_ms = started.elapsed_time(ended)
            else:
                wall_started = time.monotonic()
                outputs = self.reference(self.result_inputs)
                call_ms = (time.monotonic() - wall_started) * 1e3
            quickest = min(quickest, call_ms)
            self.result_output_bytes = tensors.tensor_bytes(
                value for _, value in compare.flatten(outputs))
            outputs = None
            if call_ms >= long_ms:
                break
        return quickest

    def fits_processes(self, count):
        """Whether every arm's `count` processes fit at once beside the timing's pool."""
        if self.device != "cuda":
            return True
        processes = count * (1 + ("eager" in self.references)) + ("compile" in self.references)
        needed = self.result_input_bytes + processes * self.result_output_bytes
        return needed <= INTERLEAVE_SHARE * torch.cuda.mem_get_info()[0]

    def abandon_compile(self, child):
        """The compile went past its cap: its child (and the compile workers in its process
        group) is killed, and the judge waits until none of them runs, so that nothing of it
        is left beside the timed calls."""
        cap = self.compile_seconds()
        self.compile_abandoned = True
        self.compile_error = (f"torch.compile baseline exceeded {cap:g} s (the cap on waiting "
                              f"for it: evaluation.compile_timeout_seconds, --compile-timeout)")
        self.end_child(child, kill=True)
        del self.references["compile"]

    @staticmethod
    def end_child(child, kill=False):
        """Asks a reference child to exit (or kills its process group) and waits, 10 s at
        most, until nothing of it runs: its device memory (the pool it mapped) is free for the
        next child's pool, and no process of it is left beside the candidate's timed calls."""
        try:
            if kill:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                child.channel.send_json({"op": "exit"})
        except (OSError, ChannelClosed):
            pass
        deadline = time.monotonic() + 10
        while processes.group_running(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)

    def give_pool(self, child):
        """The pool one timed child's calls read their inputs from, and on the CPU receive
        files for its outputs. Its time goes into phase_seconds.pools: it is part of an
        exclusive window.

        On a GPU every timed child of the timing reads the same pool (self.timing_pool): where
        a pool lies in device memory moves the kernels that read it, 3-8% from one pool to
        another (docs/benchmarks.md, session 9), so arms reading pools of their own differ by
        where each pool happens to lie, while on one pool their ratio holds. A child reaches
        the pool only by device work, and its device work outside its own calls is a finding
        (the sealed boundary). On the CPU each child gets a file of its own in its scratch
        folder, which it could write at any time outside every record."""
        started = time.monotonic()
        template = self.make_problem_inputs(0)
        scratch = getattr(child, "scratch", None) or self.request["scratch_directory"]
        if self.device == "cpu":
            child.pool = tensors.InputPool(template, self.device, scratch)
        else:
            if self.timing_pool is None:
                self.timing_pool = tensors.InputPool(template, self.device, scratch)
            child.pool = self.timing_pool
        message = {"op": "pool", "pool": child.pool.descriptors, "layout": child.pool.layout}
        if self.device == "cpu":
            outputs = [value for _, value in compare.flatten(self.reference(template))]
            child.receive = tensors.SharedBuffers(
                [value if isinstance(value, torch.Tensor) else torch.empty(0) for value in
                 outputs], "cpu", scratch, f"timed-{child.label}")
            message["receive"] = child.receive.descriptors
        del template
        self.ask(message, self.call_seconds(), pickled=True, channel=child.channel)
        seconds = self.result["phase_seconds"]
        seconds["pools"] = round(seconds.get("pools", 0.0) + time.monotonic() - started, 4)

    def call_seconds(self):
        return float(self.limits.get("call_seconds", 20))

    def check_timed_outputs(self, leaves, described, child):
        """A verified timed call's outputs, read by the judge itself right after the call:
        through the IPC handle of each output's allocation on a GPU, from the judge's receive
        files on the CPU; checked as the trials' are."""

        def read(index, slot, info, reference):
            if self.device != "cuda":
                return child.receive.tensors[index]
            if self.importer is None:
                self.importer = cuda_ipc.Importer()
            stride = info.get("stride")
            if not isinstance(info.get("memory"), dict) or not isinstance(stride, list):
                raise ValueError(info.get("memory_error") or "no output handle")
            return self.importer.tensor(info["memory"], reference.dtype, list(reference.shape),
                                        [int(step) for step in stride])

        return self.check_outputs(leaves, described, read)

    def other_process_findings(self):
        """Processes beside the known ones that could run device work the record misses."""
        candidates = {self.candidate.pid} | self.extra_candidate_pids
        known = {os.getpid(), os.getppid()} | candidates | self.reference_pids
        if self.children.get("prepared_pid") is not None:
            known.add(int(self.children["prepared_pid"]))
        roots = candidates | self.reference_pids
        uid = self.request.get("sandbox_uid")
        found = processes.other_processes(known, int(uid) if uid is not None else None, roots,
                                          self.device)
        if not found:
            return []
        shown = ", ".join(f"{pid} ({command})" for pid, command in found[:3])
        return [f"{len(found)} other process(es) could run device work the record does not "
                f"see: {shown}"]

    def baselines_start(self):
        """The baselines before their arms are timed: the cached ones as they are, or a fresh
        result (the bandwidth, the compile's note) and the reference arms to time,
        [(arm, child)]. A reference child that will not be timed is ended now."""
        if not self.needs_baselines():
            result = dict(self.request["baselines"])
            result["measured"] = False
            return result, []
        result = {"eager": None, "compile": None, "compile_error": self.compile_error,
                  # the cap the compile was abandoned at: a cache entry retries it only
                  # under a larger cap (docs/verdict.md)
                  "compile_timeout_seconds": self.compile_seconds() if self.compile_abandoned
                  else None,
                  "bandwidth_bytes_per_second": self.measure_bandwidth(),
                  "degenerate": self.result.get("degenerate"), "measured": True,
                  "boundary": {}}
        if "eager" not in self.baseline_arms:
            result["error"] = self.reference_error or "the reference's timed child is missing"
        # without eager (failed or missing) there are no baselines to time
        arms = [(arm, child) for arm, child in self.references.items()
                if not result.get("error") and arm in self.baseline_arms]
        for arm, child in self.references.items():
            if (arm, child) not in arms:
                self.end_child(child)
        if not any(arm == "eager" for arm, _ in arms):
            for child in list(self.extra_processes["eager"]):
                self.drop_extra_process("eager", child, None)
        # each arm with its processes: its first, then the further ones
        return result, [(arm, [child] + self.extra_processes.get(arm, [])) for arm, child in arms]

    def interleaves(self, processes):
        """Whether `processes` timed children may be alive at once beside the timing's pool
        (INTERLEAVE_SHARE)."""
        if self.device != "cuda":
            return True
        needed = self.result_input_bytes + processes * self.result_output_bytes
        return needed <= INTERLEAVE_SHARE * torch.cuda.mem_get_info()[0]

    def reference_failed(self, baselines, arm, children, failure):
        """A reference child failed (a call past its limit, a crash, its record): the
        baselines say so and the candidate is still judged; never its fault. The arm's
        children are ended at once, so nothing of them runs beside the candidate's calls."""
        message = getattr(failure, "message", None) or str(failure)
        why = f"the reference's timed {arm} child failed: {message[:500]}"
        if arm == "eager":
            baselines["error"] = why
        else:
            baselines["compile_error"] = baselines["compile_error"] or why
        for child in children:
            child.reader = None
            self.end_child(child, kill=True)

    def time_arms(self, harness_, baselines, references, candidate):
        """Times the reference arms `references` ([(arm, [child, ...])], eager first, each arm
        with its processes) and, when `candidate`, the candidate's arm in its processes,
        together: each process's setup, then alternating rounds (harness.measure); one arm
        alone is a step of the sequential order. Without eager there is no compile either.
        Each reference arm's children are ended after its arm, their memory freed before
        another child's calls start. Returns the candidate's (result, findings), or None."""
        groups = []
        try:
            for arm, children in references:
                if baselines.get("error"):
                    break
                try:
                    group = []
                    for child in children:
                        child.start_record(self.call_seconds())
                        self.give_pool(child)
                        group.append(harness_.setup(child, arm, reference=True))
                    groups.append(group)
                except (CandidateFailure, device_record.RecordError) as failure:
                    self.reference_failed(baselines, arm, children, failure)
            if candidate:
                group = []
                for child in self.candidate_processes():
                    self.give_pool(child)
                    group.append(harness_.setup(
                        child, "candidate", seal=True,
                        verify_calls=int(self.request.get("timing", {}).get("verify_calls",
                                                                             5))))
                groups.append(group)
            harness_.measure(groups)
            for group in groups:
                first = group[0]
                if not first.reference or baselines.get("error"):
                    continue
                failure = first.failure
                if failure is None:
                    try:
                        measured, _ = harness_.finish(group)
                        baselines["boundary"][first.arm] = measured.pop("boundary")
                        baselines[first.arm] = measured
                    except (CandidateFailure, device_record.RecordError) as error:
                        failure = error
                if failure is not None:
                    self.reference_failed(baselines, first.arm,
                                          [timed.child for timed in group], failure)
        finally:
            for _, children in references:
                for child in children:
                    child.pool = None  # on the CPU its own, freed before another child's exists
                    self.end_child(child)
        return harness_.finish(groups[-1]) if candidate else None

    def candidate_processes(self):
        """The candidate's timed processes: its first (which ran the trials), then the
        further ones."""
        return [self.candidate] + self.extra_processes["candidate"]

    def timing(self):
        """Times eager, torch.compile and the candidate: in alternating rounds when every
        timed child's pool fits at once (interleaves), so a drift of the device's state
        during the timing cancels in the speedups; else the baselines one after the other,
        then the candidate (docs/verdict.md, "Adaptive repetitions")."""
        harness_ = harness.Harness(self)
        # the candidate's record runs from here: its device work while the baselines are
        # timed is outside its calls too
        for child in self.candidate_processes():
            child.start_record(self.call_seconds())
        self.enter("baselines")
        baselines, references = self.baselines_start()
        interleaved = bool(references) and self.interleaves(
            sum(len(children) for _, children in references) +
            len(self.candidate_processes()))
        if not interleaved:
            for reference in references:
                self.time_arms(harness_, baselines, [reference], candidate=False)
            references = []
            # whole before the candidate's arm: kept (and cached) if the candidate fails
            self.result["baselines"] = baselines
        self.enter("timing")
        candidate, findings = self.time_arms(harness_, baselines, references, candidate=True)
        # interleaved, whole only now: a candidate that failed meanwhile leaves none to cache
        self.result["baselines"] = baselines
        boundary = candidate.pop("boundary")
        for child in self.candidate_processes():
            if child.reader is None:
                continue
            _, outside = device_record.assign(child.records, child.windows)
            if outside:
                examples = "; ".join(device_record.describe_outside(record, child.windows)
                                     for record in outside[:device_record.OUTSIDE_EXAMPLES])
                where = "" if child is self.candidate else f" in {child.label}"
                findings.append(f"{len(outside)} device operation(s) ran outside the timed "
                                f"calls{where} (between calls, at delivery, from a thread or "
                                f"at exit): {examples}")
            boundary["outside"] = boundary.get("outside", 0) + len(outside)
        for child in self.candidate_processes():
            child.stop_record(self.call_seconds())
        if self.device == "cuda":
            # under load, right after the timed calls: what the numbers were measured at
            properties = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = "%08x:%02x:%02x.0" % (getattr(properties, "pci_domain_id", 0),
                                        getattr(properties, "pci_bus_id", 0),
                                        getattr(properties, "pci_device_id", 0))
            self.result["environment"]["clocks"] = cuda_ipc.gpu_clocks(bus)
        boundary["findings"] = findings
        boundary["l2_reset_error"] = self.l2_reset_error
        device_note = None
        if self.device != "cuda":
            device_note = "no device time on the CPU"
        elif candidate["device"] is None:
            device_note = f"no device record: {boundary.get('record') or 'no records'}"
        self.result["timing"] = {
            "method": "one harness for every arm: fresh inputs at a new address in a pool the "
                      "judge owns, the judge's L2 flush, the judge's clock around go/done; "
                      "device time from the child's device record (CUPTI), wall time less "
                      "the null round trip",
            "null_overhead_ms": boundary.get("null_overhead_ms"),
            "order": "interleaved" if interleaved else "sequential",
            "processes": self.processes_per_arm,
            "candidate": candidate, "device_note": device_note, "boundary": boundary,
            "verified_calls": boundary.get("verified_calls"),
            "verification_failures": boundary.get("verification_failures")}
        # a broken boundary is tampering with the timer: the verdict rejects it, naming why
        self.result["tamper"] = list(self.result.get("tamper") or []) + findings

    def roofline(self, total):
        """The bandwidth floor of `total` bytes (the inputs and the outputs of one call)."""
        bandwidth = (self.result.get("baselines") or {}).get("bandwidth_bytes_per_second")
        if not bandwidth:
            return None
        return {"bytes": total, "bandwidth_bytes_per_second": bandwidth,
                "floor_ms": total / bandwidth * 1e3}

    def kernels(self):
        reply = self.ask({"op": "profile"}, float(self.limits.get("call_seconds", 20)))
        return kernel_summary(reply.get("kernels"), self.own_names)

    def compute_bound(self):
        """The reference's FLOPs as torch's FLOP counter sees them (matrix products,
        convolutions, attention; elementwise work is not counted) against the measured
        matrix-product rate of the output's dtype: the compute side of the roofline."""
        from torch.utils.flop_counter import FlopCounterMode

        try:
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                output = self.model(*self.result_inputs)
            flops = int(counter.get_total_flops())
        except Exception as error:  # noqa: BLE001 - the counter does not know every operator
            return {"flops": None, "error": f"{type(error).__name__}: {str(error)[:200]}"}
        result = {"flops": flops, "peak_flops_per_second": None, "floor_ms": None}
        leaves = [v for _, v in compare.flatten(output) if isinstance(v, torch.Tensor)]
        if self.device == "cuda" and flops > 0 and leaves and leaves[0].is_floating_point():
            dtype = leaves[0].dtype
            peak = measure_matmul_peak(dtype)
            result.update({"peak_flops_per_second": peak, "dtype": tensors.dtype_name(dtype),
                           "floor_ms": flops / peak * 1e3})
        return result

    def reference_kernels(self):
        """The reference's kernels for `kagent profile`, traced in this (trusted) process."""

        def run():
            self.reference(self.result_inputs)
            self.synchronize()

        return kernel_summary(kernel_trace.trace(run, self.request.get("trace_library")), [])

    def counters(self):
        """DRAM and SM throughput of the candidate's kernels: the candidate replays one more
        forward under CUPTI's range profiler. Its failure (a replayed kernel that hangs or
        crashes) is reported here and changes nothing else."""
        timeout = max(60.0, 3 * float(self.limits.get("call_seconds", 20)))
        try:
            reply = self.ask({"op": "counters"}, timeout)
        except CandidateFailure as failure:
            return {"error": f"the candidate failed during the counters pass ({failure.kind}): "
                             f"{failure.message[:600]}"}
        return counters_summary(reply.get("counters"), self.own_names)

    def reference_counters(self):
        """The reference's DRAM and SM throughput, replayed in this (trusted) process."""

        def run():
            self.reference(self.result_inputs)
            self.synchronize()

        try:
            answer = kernel_trace.counters(run, self.request.get("trace_library"))
        except kernel_trace.CountersUnavailable as error:
            answer = {"error": str(error)}
        return counters_summary(answer, [])

    # -- the whole evaluation --------------------------------------------------------------
    def timing_window(self, started):
        """When this evaluation held its device's timing lock alone, on the wall clock (Unix
        seconds): the span began after the lock was taken and ends before it is let go, so
        the windows of evaluations on one device never overlap (kagentd logs each one, and
        bench/timing_windows.py checks a log for overlaps)."""
        gpu = int(self.request.get("gpu_index", 0)) if self.device == "cuda" else None
        return {"device": self.device, "gpu_index": gpu, "start_unix": round(started, 6),
                "end_unix": round(time.time(), 6)}

    def enter(self, phase):
        """Starts a phase; the time spent in the previous one goes into phase_seconds, its
        peak of device memory into phase_peak_bytes."""
        now = time.monotonic()
        self.result["phase_seconds"][self.phase] = round(now - self.phase_started, 4)
        self.result["phase_peak_bytes"][self.phase] = self.peak_bytes()
        self.phase_started = now
        self.phase = self.result["phase"] = phase

    def peak_bytes(self):
        """The most device memory the judge's tensors held since the last call (null on the
        CPU); the candidate's and the compile child's memory is their own processes'."""
        if self.device != "cuda" or not torch.cuda.is_initialized():
            return None
        peak = int(torch.cuda.max_memory_allocated())
        torch.cuda.reset_peak_memory_stats()
        return peak

    def run(self):
        try:
            self.start()
            self.enter("trials")
            cached = self.request.get("baselines") or {}
            probe = not isinstance(cached.get("degenerate"), dict)
            # from here the candidate runs on the device: beside other evaluations' untimed
            # work, never during their timed calls (released in finally)
            self.timing_lock.shared()
            passed = self.trials(probe)
            if not probe:
                self.result["degenerate"] = cached["degenerate"]
            if not passed:
                self.result["tamper"] = self.ask({"op": "tamper"}, 20).get("findings", [])
                return
            self.result_inputs = problem.make_inputs(self.module, 0, "problem", self.device)
            self.result_input_bytes = tensors.tensor_bytes(self.result_inputs)
            reference_ms = self.reference_call_ms()
            # the reference's compile may take long: other evaluations time meanwhile
            self.timing_lock.release()
            self.wait_for_baselines()
            self.wait_for_extra_processes()
            self.timing_lock.shared()
            self.trim_timing_processes(reference_ms)
            self.enter("profile")
            if self.device == "cuda":
                self.load_inputs(self.result_inputs)
                self.result["kernels"] = self.kernels()
            if not self.request.get("profile_reference"):
                self.result_inputs = None  # only kagent profile runs the reference again
            self.enter("timing_wait")
            self.timing_lock.release()
            self.timing_lock.exclusive()
            started = time.time()
            try:
                self.timing()
            finally:
                if self.timing_lock.held == "exclusive":  # without a lock, no window
                    self.result["timing_window"] = self.timing_window(started)
            self.timing_lock.release()
            self.timing_lock.shared()
            self.result["roofline"] = self.roofline(self.result_input_bytes +
                                                    self.result_output_bytes)
            if self.request.get("profile_reference"):
                self.enter("profile_reference")
                self.result["compute"] = self.compute_bound()
                if self.device == "cuda":
                    self.result["reference_kernels"] = self.reference_kernels()
                    self.result["reference_counters"] = self.reference_counters()
            self.result["tamper"] = list(self.result.get("tamper") or []) + \
                self.ask({"op": "tamper"}, 20).get("findings", [])
            for child in self.extra_processes["candidate"]:
                self.result["tamper"] += [f"{child.label}: {finding}" for finding in child.ask(
                    {"op": "tamper"}, 20).get("findings", [])]
            if self.request.get("profile_reference") and self.device == "cuda":
                # after timing (replay is slow) and after the tamper check (a candidate that
                # dies under replay must not lose its verdict)
                self.enter("counters")
                self.result["counters"] = self.counters()
            if self.request.get("generalisation"):
                # last: a candidate that fails at other sizes has its verdict already
                self.enter("generalisation")
                self.generalise()
            self.enter("done")
            try:
                self.channel.send_json({"op": "exit"})
            except ChannelClosed:
                pass
        except (problem.ProblemError, torch.OutOfMemoryError) as error:
            # an OutOfMemoryError of the judge's own (shared buffers, a fingerprint) too
            self.result["problem_error"] = explain_memory(error, self.module, self.request,
                                                          self.device, self.free_bytes)
        except CandidateFailure as failure:
            self.result["candidate_error"] = {"kind": failure.kind, "phase": self.phase,
                                              "message": failure.message,
                                              "traceback": failure.trace}
        finally:
            self.timing_lock.release()
            if self.phase != "done":
                self.result["phase_seconds"][self.phase] = round(
                    time.monotonic() - self.phase_started, 4)
                self.result["phase_peak_bytes"][self.phase] = self.peak_bytes()


def measure_bandwidth(device):
    """Device memory bandwidth from a 1 GiB copy: the best of three rounds, since a low
    figure would raise the roofline floor and could reject an honest kernel."""
    if device != "cuda":
        return None
    count = 1 << 28  # 1 GiB of float32
    source = torch.empty(count, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    source.uniform_()
    for _ in range(3):
        target.copy_(source)
    best = 0.0
    for _ in range(3):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        repeats = 10
        start.record()
        for _ in range(repeats):
            target.copy_(source)
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / repeats
        best = max(best, 2 * count * 4 / seconds)
    del source, target
    return best


def measure_matmul_peak(dtype):
    """The GPU's matrix-product rate in `dtype` (FLOP/s), from five large products."""
    size = 8192 if dtype != torch.float64 else 4096
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    torch.mm(a, b)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        torch.mm(a, b)
    end.record()
    torch.cuda.synchronize()
    return 5 * 2 * size ** 3 / (start.elapsed_time(end) / 1e3)


def build_reference(module, request, device):
    """The problem's Model, built as ModelNew will be: same seed, same init inputs."""
    seed = int(request["seeds"][0]) if request.get("seeds") else 0
    init_inputs = problem.call_input_function(module, "get_init_inputs", seed, device)
    problem.seed_everything(seed)
    try:
        with torch.device(device):
            model = module.Model(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
    except BaseException as error:  # noqa: B902
        raise problem.ProblemError(f"Model(*get_init_inputs()) failed: "
                                   f"{type(error).__name__}: {error}")
    return model, init_inputs, seed


def setup_message(model, init_inputs, seed):
    """What the candidate child builds ModelNew from: the seed and init inputs the reference
    was built with, and the reference's parameters (copied by name where shapes match)."""
    state = {}
    if isinstance(model, torch.nn.Module):
        state = {name: value.detach() for name, value in model.state_dict().items()}
    return {"seed": seed, "init_inputs": init_inputs, "state": state,
            "tf32": {"matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                     "cudnn": bool(torch.backends.cudnn.allow_tf32)}}


def sizes_text(sizes):
    """"batch_size 16 -> 9, dim 16384 -> 8193" for a {name: [old, new]} mapping."""
    return ", ".join(f"{name} {old} -> {new}" for name, (old, new) in sizes.items())


def run_reference(model, inputs):
    """The reference's outputs for these inputs; a ProblemError when the problem's Model
    cannot produce them."""
    try:
        with torch.no_grad():
            output = model(*inputs)
    except BaseException as error:  # noqa: B902
        raise problem.ProblemError(f"Model.forward failed: {type(error).__name__}: {error}")
    if output is None:
        raise problem.ProblemError("Model.forward returned nothing")
    return output


def _is_out_of_memory(error):
    while error is not None:
        if isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower():
            return True
        error = error.__cause__ or error.__context__
    return False


def _gigabytes(count):
    return f"{count / 1e9:.3g} GB"


def explain_memory(error, module, request, device, free_bytes):
    """The problem error for `error`: as it is, unless the device ran out of memory; then
    how much the problem needs, from its inputs' and outputs' sizes found on the meta
    device (shapes without memory), against what the device had free."""
    if not _is_out_of_memory(error) or module is None:
        return str(error)
    sizes = ""
    try:
        seed = int(request["seeds"][0]) if request.get("seeds") else 0
        inputs = problem.call_input_function(module, "get_inputs", seed, "meta")
        input_bytes = tensors.tensor_bytes(inputs)
        init_inputs = problem.call_input_function(module, "get_init_inputs", seed, "meta")
        with torch.device("meta"), torch.no_grad():
            outputs = module.Model(*init_inputs)(*inputs)
        output_bytes = tensors.tensor_bytes(value for _, value in compare.flatten(outputs))
        # the judge holds its own inputs, the shared copy, the receive buffers and the
        # reference outputs; the candidate its outputs: the problem's own temporaries besides
        needed = JUDGE_INPUT_COPIES * input_bytes + JUDGE_OUTPUT_COPIES * output_bytes
        sizes = (f"needs about {_gigabytes(needed)} (inputs {_gigabytes(input_bytes)}, outputs "
                 f"{_gigabytes(output_bytes)}; an evaluation holds "
                 f"{JUDGE_INPUT_COPIES} x inputs + {JUDGE_OUTPUT_COPIES} x outputs at once, "
                 f"{needed / max(1, input_bytes + output_bytes):.2g} x their sum, "
                 "plus the reference's own temporaries)")
    except BaseException as failure:  # noqa: B902 - the sizes are a courtesy
        sizes = f"needs more memory than there is (its sizes are unknown: " \
                f"{type(failure).__name__}: {str(failure)[:200]})"
    if device == "cuda":
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        free = free_bytes if free_bytes is not None else torch.cuda.mem_get_info()[0]
        room = f"the GPU has {_gigabytes(free)} free of {_gigabytes(total)}"
    else:
        room = f"the {device} device ran out of memory"
    return f"it does not fit in memory: it {sizes}; {room} ({str(error)[:300]})"


def check_problem_child(request, result_fd):
    """Entry point of the child of a check_problem request (docs/worker-protocol.md): what the
    judge does with the problem before any candidate runs (load it, build Model from
    get_init_inputs(), make inputs with get_inputs(), run the reference once), so that a
    problem that cannot be used is refused before a model is asked for candidates. Writes
    {"problem_error", "internal_error"} as one JSON line to result_fd; never returns."""
    result = {"problem_error": None, "internal_error": None}
    module, device, free_bytes = None, request.get("device"), None
    try:
        if device == "cuda":
            torch.cuda.set_device(request["device_ordinal"])
            free_bytes = torch.cuda.mem_get_info()[0]
        module = problem.load_problem(request["problem_path"])
        model, _, seed = build_reference(module, request, device)
        run_reference(model, problem.make_inputs(module, seed, "problem", device))
    except (problem.ProblemError, torch.OutOfMemoryError) as error:
        result["problem_error"] = explain_memory(error, module, request, device,
                                                 free_bytes)[:4000]
    except BaseException as error:  # noqa: B902 - an internal failure is still reported
        result["internal_error"] = f"{type(error).__name__}: {str(error)[:4000]}"
    # a few KiB at most: one write into an empty pipe
    os.write(result_fd, json.dumps(result).encode() + b"\n")
    os.close(result_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def kernel_summary(records, own_names):
    """Launches, total GPU time and the share in the candidate's own kernels, from the
    records of one call (untrusted when they come from the candidate: fields are checked)."""
    if not isinstance(records, list):
        return None
    launches, own_ms, total_ms = [], 0.0, 0.0
    for record in records[:200]:
        if not isinstance(record, dict):
            continue
        name = str(record.get("name", ""))[:500]
        milliseconds = float(record.get("ms", 0.0) or 0.0)
        own = is_own_kernel(name, own_names)
        launch = {"name": name, "count": int(record.get("count", 0) or 0), "ms": milliseconds,
                  "own": own}
        for key in ("grid", "block"):
            if isinstance(record.get(key), list) and len(record[key]) == 3:
                launch[key] = [int(value) for value in record[key]]
        for key in ("registers", "shared_bytes"):
            if isinstance(record.get(key), int):
                launch[key] = record[key]
        if isinstance(record.get("streams"), list):
            launch["streams"] = [stream for stream in record["streams"][:4]
                                 if isinstance(stream, int)]
        launches.append(launch)
        total_ms += milliseconds
        own_ms += milliseconds if own else 0.0
    return {"own_ms": own_ms, "total_ms": total_ms,
            "own_share": own_ms / total_ms if total_ms > 0 else 0.0,
            "own_names": own_names, "launches": launches}


def _percent(value):
    """A percentage from untrusted JSON: a finite number, held to [0, 100], or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return min(100.0, max(0.0, float(value)))


def counters_summary(answer, own_names):
    """{"kernels": [{"name", "count", "ms", "dram_percent", "sm_percent", "own"}], "uncounted"}
    or {"error"}, from a counters pass's answer (untrusted when it comes from the candidate:
    fields are checked, records that fail are left out)."""
    if not isinstance(answer, dict):
        return {"error": "the counters pass returned nothing"}
    if "error" in answer:
        return {"error": str(answer["error"])[:1000]}
    records = answer.get("kernels")
    if not isinstance(records, list):
        return {"error": "the counters pass returned no kernel list"}
    kernels = []
    for record in records[:200]:
        if not isinstance(record, dict):
            continue
        dram, sm = _percent(record.get("dram_percent")), _percent(record.get("sm_percent"))
        milliseconds = record.get("ms")
        count = record.get("count")
        if (dram is None or sm is None or not isinstance(count, int) or isinstance(count, bool)
                or isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float))
                or not math.isfinite(milliseconds) or milliseconds < 0):
            continue
        name = str(record.get("name", ""))[:500]
        # counts held to 2**31: the verdict's JSON parser refuses huge integers
        kernels.append({"name": name, "count": min(max(0, count), 1 << 31),
                        "ms": float(milliseconds),
                        "dram_percent": dram, "sm_percent": sm,
                        "own": is_own_kernel(name, own_names)})
    uncounted = answer.get("uncounted")
    return {"kernels": kernels, "uncounted": min(max(0, uncounted), 1 << 31)
            if type(uncounted) is int else 0}


def is_own_kernel(name, own_names):
    """A kernel is the candidate's own when its name is one the candidate defines: a Triton
    kernel by its function name, a CUDA kernel by its unqualified function name outside
    torch's and the vendor libraries' namespaces."""
    base = name.strip()
    if base.startswith("void "):
        base = base[5:]
    # c++filt spells an anonymous namespace "(anonymous namespace)::": its '(' opens no list.
    base = base.replace("(anonymous namespace)::", "").split("(", 1)[0]
    depth, plain = 0, []
    for character in base:
        if character == "<":
            depth += 1
        elif character == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            plain.append(character)
    qualified = "".join(plain).strip()
    for prefix in ("at::", "c10::", "torch::", "cutlass::", "cub::", "thrust::", "flash::",
                   "cudnn", "cublas", "triton_poi_", "triton_red_", "triton_per_", "triton_tem_"):
        if qualified.startswith(prefix):
            return False
    unqualified = qualified.rsplit("::", 1)[-1]
    return unqualified in own_names


def judge_one(sock, result_fd, request, candidate_pid, children):
    """Judges one evaluation in this process, the kept judge (worker.py), and writes its
    result to result_fd, which it closes; what it held on the device goes at
    release_device. children: see Judge."""
    judge = Judge(Channel(sock, accept_pickles=False), request, candidate_pid, children)
    try:
        judge.run()
    except BaseException as error:  # noqa: B902 - an internal failure is still reported
        judge.result["internal_error"] = f"{type(error).__name__}: {error}"
        judge.result["internal_traceback"] = traceback.format_exc()[-4000:]
    payload = json.dumps(_finite_or_none(judge.result), allow_nan=False).encode() + b"\n"
    view = memoryview(payload)
    while view:
        written = os.write(result_fd, view)
        view = view[written:]
    os.close(result_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    _held.append(judge.importer)


# What the last evaluation's judge left open: its Importer, until the candidate is gone.
_held = []


def release_device():
    """After an evaluation, once its candidate has ended (the worker says so): the
    candidate's outputs the judge opened are closed and the judge's cached memory goes back,
    so that an idle kept judge holds nothing another lane's candidate may need. Its own
    buffers go back only now too: the candidate had them open; so does the problem's module,
    with whatever its code holds."""
    sys.modules.pop("kagent_problem", None)
    gc.collect()  # the last Judge, its tensors and the problem's module
    while _held:
        importer = _held.pop()
        if importer is not None:
            importer.close()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
