"""SEEM memory as a Dagster pipeline. The public API is `Memory` (``from seem_dagster import Memory``).

The names below load on first use, so ``import seem_dagster`` (and the CLI's start) stays light.
"""

__all__ = ["Added", "BuildFailed", "Forgotten", "Hit", "InvalidRequest", "Memory", "Recall", "Turn", "UnknownConversation", "WriterBusy"]


def __getattr__(name: str):
    if name in __all__:
        from seem_dagster import memory

        return getattr(memory, name)
    raise AttributeError(f"module 'seem_dagster' has no attribute {name!r}")
