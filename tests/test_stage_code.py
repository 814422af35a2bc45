"""A stage's code version cannot be forgotten: when the code below a stage changes (its syntax, not
its comments or docstrings) and its number in pipeline/stages.py does not, this test fails until the
change is recorded, either as a new version (what the stage writes changed: stored memories rebuild)
or, said outright, as the same output (a refactor):

    .venv/bin/python tests/test_stage_code.py --record            # after bumping CODE_VERSIONS
    .venv/bin/python tests/test_stage_code.py --record --same-output   # the code changed, what it writes did not
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RECORD = Path(__file__).with_name("stage_code.json")


def current() -> dict:
    from seem_dagster.pipeline.stages import CODE_VERSIONS, code_digest

    return {stage: {"code": version, "digest": code_digest(stage)} for stage, version in CODE_VERSIONS.items()}


def test_every_stage_whose_code_changed_has_a_new_version_or_a_recorded_same_output():
    recorded, now = json.loads(RECORD.read_text()), current()
    assert set(recorded) == set(now), "a stage was added or removed: record again (see this file's docstring)"
    stale = [s for s in now if now[s]["digest"] != recorded[s]["digest"] and now[s]["code"] == recorded[s]["code"]]
    assert not stale, (f"the code of {', '.join(stale)} changed and CODE_VERSIONS did not: if what it writes changed, bump its "
                       "version in seem_dagster/pipeline/stages.py; then record (tests/test_stage_code.py --record [--same-output])")
    bumped = [s for s in now if now[s]["code"] != recorded[s]["code"]]
    assert not bumped or all(now[s]["digest"] != recorded[s]["digest"] or now[s]["code"] > recorded[s]["code"] for s in bumped)


def main(argv: list[str]) -> int:
    if "--record" not in argv:
        print(__doc__)
        return 2
    recorded = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    now = current()
    unbumped = [s for s in now if s in recorded and now[s]["digest"] != recorded[s]["digest"] and now[s]["code"] == recorded[s]["code"]]
    if unbumped and "--same-output" not in argv:
        print(f"the code of {', '.join(unbumped)} changed and its version did not: bump it, or say --same-output", file=sys.stderr)
        return 1
    RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(now)} stages" + (f" ({', '.join(unbumped)} with the same output)" if unbumped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
