"""Whole models (`kagent model`, docs/whole-models.md): where one forward spends its time, module
by module, and each chosen hot spot written as a KernelBench-format problem of its own.

The model is a problem as every other (Model, get_inputs, get_init_inputs; `kagent model` writes
a wrapper for a factory and an input function), loaded by the judge's code in a child set up as
the judge is (check_problem with a "model_analysis" object, docs/worker-protocol.md). One
forward runs under torch.profiler with every module's call marked by a record_function range,
so each operator's time (CPU time on the CPU, its kernels' device time on CUDA) belongs to the
innermost module that ran it. A module's own time is what its operators took outside its
children; hot spots are ranked by it and extracted whole, children included, so an attention
block whose own matrix products dominate becomes one problem. Each sub-problem builds the model
as the judge builds it (same seed, so with the model's own weights) and keeps the one module;
it is checked here to reproduce, bit for bit, what that module computed in the model's forward.
"""
import bisect
import fnmatch
import inspect
import json
import keyword
import math
import os
import re
import sys

import torch

from . import compare, problem, tensors

# The model is built, and its inputs made, with this seed, here and in every sub-problem: the
# sub-problem's module then holds the weights the analysed model held.
MODEL_SEED = 1
RANGE_PREFIX = "kagent.module:"
# A sub-problem's source is a few KiB; the class source quoted in it is capped.
SOURCE_QUOTE_CAP = 6000
CONSTANT_TYPES = (bool, int, float, str, type(None))


class AnalysisError(Exception):
    """The model cannot be analysed; the message says why, for a person."""


def _synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def module_paths(model):
    """{module: path} for every submodule, the model itself as ""."""
    return {module: name for name, module in model.named_modules()}


class _Ranges:
    """Forward hooks that open a profiler range named after the module around each call."""

    def __init__(self, model):
        self.open = []
        self.handles = []
        for module, path in module_paths(model).items():
            self.handles.append(module.register_forward_pre_hook(self._enter(path)))
            self.handles.append(module.register_forward_hook(self._leave, always_call=True))

    def _enter(self, path):
        def hook(module, args):
            scope = torch.autograd.profiler.record_function(RANGE_PREFIX + path)
            scope.__enter__()
            self.open.append(scope)
        return hook

    def _leave(self, module, args, output):
        if self.open:
            self.open.pop().__exit__(None, None, None)

    def remove(self):
        for handle in self.handles:
            handle.remove()


def _event_time(event, device):
    """Microseconds of one profiler event and everything under it, on the clock that counts."""
    if device == "cuda":
        return float(event.device_time_total)
    return float(event.cpu_time_total)


def _shapes_text(shapes):
    return ", ".join("x".join(str(size) for size in shape) or "scalar"
                     for shape in (shapes or []) if isinstance(shape, (list, tuple)) and shape)


def input_signatures(model, inputs):
    """One forward, noting what each module first receives: {path: "64x256 float32, ..."}
    (its tensor arguments, positional then keyword)."""
    signatures, handles = {}, []

    def note(path):
        def hook(module, args, kwargs):
            if path not in signatures:
                values = list(args) + list(kwargs.values())
                signatures[path] = describe_tensors(
                    value for value in values if isinstance(value, torch.Tensor))
        return hook

    for module, path in module_paths(model).items():
        handles.append(module.register_forward_pre_hook(note(path), with_kwargs=True))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return signatures


