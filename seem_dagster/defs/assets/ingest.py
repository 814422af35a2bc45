"""passages and questions: one conversation's turns, read from its registered input file."""


import polars as pl
from dagster import AssetExecutionContext, AssetOut, MetadataValue, Output, ResourceParam, multi_asset

from seem_dagster.config import SeemConfig
from seem_dagster.defs.checks import check_specs, run_checks
from seem_dagster.defs.metadata import table_metadata
from seem_dagster.defs.partitions import conversations
from seem_dagster.pipeline.ingest import read_registered
from seem_dagster.pipeline.stages import SOURCE_RECORD
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.builds import note_base

GROUP = "ingest"


@multi_asset(
    partitions_def=conversations,
    outs={
        "passages": AssetOut(
            description="One row per conversation turn: speaker, text, session date, source ref. "
            "Every later layer points back here.",
            group_name=GROUP,
            kinds={"parquet", "polars"},
            io_manager_key="snapshot_io_manager",
        ),
        "questions": AssetOut(
            description="Questions shipped with the input (benchmarks, the sample) with their gold turns, "
            "for queries and evaluation. Retrieval never reads the gold.",
            group_name=GROUP,
            kinds={"parquet", "polars"},
            io_manager_key="snapshot_io_manager",
        ),
    },
    check_specs=check_specs("passages", "questions"),
)
def ingest_conversation(context: AssetExecutionContext, seem: ResourceParam[SeemConfig]):
    conversation_id = context.partition_key
    note_base(seem.store.root, conversation_id, context.run.run_id)  # before reading: a publish meanwhile refuses this build's
    source, conv, forgotten = read_registered(seem.store.root, conversation_id)
    options = source.ingest
    if conv.fingerprint != source.fingerprint:
        context.log.info(f"{source.path} changed since it was registered; building from its current content")
    passages = conv.passages
    record = MetadataValue.json({**source.to_json(), "fingerprint": conv.fingerprint})
    yield Output(
        passages,
        output_name="passages",
        metadata={
            **table_metadata(passages, [Passages.source_ref, Passages.speaker, Passages.timestamp, Passages.text], text=[Passages.text]),
            "sessions": MetadataValue.int(passages[Passages.session_id].n_unique()),
            "speakers": MetadataValue.text(", ".join(sorted(passages[Passages.speaker].unique().to_list()))),
            "first_turn": MetadataValue.text(str(passages[Passages.timestamp].min())),
            "last_turn": MetadataValue.text(str(passages[Passages.timestamp].max())),
            "skipped_empty_turns": MetadataValue.int(len(conv.skipped)),
            "skipped_detail": MetadataValue.md("\n".join(f"- {s}" for s in conv.skipped) or "none"),
            "excluded_turns": MetadataValue.int(conv.excluded),
            # Turns of the input that a user had forgotten (Memory.forget, `seem forget`): their tombstones keep them out.
            "forgotten_turns_left_out": MetadataValue.int(forgotten),
            "kept_speakers": MetadataValue.text(", ".join(options.only_speakers) if options.only_speakers else "all"),
            "source": MetadataValue.path(source.path),
            "format": MetadataValue.text(source.format),
            SOURCE_RECORD: record,
        },
    )
    questions = conv.questions
    yield Output(
        questions,
        output_name="questions",
        metadata={
            **table_metadata(questions, [Questions.question_id, Questions.question, Questions.category]),
            "with_evidence": MetadataValue.int(questions.filter(pl.col(Questions.evidence).list.len() > 0).height),
            SOURCE_RECORD: record,
        },
    )
    yield from run_checks({"passages": passages, "questions": questions})
