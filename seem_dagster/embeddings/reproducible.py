"""MKL's strict reproducible mode for the CPU's matrix products (MiniLM's), set before MKL's first call.

Under MKL's default dispatch a row's result can depend on the other rows of its product (the kernel is
chosen by the matrix's shape): on a CPU with AVX-512 and AMX a text's vector then differed in its last
bits alone and in a batch, which padding every text to a multiple of 8 tokens had kept equal on other
CPUs, and fusion's near-ties follow the last bits, so an incremental build differed from a full one.
``AUTO,STRICT`` (MKL's conditional numerical reproducibility) keeps the CPU's own kernels and makes
each row its own; it measured as fast as the default (docs/experiments.md). The mode can only be set
before MKL's first call in the process: later, a setting other than it is reported, not hidden.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os

log = logging.getLogger(__name__)

AUTO, STRICT, SUCCESS, ALL = 2, 0x10000, 0, -1


@functools.cache
def strict_mkl() -> bool:
    """Put MKL in AUTO,STRICT mode; True when it is in it. The variable is set too, for child processes."""
    os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
    import torch

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        setter, getter = lib.mkl_serv_cbwr_set, lib.mkl_serv_cbwr_get
    except (OSError, AttributeError):
        log.info("this torch has no MKL: vectors are as its BLAS gives them")
        return False
    if setter(AUTO | STRICT) == SUCCESS or getter(ALL) == AUTO | STRICT:
        return True
    log.warning("MKL was used before the embedder loaded, so its strict reproducible mode could not be set: a text's "
                "vector may differ in its last bits alone and in a batch (set MKL_CBWR=AUTO,STRICT before starting)")
    return False