def profile_modules(model, inputs, device, repeat=5):
    """One warm-up forward (which notes each module's inputs), then `repeat` forwards under
    torch.profiler. Returns (total_us of the fastest forward, {path: {"total_us", "self_us",
    "calls", "inputs", "operators": {name: {"us", "shapes"}}}}): a module's total is its calls'
    ranges, its own time its operators' outside its children, each from the forward in which
    the module was fastest (on a busy machine the others carry the scheduler's pauses)."""
    signatures = input_signatures(model, inputs)
    _synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    ranges = _Ranges(model)
    try:
        with torch.profiler.profile(activities=activities, record_shapes=True) as recorder:
            with torch.no_grad():
                for _ in range(repeat):
                    model(*inputs)
            _synchronize(device)
    finally:
        ranges.remove()
    paths = set(module_paths(model).values())
    # the ranges' host side: on CUDA kineto also reports each range on the device's timeline
    events = [event for event in recorder.events() if event.name.startswith(RANGE_PREFIX)
              and event.name[len(RANGE_PREFIX):] in paths
              and event.device_type == torch.autograd.DeviceType.CPU]
    # each forward is the window of one call of the model itself (path "")
    starts = sorted(event.time_range.start for event in events if event.name == RANGE_PREFIX)
    rounds = [{} for _ in starts]
    for event in events:
        path = event.name[len(RANGE_PREFIX):]
        index = max(0, bisect.bisect_right(starts, event.time_range.start) - 1)
        entry = rounds[index].setdefault(path, {"total_us": 0.0, "self_us": 0.0, "calls": 0,
                                                "operators": {}})
        entry["total_us"] += _event_time(event, device)
        entry["calls"] += 1
        # its own time is its operators' (not what is left once its children are taken
        # away: on a busy CPU that would count the scheduler's pauses as a container's work)
        for child in event.cpu_children:
            if child.name.startswith(RANGE_PREFIX):
                continue
            child_time = _event_time(child, device)
            operator = entry["operators"].setdefault(
                child.name, {"us": 0.0, "shapes": _shapes_text(child.input_shapes)})
            operator["us"] += child_time
            entry["self_us"] += child_time
    stats = {}
    for path in paths:
        seen = [one[path] for one in rounds if path in one]
        if seen:
            stats[path] = dict(min(seen, key=lambda entry: entry["total_us"]),
                               inputs=signatures.get(path))
    total = stats[""]["total_us"] if "" in stats else 0.0
    return total, stats


class _Capture:
    """The first call's arguments and output of each named module, cloned as they were."""

    def __init__(self, model, paths):
        self.calls = {}
        self.handles = []
        for path in paths:
            module = model.get_submodule(path)
            self.handles.append(module.register_forward_pre_hook(self._before(path),
                                                                 with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._after(path)))

    @staticmethod
    def _clone(value):
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (list, tuple)):
            return type(value)(_Capture._clone(item) for item in value)
        if isinstance(value, dict):
            return {key: _Capture._clone(item) for key, item in value.items()}
        return value

    def _before(self, path):
        def hook(module, args, kwargs):
            if path not in self.calls:
                self.calls[path] = {"args": self._clone(args), "kwargs": self._clone(kwargs)}
        return hook

    def _after(self, path):
        def hook(module, args, output):
            call = self.calls.get(path)
            if call is not None and "output" not in call:
                call["output"] = self._clone(output)
        return hook

    def remove(self):
        for handle in self.handles:
            handle.remove()


def capture(model, inputs, paths):
    """{path: {"args", "kwargs", "output"}} of the first call of each module in `paths`."""
    recorder = _Capture(model, paths)
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        recorder.remove()
    return recorder.calls


def _constant_text(value):
    """Python source for a constant argument, or None where it is no plain constant."""
    if isinstance(value, CONSTANT_TYPES):
        if isinstance(value, float) and not math.isfinite(value):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, (tuple, list)):
        items = [_constant_text(item) for item in value]
        if any(item is None for item in items):
            return None
        inner = ", ".join(items) + ("," if isinstance(value, tuple) and len(items) == 1 else "")
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, torch.dtype):
        return f"torch.{tensors.dtype_name(value)}"
    return None


