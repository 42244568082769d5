"""kagent's in-sandbox runner: the Python side of `kagent eval`.

worker.py   the warm process (torch imported, CUDA untouched): keeps a judge per problem, forks
            a candidate child per evaluation
prepared.py the candidate process a worker makes during the evaluation before the one it serves
handover.py the processes the worker keeps between evaluations, and the messages it hands them
bytecode.py torch's bytecode for installations without any, before the worker imports torch
judge.py    the trusted child: reference, inputs, comparison, timing
candidate.py the sandboxed child: loads ModelNew and runs it when the judge asks
channel.py  framed messages between judge and candidate
tensors.py  sharing tensors with the candidate (raw CUDA IPC handles, or mapped files on the CPU)
compare.py  output flattening and error metrics
processes.py what /proc says about processes (threads, groups, children, a uid's processes)
problem.py  loading problem and candidate sources, building inputs from seeds
cuda.py     candidates' CUDA kernels through NVRTC and the driver (libkagent-cuda.so)
"""
PROTOCOL_VERSION = 1
