"""Merge-on-read tables whose merge the daemon does not serve are refused by ``hudi-clusterd cluster`` (run in this
process through ``hudi_clusterd.cli.main``) in one line naming ``hoodie.properties`` and the key, listing the
supported values where there is a list, before anything is written: every file of the table, ``.hoodie`` included,
is as it was. On copies of golden tables Apache Hudi wrote (version 6 with a payload class, version 9 with a merge
mode), one table property changed each."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.exit_codes import EXIT_TABLE

V6 = "v6_simplekeygen_nonhivestyle_overwritetable"
V9 = "v9_txns_simple_nometa"
PAYLOADS = ", ".join(f"org.apache.hudi.common.model.{c}" for c in (
    "OverwriteWithLatestAvroPayload", "DefaultHoodieRecordPayload", "EventTimeAvroPayload"))

# (table, property set, the refusal after "<base>/.hoodie/hoodie.properties: ")
CASES = {
    "v6 custom payload": (V6, "hoodie.compaction.payload.class=com.example.MyPayload",
                          "hoodie.compaction.payload.class=com.example.MyPayload is not merged "
                          f"(supported: {PAYLOADS})"),
    "v9 custom merge mode": (V9, "hoodie.record.merge.mode=CUSTOM",
                             "hoodie.record.merge.mode=CUSTOM is not merged (supported: COMMIT_TIME_ORDERING, "
                             "EVENT_TIME_ORDERING)"),
    "cdc": (V9, "hoodie.table.cdc.enabled=true",
            "hoodie.table.cdc.enabled=true: merge-on-read tables with change data capture are not served (their "
            "log files carry CDC blocks)"),
    "partial updates": (V9, "hoodie.table.partial.update.mode=FILL_UNAVAILABLE",
                        "hoodie.table.partial.update.mode=FILL_UNAVAILABLE: partial updates are not merged "
                        "(supported: NONE)"),
}


def _tree(base: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(base).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in base.rglob("*") if p.is_file()}


def _set_property(base: Path, line: str) -> None:
    props = base / ".hoodie" / "hoodie.properties"
    key = line.split("=", 1)[0]
    kept = [ln for ln in props.read_text().splitlines() if not ln.startswith(key + "=")]
    props.write_text("\n".join([*kept, line]) + "\n")


@pytest.mark.parametrize("case", list(CASES))
def test_an_unserved_merge_is_refused_naming_the_key_and_nothing_is_written(
        golden_mor_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    name, line, refusal = CASES[case]
    base = tmp_path / name
    shutil.copytree(golden_mor_tables / name, base)
    _set_property(base, line)
    before = _tree(base)
    code = main(["cluster", "--base-path", str(base), "--force"])
    err = capsys.readouterr().err.strip()
    print(err)
    assert code == EXIT_TABLE, err
    assert re.fullmatch(re.escape(f"error: {base}/.hoodie/hoodie.properties: {refusal}"), err), err
    assert _tree(base) == before
