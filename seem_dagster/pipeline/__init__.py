"""The pipeline steps the Dagster assets call: read caches, call the pure operations, write caches.

Between the assets (which read and write snapshots and report metadata) and the pure modules
(extraction, fusion, graph, retrieval), with the store's caches behind one adapter
(``store.cache.ConversationCache``). No Dagster here.
"""
