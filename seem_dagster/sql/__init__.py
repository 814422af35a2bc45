"""SQL over the memory: DuckDB views of one consistent snapshot, read-only and bounded, safe to
hand to an agent (``guard`` decides what may run, ``memory`` loads and runs, ``output`` formats)."""
