"""The extraction prefetch process (``pipeline.prefetch``): ``python -m seem_dagster.pipeline.prefetch_worker
FD ROOT MODEL``, FD a socket to the build. It runs only on a core the build leaves idle (the scheduler's idle class), set before anything heavy is imported, so
even its start-up takes only a core the build leaves idle."""

import os
import sys


def main(argv: list[str]) -> None:
    # SCHED_IDLE: any thread of the build that wakes up (MiniLM's, after each of its parallel sections)
    # takes the core at once; the lowest nice value only weighs the shares.
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
    from multiprocessing.connection import Connection

    from seem_dagster.pipeline.prefetch import serve

    fd, root, model = argv
    serve(root, model, Connection(int(fd)))
    # Everything it extracted is saved when serve returns. The interpreter's own teardown (spaCy's
    # pipeline, polars, the imported modules) took 0.7-0.8 s, which the build waits for at its end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
