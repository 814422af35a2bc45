import warnings

from dagster import AssetSelection, define_asset_job

# build_memory runs one conversation per run on purpose; only extract_frames backfills a range in
# one run (BackfillPolicy.single_run, one model batch). Dagster warns about the mix on every load.
warnings.filterwarnings("ignore", message="Asset job build_memory materializes assets with varying BackfillPolicies")

QUERY_ASSETS = AssetSelection.assets("retrieved_context")
# Both jobs end with `memory`, which publishes what the run wrote as one whole memory.
PUBLISH = AssetSelection.assets("memory")

build_memory = define_asset_job(
    "build_memory",
    selection=AssetSelection.all() - QUERY_ASSETS,
    description="Build (or rebuild) one conversation's memory: every layer of the partition, published as a whole "
    "by its last step (memory).",
)

query_memory = define_asset_job(
    "query_memory",
    selection=QUERY_ASSETS | PUBLISH,
    description="Run the conversation's stored questions through retrieval over the published memory, and publish "
    "the results beside it.",
)
