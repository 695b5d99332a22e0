"""Ranks grouped by their main thread's Python stack (STAT-style), and the odd one out.
Frames are py-spy's, as the stack probe records them ("func (file:line)", innermost first)."""
from tracer.analysis.job.stack_groups import collective_frame, group_ranks, suspects

C10D = "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"
ALL_REDUCE = [f"all_reduce ({C10D}:2806)", "wrapper (/x/torch/distributed/c10d_logger.py:81)",
              "step (/srv/train.py:40)", "<module> (/srv/train.py:77)"]
WAITING = ["wait (/usr/lib/python3.12/threading.py:355)",
           "wait (/usr/lib/python3.12/threading.py:655)", "step (/srv/train.py:38)",
           "<module> (/srv/train.py:77)"]


def test_same_functions_are_one_group_whatever_the_lines():
    other_line = [f.replace(":2806", ":2810") for f in ALL_REDUCE]
    groups = group_ranks({10: ALL_REDUCE, 11: other_line, 12: WAITING})
    assert [g.pids for g in groups] == [[10, 11], [12]]
    assert groups[0].collective.startswith("all_reduce (") and groups[1].collective == ""


def test_the_rank_outside_the_collective_is_the_suspect_even_with_two_ranks():
    s = suspects(group_ranks({10: ALL_REDUCE, 11: WAITING}))
    assert list(s) == [11]
    assert "not in a collective (it is in wait (threading.py:355))" in s[11]
    assert "pid 10 waits in all_reduce; pid 11 differs" in s[11]


def test_odd_one_out_of_three_with_no_collective_frame():
    spin = ["synchronize (/x/torch/cuda/__init__.py:985)", "step (/srv/train.py:41)"]
    s = suspects(group_ranks({10: spin, 11: spin, 12: WAITING}))
    assert list(s) == [12] and "wait in synchronize (__init__.py:985) (same stack); pid 12 differs: it is in wait (threading.py:355)" in s[12]
    assert suspects(group_ranks({10: spin, 11: WAITING})) == {}     # two ranks: no majority


def test_collective_frames_of_serving_stacks():
    assert collective_frame(["tensor_model_parallel_all_reduce (/x/vllm/distributed/"
                             "communication_op.py:11)"])
    assert collective_frame(["all_reduce (/x/sglang/srt/distributed/device_communicators/"
                             "custom_all_reduce.py:300)"])
    assert not collective_frame(["all_reduce (/srv/my_math.py:3)"])    # not a distributed file
