"""The extraction prefetch process (``pipeline.prefetch``): ``python -m seem_dagster.pipeline.prefetch_worker
FD ROOT MODEL``, FD a socket to the build. It runs at the lowest niceness (``scheduling.HELPER_NICE``),
set before anything heavy is imported, so even its start-up yields to the build."""

import os
import sys


def main(argv: list[str]) -> None:
    # Not the idle class: a process there gets no core while any other wants one, and the build waits
    # on this one at times (scheduling's note).
    from seem_dagster.scheduling import HELPER_NICE

    os.nice(HELPER_NICE - os.nice(0))
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
