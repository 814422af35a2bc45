"""Forgetting: which turns a request names, the tombstones that keep them out of every later build, and
the sweep that leaves no byte of them under the store. `Memory.forget` puts these together."""
