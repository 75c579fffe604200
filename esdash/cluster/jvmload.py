"""What a node's JVMs spend their CPU on: JIT compiling, collecting garbage, or working.

A node's rank reads it every few seconds and keeps it in the node's status
(:class:`esdash.rundir.records.JvmCpu`).  The global warm-up judges by it whether the nodes
are still compiling (:mod:`esdash.stats.convergence`); it needs no request to the engine,
so it costs the node nothing, and it works on every host of an allocation because each
rank reads its own node.  psutil gives the processes and each thread's CPU time; the
thread's name, which psutil does not give, comes from ``/proc/<pid>/task/<tid>/comm``.
HotSpot names its threads (15 characters): ``C1 CompilerThre``/``C2 CompilerThre``
compile, ``GC Thread#N``, ``G1 ...`` and ``VM Thread`` collect and pause.
"""

from __future__ import annotations

import time

import psutil

from esdash.rundir.records import JvmCpu

#: Thread name prefixes by kind.
_COMPILER = ("C1 CompilerThre", "C2 CompilerThre")
_GC = ("GC Thread", "G1 ", "VM Thread")


def _thread_name(pid: int, tid: int) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:  # the thread ended meanwhile
        return ""


def jvm_cpu(root: int) -> JvmCpu | None:
    """CPU seconds so far of every thread of ``root`` (a node's guard) and the processes
    below it, by kind; None when ``root`` is gone."""
    try:
        top = psutil.Process(root)
        processes = [top, *top.children(recursive=True)]
    except psutil.Error:
        return None
    compiler = gc = other = 0.0
    for process in processes:
        try:
            threads = process.threads()
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue
        for thread in threads:
            seconds = thread.user_time + thread.system_time
            name = _thread_name(process.pid, thread.id)
            if name.startswith(_COMPILER):
                compiler += seconds
            elif name.startswith(_GC):
                gc += seconds
            else:
                other += seconds
    return JvmCpu(
        time=time.time(), compiler=round(compiler, 2), gc=round(gc, 2), other=round(other, 2)
    )
