from dagster import AssetSelection, define_asset_job


# Every memory asset of one conversation (the query job, when it exists, is separate).
build_memory = define_asset_job(
    "build_memory",
    selection=AssetSelection.all(),
    description="Build (or rebuild) one conversation's memory: every asset of the partition.",
)
