#!/usr/bin/env python3
"""Whole models in the runner (kagent_runner/model.py) on small CPU models of our own
(tests/fixtures/models: an MLP, a convolution block, an attention block): hot spots mapped to
the modules and operators that spent the time, chosen by --top and --only without nesting, and
each sub-problem loading as the judge loads a problem and reproducing, bit for bit, what its
module computed inside the model's forward. Prints TAP."""
import os
import sys
import tempfile

SOURCE = os.path.abspath(os.environ.get("KAGENT_SOURCE_DIR", "."))
sys.path.insert(0, os.path.join(SOURCE, "sandbox", "runner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from kagent_runner import model, problem  # noqa: E402
from tap import test  # noqa: E402
import tap  # noqa: E402

MODELS = os.path.join(SOURCE, "tests", "fixtures", "models")
SCRATCH = tempfile.mkdtemp(prefix="kagent-test-model-")
torch.set_num_threads(1)


def analyse(path, top=3, only=None):
    folder = tempfile.mkdtemp(dir=SCRATCH)
    module = problem.load_problem(path)
    return model.analyze(module, {"problem_path": path, "top": top, "only": only}, "cpu",
                         folder)


def write(name, text):
    path = os.path.join(SCRATCH, name)
    with open(path, "w") as handle:
        handle.write(text)
    return path


# The attention block is built by a factory: a problem around it, as `kagent model --entry`
# writes one (the wrapper's Model is the factory's module itself).
ATTENTION = write("attention_problem.py", f"""
import sys
sys.path.insert(0, {MODELS!r})
import attention
import torch


class Model(torch.nn.Module):
    def __new__(cls):
        return attention.make_model()


def get_inputs():
    return list(attention.make_inputs())
""")


def reproduces(spot):
    """Runs the written sub-problem afresh (load, Model(), forward on the module's own
    arguments from the model's forward) and compares with that forward's output."""
    whole = problem.load_problem(spot["_problem_path"])
    init = problem.call_input_function(whole, "get_init_inputs", model.MODEL_SEED, "cpu")
    problem.seed_everything(model.MODEL_SEED)
    built = whole.Model(*init)
    inputs = problem.make_inputs(whole, model.MODEL_SEED, "problem", "cpu")
    call = model.capture(built, inputs, [spot["path"]])[spot["path"]]
    path = os.path.join(SCRATCH, "again_" + spot["file"])
    with open(path, "w") as handle:
        handle.write(spot["source"])
    sub = problem.load_problem(path)
    tensors, _, _ = model.call_signature(call)
    with torch.no_grad():
        output = sub.Model(*sub.get_init_inputs())(*[value for _, value in tensors])
    return torch.equal(output, call["output"])


def chosen(analysis, path):
    spot = next(spot for spot in analysis["chosen"] if spot["path"] == path)
    spot["_problem_path"] = analysis["problem_path"]
    return spot


@test
def mlp_hot_spots_are_its_linear_layers():
    analysis = analyse(os.path.join(MODELS, "mlp.py"), top=2)
    paths = [spot["path"] for spot in analysis["chosen"]]
    assert sorted(paths) == ["down", "up"], paths
    for spot in analysis["hotspots"]:
        assert spot["operators"], spot
        assert 0 < spot["share"] <= 1 and spot["self_share"] <= spot["share"] + 1e-9, spot
    linear = chosen(analysis, "up")
    assert linear["operators"][0]["name"] == "aten::linear", linear["operators"]
    assert linear["operators"][0]["shapes"].startswith("64x256"), linear["operators"]
    assert linear["inputs"] == "64x256 float32" and linear["outputs"] == "64x1024 float32"
    # 2 * 64 * 256 * 1024 multiply-adds, and at least the weights' bytes moved
    assert linear["roofline"]["flops"] == 2 * 64 * 256 * 1024, linear["roofline"]
    assert linear["roofline"]["bytes"] >= 1024 * 256 * 4
    assert abs(analysis["covered_share"] - sum(s["share"] for s in analysis["chosen"])) < 1e-9
    assert analysis["amdahl_bound"] == 1 / (1 - analysis["covered_share"])


@test
def mlp_sub_problems_reproduce_the_activations():
    analysis = analyse(os.path.join(MODELS, "mlp.py"), top=3)
    assert len(analysis["chosen"]) == 3
    for spot in analysis["chosen"]:
        assert spot["check"] == {"loads": True, "exact": True, "reason": None}, spot["check"]
        assert reproduces(chosen(analysis, spot["path"])), spot["path"]
        assert "get_init_inputs" in spot["source"] and "class Model" in spot["source"]


@test
def conv_block_in_place_relu_and_sequential_paths():
    analysis = analyse(os.path.join(MODELS, "conv_block.py"), top=4)
    paths = {spot["path"] for spot in analysis["hotspots"]}
    assert {"features.0", "features.3", "features.2", "pool", "classifier"} <= paths, paths
    convolution = next(s for s in analysis["hotspots"] if s["path"] == "features.0")
    assert convolution["class"] == "Conv2d"
    assert convolution["operators"][0]["name"] == "aten::conv2d", convolution["operators"]
    for spot in analysis["chosen"]:
        assert spot["check"]["exact"], (spot["path"], spot["check"])
        assert reproduces(chosen(analysis, spot["path"])), spot["path"]
    # the Sequential holds the convolutions: never chosen beside them
    assert "features" not in [spot["path"] for spot in analysis["chosen"]]


@test
def attention_is_one_hot_spot_with_its_mask_by_keyword():
    analysis = analyse(ATTENTION, top=2)
    first = analysis["chosen"][0]
    assert first["path"] == "attention" and first["class"] == "Attention", first
    assert first["self_us"] > 0 and first["share"] > first["self_share"]
    names = [operator["name"] for operator in first["operators"]]
    assert "aten::softmax" in names and "aten::matmul" in names, names
    assert first["tensor_keywords"] == ["mask"], first
    assert "self.module(x0, mask=x1)" in first["source"], first["source"]
    assert first["inputs"] == "2x128x64 float32, 128x128 bool"
    # its projections sit inside it: not chosen again
    assert not any(s["path"].startswith("attention.") for s in analysis["chosen"])
    assert first["check"]["exact"] and reproduces(chosen(analysis, "attention"))


@test
def only_picks_by_path_or_class():
    by_class = analyse(ATTENTION, top=5, only="LayerNorm")
    assert sorted(s["path"] for s in by_class["chosen"]) == ["norm1", "norm2"]
    both = analyse(ATTENTION, top=5, only="GELU,norm2")
    assert sorted(s["path"] for s in both["chosen"]) == ["mlp.1", "norm2"]
    by_path = analyse(ATTENTION, top=5, only="mlp.*")
    assert {s["path"] for s in by_path["chosen"]} <= {"mlp.0", "mlp.1", "mlp.2"}
    assert len(by_path["chosen"]) == 3
    try:
        analyse(ATTENTION, only="nothing*")
    except problem.ProblemError as error:
        assert "--only 'nothing*'" in str(error), error
    else:
        raise AssertionError("a pattern that matches nothing was accepted")


@test
def choose_skips_nested_and_idle_modules():
    spots = [{"path": p, "class": "X", "self_us": t} for p, t in
             [("a", 5.0), ("a.b", 4.0), ("c", 3.0), ("d", 0.0), ("e", 1.0)]]
    assert [s["path"] for s in model.choose(spots, 3, None)] == ["a", "c", "e"]
    assert [s["path"] for s in model.choose(spots, 1, "a.*")] == ["a.b"]


@test
def arguments_that_are_no_tensors_nor_constants_are_refused():
    path = write("list_argument.py", """
import torch


class Join(torch.nn.Module):
    def forward(self, pieces):
        return torch.cat(pieces, dim=1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.join = Join()
        self.scale = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.scale(self.join([x, x * 2]))


def get_inputs():
    return [torch.randn(4, 4)]
""")
    analysis = analyse(path, top=2)
    join = next(s for s in analysis["chosen"] if s["path"] == "join")
    assert not join["check"]["exact"]
    assert "cannot be extracted" in join["check"]["reason"], join["check"]
    assert "source" not in join
    scale = next(s for s in analysis["chosen"] if s["path"] == "scale")
    assert scale["check"]["exact"], scale["check"]
    assert analysis["covered_share"] == scale["share"]


@test
def constants_are_written_into_the_call():
    inputs, arguments, keywords = model.call_signature(
        {"args": (torch.zeros(2), 3, (1, 2), None), "kwargs": {"dim": -1, "eps": 1e-5,
                                                               "dtype": torch.float16}})
    assert [name for name, _ in inputs] == ["x0"] and keywords == []
    assert arguments == "x0, 3, (1, 2), None, dim=-1, eps=1e-05, dtype=torch.float16"


@test
def a_model_without_submodules_or_with_a_failing_forward_is_refused():
    flat = write("flat.py", """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4)]
""")
    broken = write("broken.py", """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(3, 5)]
""")
    for path, expected in ((flat, "no submodules"), (broken, "the model's forward failed")):
        try:
            analyse(path)
        except problem.ProblemError as error:
            assert expected in str(error), error
        else:
            raise AssertionError(f"{path} was accepted")


if __name__ == "__main__":
    sys.exit(tap.run())
