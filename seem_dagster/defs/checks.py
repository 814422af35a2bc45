"""Asset checks: table schemas (blocking: nothing downstream runs on a bad table) and pointer integrity."""


import pandera.errors
import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, asset_check

from seem_dagster.defs.metadata import markdown_table
from seem_dagster.schemas import Passages, Questions


def schema_result(model, frame: pl.DataFrame) -> AssetCheckResult:
    try:
        model.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as err:
        cases = pl.from_pandas(err.failure_cases) if hasattr(err.failure_cases, "to_dict") else err.failure_cases
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "failures": MetadataValue.int(cases.height),
                "failure_cases": MetadataValue.md(markdown_table(cases.cast(pl.String, strict=False), rows=20)),
            },
        )
    return AssetCheckResult(passed=True, metadata={"rows": MetadataValue.int(frame.height)})


@asset_check(asset="passages", blocking=True, description="passages match the Passages schema (pandera)")
def passages_schema(passages: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Passages, passages)


@asset_check(asset="questions", blocking=True, description="questions match the Questions schema (pandera)")
def questions_schema(questions: pl.DataFrame) -> AssetCheckResult:
    return schema_result(Questions, questions)


CHECKS = [passages_schema, questions_schema]