def call_signature(call):
    """How the sub-problem calls its module: (tensor inputs [(name, tensor)], the call's
    argument text, the names of keyword arguments that are tensors, in order). Raises
    AnalysisError for an argument that is neither a tensor nor a plain constant."""
    inputs, pieces, tensor_keywords = [], [], []

    def argument(value, where):
        if isinstance(value, torch.Tensor):
            name = f"x{len(inputs)}"
            inputs.append((name, value))
            return name
        text = _constant_text(value)
        if text is None:
            raise AnalysisError(f"its {where} is a {type(value).__name__}, neither a tensor "
                                "nor a plain constant")
        return text

    for index, value in enumerate(call["args"]):
        pieces.append(argument(value, f"argument {index}"))
    for key, value in call["kwargs"].items():
        if not key.isidentifier() or keyword.iskeyword(key):
            raise AnalysisError(f"it is called with the keyword {key!r}")
        pieces.append(f"{key}={argument(value, f'keyword {key}')}")
        if isinstance(value, torch.Tensor):
            tensor_keywords.append(key)
    if not inputs:
        raise AnalysisError("it takes no tensor")
    return inputs, ", ".join(pieces), tensor_keywords


def _input_line(name, value):
    """A get_inputs() line making a tensor of `value`'s shape and dtype."""
    shape = ", ".join(str(size) for size in value.shape)
    shape = f"({shape},)" if value.dim() == 1 else f"({shape})"
    dtype = f"torch.{tensors.dtype_name(value.dtype)}"
    if value.dtype == torch.bool:
        return f"    {name} = torch.rand({shape}) < 0.5"
    if value.is_floating_point() or value.is_complex():
        return f"    {name} = torch.randn({shape}, dtype={dtype})"
    low = int(value.min()) if value.numel() else 0
    high = int(value.max()) if value.numel() else 0
    return f"    {name} = torch.randint({low}, {high + 1}, {shape}, dtype={dtype})"


def _quote(text, indent="    "):
    text = text.replace('"""', "'''").replace("\\", "\\\\")
    if len(text) > SOURCE_QUOTE_CAP:
        text = text[:SOURCE_QUOTE_CAP] + "\n... (cut)"
    return "\n".join((indent + line).rstrip() for line in text.splitlines())


def _class_source(module):
    """The source of the module's class where it is the model's own (torch's are known)."""
    cls = type(module)
    if cls.__module__.startswith("torch."):
        return None
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return None


def describe_tensors(values):
    return ", ".join(f"{'x'.join(str(s) for s in value.shape) or 'scalar'} "
                     f"{tensors.dtype_name(value.dtype)}" for value in values)


