"""How a build shares the machine's cores: every such decision, in one place.

A build of the embedded default has two kinds of work: MiniLM's forward passes (torch, two threads)
and spaCy's parse (one thread per process). The parse of a batch of turns big enough is split over
forked workers, one per core (``extraction.parse_processes``; ``parse_processes``, ``chunk_size``):
on a quiet 2-core machine a seven-conversation LoCoMo build takes 12.0 s per 1,000 turns with them,
15.9 s without (docs/experiments.md, 2026-12-05).

The workers run at the build's own priority, and nothing the build waits on may run at one another
process can starve. What was tried and removed: a helper process that extracted the next
conversation while the current one embedded (3-5% of a build, for 300 lines and 0.5 GB, and when it
ran in the scheduler's idle class a build waiting on it stalled for nine minutes beside a compiler),
and pausing it with SIGSTOP while MiniLM encoded (within the noise). Leaf code (the embedder, the
extractor) signals no process.
"""

from __future__ import annotations

import multiprocessing
import os


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def parse_processes(wanted: int, texts: int, batch_size: int) -> int:
    """How many processes extract ``texts`` passages: the workers are forked, which a daemonic process
    (a Celery prefork worker) may not do; never more than the cores this process may use; none for
    less than one batch; and no more than there are batches, a part batch counting as one (a batch
    is one worker's task)."""
    if wanted <= 1 or multiprocessing.current_process().daemon or texts < batch_size:
        return 1
    return max(1, min(wanted, cores(), -(-texts // batch_size)))


def chunk_size(texts: int, processes: int, batch_size: int) -> int:
    """Passages per worker task: at most a batch, and as many tasks as a multiple of the processes, so
    the workers finish together (300 passages on two: six tasks of 50, not four of 64 and then one of
    44 that one worker runs alone)."""
    tasks = max(processes, -(-texts // batch_size))
    tasks = -(-tasks // processes) * processes
    return max(1, -(-texts // tasks))
