"""Loading problem and candidate files, and building inputs from seeds.

A problem is a KernelBench-format file taken as-is: class Model, get_inputs(),
get_init_inputs() and module constants. Inputs are built directly on the evaluation device
(under `with torch.device(...)`), so a 6 GB input costs milliseconds, not a host copy.
"""
import contextlib
import importlib.machinery
import importlib.util
import random
import sys
import types

import torch


class ProblemError(Exception):
    """The problem file cannot be used; the message says why, for a person."""


class CandidateFailure(Exception):
    """The candidate failed; `kind` is one of the protocol's candidate_error kinds."""

    def __init__(self, kind, message, trace=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.trace = trace


def load_module(path, name):
    """Executes the file at `path` as a fresh module named `name`. Exceptions propagate."""
    sys.dont_write_bytecode = True
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    # Registered so that inspect (Triton's @jit reads its source) and dataclasses find it.
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def load_problem(path):
    try:
        module = load_module(path, "kagent_problem")
    except SyntaxError as error:
        raise ProblemError(f"problem file is not valid Python: {error.msg} (line {error.lineno})")
    except BaseException as error:  # noqa: B902 - any failure of the user's file is reported
        raise ProblemError(f"problem file does not import: {type(error).__name__}: {error}")
    if not isinstance(getattr(module, "Model", None), type):
        raise ProblemError("problem file defines no class Model")
    if not callable(getattr(module, "get_inputs", None)):
        raise ProblemError("problem file defines no function get_inputs()")
    return module


def seed_everything(seed):
    random.seed(seed)
    # torch.manual_seed's CPU and CUDA seeding, without its seeding of backends never used
    # here (XPU, MTIA): each of those formats the call stack to queue a lazy seed, 1.5 ms a
    # call, which was a quarter of a timed call's host work on an H100 (the judge seeds the
    # inputs of every timed call)
    torch.default_generator.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(item, device) for item in value)
    return value


def call_input_function(module, name, seed, device):
    function = getattr(module, name, None)
    if function is None:
        if name == "get_init_inputs":
            return []
        raise ProblemError(f"problem file defines no function {name}()")
    seed_everything(seed)
    try:
        with torch.device(device):
            values = function()
    except BaseException as error:  # noqa: B902
        raise ProblemError(f"{name}() failed: {type(error).__name__}: {error}")
    if values is None:
        raise ProblemError(f"{name}() returned nothing")
    if not isinstance(values, (list, tuple)):
        values = [values]
    return [_to_device(value, device) for value in values]


def make_inputs(module, seed, distribution, device):
    """The problem's inputs for `seed`. The "signed" distribution keeps shapes and dtypes but
    draws floating tensors from a standard normal, so that problems whose own [0, 1) inputs
    hide mistakes (ReLU of non-negative numbers, softmax of near-constant rows) are probed."""
    values = call_input_function(module, "get_inputs", seed, device)
    if distribution == "signed":
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        values = [
            torch.randn(value.shape, dtype=value.dtype, device=value.device, generator=generator)
            if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for value in values
        ]
    return values


def _global_names(code):
    """Every name `code` and the code nested in it (comprehensions, lambdas) load by name."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def size_globals(module, function_names):
    """The problem's sizes as the generalisation gate sees them: its module-level positive
    integers (booleans are not sizes) that the named input functions read, {name: value} in
    the order the module defines them."""
    names = set()
    for function_name in function_names:
        code = getattr(getattr(module, function_name, None), "__code__", None)
        if code is not None:
            names |= _global_names(code)
    return {name: value for name, value in vars(module).items()
            if name in names and type(value) is int and value > 0}


def smaller_size(value):
    """The size the generalisation gate tries instead of `value`: halved and made odd, so
    that a kernel written for the visible power of two meets a ragged edge."""
    return max(1, value // 2) | 1


@contextlib.contextmanager
def resized(module, sizes):
    """The problem module with some module-level sizes replaced, restored on leaving."""
    old = {name: getattr(module, name) for name in sizes}
    try:
        for name, value in sizes.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)


def own_kernel_names(source):
    """Names of the kernels a candidate defines: @triton.jit functions and CUDA __global__
    functions (also inside load_inline source strings)."""
    import re

    names = set()
    decorated = re.compile(
        r"((?:^[ \t]*@[^\n]*\n)+)[ \t]*def[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
    for match in decorated.finditer(source):
        if "triton" in match.group(1) or "jit" in match.group(1):
            names.add(match.group(2))
    global_function = re.compile(
        r"__global__\s+(?:[\w:<>,\s\*&]+?\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        r"([A-Za-z_]\w*)\s*\(")
    for match in global_function.finditer(source):
        names.add(match.group(1))
    names.discard("void")
    return sorted(names)
