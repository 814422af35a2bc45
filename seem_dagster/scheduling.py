"""How a build shares the machine's cores: every such decision, in one place.

A build of the embedded default has two kinds of work: MiniLM's forward passes (torch, two threads)
and spaCy's parse (one thread per process). Three things let them fill two cores:

- **parse workers** (``extraction.parse_processes``): a batch of turns big enough is parsed by
  forked workers, one per core (``parse_processes``, ``chunk_size``);
- **the extraction prefetch** (``extraction.prefetch``): while one conversation's run embeds, fuses
  and writes, a helper process extracts the next conversation's turns into its cache
  (``pipeline.prefetch``; ``should_prefetch`` says when it can pay);
- **the helper's priority**: lowest niceness (``HELPER_NICE``), never the scheduler's idle class.

What the build may never do is wait on something another process can starve. A process in the idle
class gets no core at all while any other process wants one: a build whose main thread waited for
its helper (sending it the next conversation's turns, or for its last chunk) made no progress for
nine minutes beside a compiler. At niceness 19 the helper still gets a share; and the build bounds
every wait on it (``HELPER_REPLY_S``): past that, the helper is killed and the run extracts the
turns itself, which is all the helper would have spared. Nothing else signals processes: leaf code
(the embedder, the extractor) knows nothing of the helper.

Measured on a quiet 2-core machine (docs/experiments.md, 2026-12-05): the prefetch spares 6-10% of a
seven-conversation LoCoMo build; the helper's pausing while MiniLM encoded (SIGSTOP, before) within
the run-to-run noise; parse workers are the extraction's second core.
"""

from __future__ import annotations

import multiprocessing
import os

HELPER_NICE = 19  # the prefetch helper's niceness: a small share of a core under load, never none
HELPER_REPLY_S = 5.0  # the longest the build waits for the helper (its last chunk, its start-up); then it is killed


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


def should_prefetch(settings, conversations: int) -> bool:
    """Whether a build of ``conversations`` with ``settings`` (SeemConfig) runs the extraction prefetch:
    it is on, there is a next conversation to extract, the embedded extractor extracts (a model's
    replies have their own cache and batches), the store is local (the helper writes the cache
    beside the run), and the machine has a core for it (two parse processes could run)."""
    return bool(settings.extraction.prefetch and conversations >= 2 and not settings.llm.enabled
                and settings.extraction.extractor == "embedded" and "://" not in str(settings.store.root)
                and parse_processes(settings.extraction.parse_processes, 2, 1) >= 2)