def subproblem_source(problem_path, spot, module, call):
    """The KernelBench-format problem of one hot spot (see the module's docstring)."""
    inputs, arguments, _ = call_signature(call)
    parameters = [f"{name} [{', '.join(str(s) for s in value.shape)}] "
                  f"{tensors.dtype_name(value.dtype)}"
                  for name, value in module.state_dict().items()]
    lines = [
        f'"""Hot spot {spot["rank"]} of {os.path.basename(problem_path)}: `{spot["path"]}` '
        f'({spot["class"]}), {spot["share"]:.1%} of one forward\'s {spot["clock"]} time.',
        "",
        "Written by `kagent model` (docs/whole-models.md) as a KernelBench-format problem: Model",
        f"is the module at `{spot['path']}` of the model that {os.path.basename(problem_path)}",
        f"builds, built as the model is built (seed {MODEL_SEED}), so it holds the model's own",
        "weights; get_inputs() makes inputs of the shapes and dtypes the module receives in the",
        "model's forward. ModelNew must compute what Model computes, with parameters of the",
        "same names and shapes (they are copied in by name):",
        "",
        _quote(repr(module)),
        "",
        "Parameters and buffers: " + ("; ".join(parameters) if parameters else "none"),
    ]
    source = _class_source(module)
    if source:
        lines += ["", f"The source of {type(module).__name__}:", "", _quote(source)]
    lines += [
        '"""',
        "import importlib.util",
        "import random",
        "import sys",
        "",
        "import torch",
        "",
        f"MODEL_PROBLEM = {json.dumps(problem_path)}",
        f"MODULE_PATH = {json.dumps(spot['path'])}",
        f"SEED = {MODEL_SEED}",
        "",
        "",
        "def _seed(seed):",
        "    random.seed(seed)",
        "    torch.manual_seed(seed)",
        "    try:",
        "        import numpy",
        "",
        "        numpy.random.seed(seed % (2**32))",
        "    except ImportError:",
        "        pass",
        "",
        "",
        "def _model_problem():",
        '    name = "kagent_model_" + "".join(c if c.isalnum() else "_" for c in MODEL_PROBLEM)',
        "    if name not in sys.modules:",
        "        sys.path.insert(0, MODEL_PROBLEM.rsplit(\"/\", 1)[0])",
        "        spec = importlib.util.spec_from_file_location(name, MODEL_PROBLEM)",
        "        module = importlib.util.module_from_spec(spec)",
        "        sys.modules[name] = module",
        "        try:",
        "            spec.loader.exec_module(module)",
        "        except BaseException:",
        "            del sys.modules[name]",
        "            raise",
        "    return sys.modules[name]",
        "",
        "",
        "class Model(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        whole = _model_problem()",
        "        _seed(SEED)",
        '        init_inputs = whole.get_init_inputs() if hasattr(whole, "get_init_inputs") '
        "else []",
        "        _seed(SEED)",
        "        self.module = whole.Model(*init_inputs).get_submodule(MODULE_PATH)",
        "",
        f"    def forward(self, {', '.join(name for name, _ in inputs)}):",
        f"        return self.module({arguments})",
        "",
        "",
        "def get_inputs():",
    ]
    lines += [_input_line(name, value) for name, value in inputs]
    lines += [f"    return [{', '.join(name for name, _ in inputs)}]", "", "",
              "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def _same(reference, value):
    """Bit for bit the same output (NaN where the reference has NaN)."""
    if isinstance(reference, torch.Tensor):
        return (isinstance(value, torch.Tensor) and value.dtype == reference.dtype
                and value.shape == reference.shape
                and bool(torch.equal(value, reference) or (
                    reference.is_floating_point()
                    and torch.equal(torch.nan_to_num(value), torch.nan_to_num(reference))
                    and torch.equal(value.isnan(), reference.isnan()))))
    if isinstance(reference, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(reference)
                and all(_same(r, v) for r, v in zip(reference, value)))
    return reference == value


def check_subproblem(path, call, device):
    """Loads the written sub-problem as the judge would, builds its Model and runs it on the
    arguments the module received in the model's forward: {"loads", "exact", "reason"}."""
    try:
        module = problem.load_problem(path)
        init_inputs = problem.call_input_function(module, "get_init_inputs", MODEL_SEED, device)
        made = problem.make_inputs(module, MODEL_SEED, "problem", device)
        with torch.device(device):
            model = module.Model(*init_inputs)
        inputs, _, _ = call_signature(call)
        if [(v.shape, v.dtype) for v in made] != [(v.shape, v.dtype) for _, v in inputs]:
            return {"loads": True, "exact": False,
                    "reason": "get_inputs() makes other shapes or dtypes than the model's"}
        with torch.no_grad():
            output = model(*[value for _, value in inputs])
    except BaseException as error:  # noqa: B902 - the user's code may raise anything
        return {"loads": False, "exact": False,
                "reason": f"{type(error).__name__}: {str(error)[:500]}"}
    if _same(call["output"], output):
        return {"loads": True, "exact": True, "reason": None}
    return {"loads": True, "exact": False,
            "reason": "its output differs from the module's output in the model's forward"}


def roofline(module, call, measured_us, device, peaks):
    """FLOPs (torch's counter: matrix products, convolutions, attention), bytes moved at least
    (inputs, outputs, parameters), and where the device's peaks are known, the floor and the
    measured time's distance from it."""
    from torch.utils.flop_counter import FlopCounterMode

    inputs, _, _ = call_signature(call)
    moved = (tensors.tensor_bytes(value for _, value in inputs)
             + tensors.tensor_bytes(value for _, value in compare.flatten(call["output"]))
             + tensors.tensor_bytes(module.state_dict().values()))
    flops = None
    try:
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            module(*call["args"], **call["kwargs"])
        flops = int(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - the counter does not know every operator
        pass
    result = {"flops": flops, "bytes": moved,
              "intensity": flops / moved if flops is not None and moved else None,
              "bound": None, "floor_us": None, "fraction": None}
    bandwidth, peak = peaks.get("bandwidth"), peaks.get("flops")
    if bandwidth and measured_us > 0:
        memory_us = moved / bandwidth * 1e6
        compute_us = (flops or 0) / peak * 1e6 if peak else 0.0
        floor = max(memory_us, compute_us)
        result.update({"bound": "compute" if compute_us > memory_us else "memory",
                       "floor_us": floor, "fraction": min(1.0, floor / measured_us)})
    return result


def device_peaks(device, dtype):
    """The device's memory bandwidth and matrix-product rate for `dtype` (the judge's own
    measurements), or {} on the CPU, where kagent knows neither."""
    if device != "cuda":
        return {}
    from . import judge

    return {"bandwidth": judge.measure_bandwidth(device),
            "flops": judge.measure_matmul_peak(dtype) if dtype.is_floating_point else None}


def matches(spot, patterns):
    """--only: globs, separated by commas, on the module's path or its class name."""
    return any(fnmatch.fnmatchcase(spot["path"], pattern)
               or fnmatch.fnmatchcase(spot["class"], pattern)
               for pattern in patterns.split(",") if pattern)


def rank(model, total_us, stats, clock):
    """Every module but the model itself, by its own time, longest first."""
    paths = module_paths(model)
    spots = []
    for module, path in paths.items():
        entry = stats.get(path)
        if path == "" or entry is None or entry["calls"] == 0:
            continue
        operators = sorted(entry["operators"].items(), key=lambda item: -item[1]["us"])
        spots.append({
            "path": path, "class": type(module).__name__, "calls": entry["calls"],
            "inputs": entry["inputs"],
            "us": entry["total_us"], "self_us": entry["self_us"], "clock": clock,
            "share": entry["total_us"] / total_us if total_us > 0 else 0.0,
            "self_share": entry["self_us"] / total_us if total_us > 0 else 0.0,
            "operators": [{"name": name, "us": value["us"], "shapes": value["shapes"]}
                          for name, value in operators[:5]],
        })
    spots.sort(key=lambda spot: (-spot["self_us"], spot["path"]))
    for number, spot in enumerate(spots, 1):
        spot["rank"] = number
    return spots


def _related(path, other):
    return (path == other or path.startswith(other + ".") or other.startswith(path + ".")
            or other == "" or path == "")


def choose(spots, top, only):
    """The hot spots to extract: the first `top` by own time (matching `only` where given) that
    spent any time, none inside another chosen one."""
    chosen = []
    for spot in spots:
        if len(chosen) >= top:
            break
        if spot["self_us"] <= 0 or (only and not matches(spot, only)):
            continue
        if any(_related(spot["path"], other["path"]) for other in chosen):
            continue
        chosen.append(spot)
    return chosen


def file_name(spot):
    slug = re.sub(r"[^A-Za-z0-9]+", "_", spot["path"]).strip("_")[:60] or "module"
    return f"{spot['rank']:02d}_{slug}.py"


def analyze(module, options, device, scratch):
    """The whole analysis of a loaded problem module: ranked hot spots, the chosen ones with
    their sub-problems' sources (each written to `scratch` and checked there) and the Amdahl
    bound of what replacing them could give."""
    problem_path = options["problem_path"]
    top = int(options.get("top", 3))
    only = options.get("only") or None
    repeat = max(1, int(options.get("repeat", 5)))
    init_inputs = problem.call_input_function(module, "get_init_inputs", MODEL_SEED, device)
    problem.seed_everything(MODEL_SEED)
    try:
        with torch.device(device):
            model = module.Model(*init_inputs)
    except BaseException as error:  # noqa: B902
        raise problem.ProblemError(f"Model(*get_init_inputs()) failed: "
                                   f"{type(error).__name__}: {error}")
    if not isinstance(model, torch.nn.Module):
        raise problem.ProblemError(f"the model is a {type(model).__name__}, not a "
                                   "torch.nn.Module")
    inputs = problem.make_inputs(module, MODEL_SEED, "problem", device)
    try:
        total_us, stats = profile_modules(model, inputs, device, repeat)
    except BaseException as error:  # noqa: B902
        raise problem.ProblemError(f"the model's forward failed: {type(error).__name__}: "
                                   f"{error}")
    clock = "device" if device == "cuda" else "CPU"
    spots = rank(model, total_us, stats, clock)
    if not spots:
        raise problem.ProblemError("the model has no submodules: it is one problem as it is "
                                   "(use kagent optimize)")
    chosen = choose(spots, top, only)
    if not chosen and only:
        raise problem.ProblemError(f"no module path or class matches --only {only!r}")
    calls = capture(model, inputs, [spot["path"] for spot in chosen])
    leaves = [v for _, v in compare.flatten(inputs) if isinstance(v, torch.Tensor)]
    dtype = next((v.dtype for v in leaves if v.is_floating_point()), torch.float32)
    peaks = device_peaks(device, dtype)
    extracted = []
    for spot in chosen:
        submodule = model.get_submodule(spot["path"])
        call = calls.get(spot["path"])
        spot["file"] = file_name(spot)
        try:
            if call is None or "output" not in call:
                raise AnalysisError("its call was not seen again")
            inputs_of, _, keywords = call_signature(call)
            spot["inputs"] = describe_tensors(value for _, value in inputs_of)
            spot["outputs"] = describe_tensors(
                value for _, value in compare.flatten(call["output"])
                if isinstance(value, torch.Tensor))
            spot["tensor_keywords"] = keywords
            spot["roofline"] = roofline(submodule, call, spot["us"] / max(1, spot["calls"]),
                                        device, peaks)
            source = subproblem_source(problem_path, spot, submodule, call)
            path = os.path.join(scratch, spot["file"])
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(source)
            spot["check"] = check_subproblem(path, call, device)
            spot["source"] = source
        except AnalysisError as error:
            spot["check"] = {"loads": False, "exact": False,
                             "reason": f"cannot be extracted: {error}"}
        extracted.append(spot)
    covered = sum(spot["share"] for spot in extracted if spot["check"]["exact"])
    return {"device": device, "clock": clock, "total_us": total_us, "repeat": repeat,
            "seed": MODEL_SEED, "problem_path": problem_path,
            "hotspots": [{key: value for key, value in spot.items() if key != "source"}
                         for spot in spots],
            "chosen": extracted,
            "covered_share": covered,
            "amdahl_bound": 1.0 / (1.0 - covered) if covered < 1.0 else None}


def analyze_child(request, result_fd):
    """The child of a check_problem request that carries "model_analysis"
    (docs/worker-protocol.md): the check's answer with "model_analysis" added. Never returns."""
    result = {"problem_error": None, "internal_error": None, "model_analysis": None}
    device = request.get("device")
    try:
        if device == "cuda":
            torch.cuda.set_device(request["device_ordinal"])
        module = problem.load_problem(request["problem_path"])
        scratch = os.path.join(request.get("judge_directory") or os.environ.get("TMPDIR", "/tmp"),
                               "subproblems")
        os.makedirs(scratch, exist_ok=True)
        result["model_analysis"] = analyze(module, request["model_analysis"], device, scratch)
    except problem.ProblemError as error:
        result["problem_error"] = str(error)[:4000]
    except BaseException as error:  # noqa: B902 - an internal failure is still reported
        result["internal_error"] = f"{type(error).__name__}: {str(error)[:4000]}"
    data = json.dumps(result).encode() + b"\n"
    while data:
        data = data[os.write(result_fd, data):]
    os.close(result_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
