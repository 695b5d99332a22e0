"""Code that moves over several Python stack samples (analysis/progress/stacks.py): a thread
walking model layers computes; a spin on one line, a spin loop around a body of several lines
and a loop that calls one helper do not."""
from __future__ import annotations

from tracer.analysis.progress.stacks import code_moves
from tracer.events.stacks import StackSamples

CAPTURE = "capture_one_batch_size (cuda_graph_runner.py:{})"


def _e(*samples):
    return StackSamples(ts=1.0, pid=1, tid=2, samples=[list(s) for s in samples], span=0.6)


def test_a_capture_walking_layers_moves():
    e = _e(["forward (llama.py:301)", "decoder_layer (llama.py:250)", CAPTURE.format(12)],
           ["rotary (rope.py:88)", "attention (llama.py:190)", CAPTURE.format(12)],
           ["silu_and_mul (activation.py:40)", "mlp (llama.py:120)", CAPTURE.format(12)],
           ["rms_norm (layernorm.py:61)", "decoder_layer (llama.py:248)", CAPTURE.format(12)],
           ["forward (llama.py:305)", "decoder_layer (llama.py:250)", CAPTURE.format(12)])
    text = code_moves(e)
    assert text is not None and "5 different stacks in 5 samples over 0.6 s" in text
    assert "rotary (rope.py:88)" in text


# py-spy samples (innermost 4 frames) of a runner capturing CUDA graphs of an MLP batch size
# after batch size, on the H200 (torch 2.11, proc backend; graph.__enter__'s empty_cache and
# gc take most of its time): 3 different stacks in 6 samples
H200_CAPTURE = [
    ["Linear.forward (torch/nn/modules/linear.py:134)",
     "Module._call_impl (torch/nn/modules/module.py:1790)",
     "Module._wrapped_call_impl (torch/nn/modules/module.py:1779)",
     "Sequential.forward (torch/nn/modules/container.py:253)"],
    ["CUDAGraph.capture_begin (torch/cuda/graphs.py:115)", "graph.__enter__ (torch/cuda/graphs.py:257)",
     "Rank.run_capture (gpu_tree.py:320)", "Rank._runner (gpu_tree.py:259)"],
    ["empty_cache (torch/cuda/memory.py:224)", "graph.__enter__ (torch/cuda/graphs.py:249)",
     "Rank.run_capture (gpu_tree.py:320)", "Rank._runner (gpu_tree.py:259)"],
]


def test_a_capture_of_cuda_graphs_on_the_h200_moves():
    e = _e(*[H200_CAPTURE[i] for i in (0, 1, 2, 2, 0, 0)])
    text = code_moves(e)
    assert text is not None and "3 different stacks in 6 samples" in text


def test_spins_do_not_move():
    one_line = ["wait_flag (runner.py:40)", "run (runner.py:90)"]
    assert code_moves(_e(*[one_line] * 5)) is None
    body = [[f"poll_ready (runner.py:{n})", "run (runner.py:90)"] for n in (40, 41, 42, 43, 40)]
    assert code_moves(_e(*body)) is None                 # one function, several lines
    helper = [["is_set (threading.py:601)", "wait_flag (runner.py:40)"],
              ["wait_flag (runner.py:40)"], ["wait_flag (runner.py:41)"],
              ["is_set (threading.py:601)", "wait_flag (runner.py:41)"]]
    assert code_moves(_e(*helper)) is None               # two chains of functions
    assert code_moves(_e(["a (x.py:1)"], ["b (x.py:2)"], ["c (x.py:3)"])) is None  # too few
    nested = [["g (x.py:30)", "f (x.py:20)", "loop (x.py:10)"], ["f (x.py:21)", "loop (x.py:10)"],
              ["loop (x.py:11)"], ["g (x.py:31)", "f (x.py:20)", "loop (x.py:10)"]]
    assert code_moves(_e(*nested)) is None               # a helper that calls a helper
    assert code_moves(None) is None
