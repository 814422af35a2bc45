"""The property memory (APEX-MEM): entity -> property -> typed value, grounded in time, append-only.

Pure: ``vocabulary`` names properties and says which hold one value at a time, ``derive`` turns
facts (or a model's stated properties) into rows and links each single-valued history, ``as_of``
answers "what held on date X" and renders a history for an answering model.
"""
