from dagster import AssetSelection, define_asset_job

QUERY_ASSETS = AssetSelection.assets("retrieved_context")

build_memory = define_asset_job(
    "build_memory",
    selection=AssetSelection.all() - QUERY_ASSETS,
    description="Build (or rebuild) one conversation's memory: every layer of the partition.",
)

query_memory = define_asset_job(
    "query_memory",
    selection=QUERY_ASSETS,
    description="Run the conversation's stored questions through retrieval, reading one consistent snapshot.",
)
