"""The code location `dagster dev`, `dg dev` and `dagster definitions validate` load: it only assembles.

Settings come from the environment (``SEEM_*``) and an optional file named by ``SEEM_CONFIG``;
each run can override any of them in the ``seem`` resource's run config.
"""

from seem_dagster.defs.assemble import build_defs

defs = build_defs()
