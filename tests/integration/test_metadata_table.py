"""A table with a metadata table is never clustered (F1): its readers and writers list files through it and would
never see the files a clustering writes. Every command that would write refuses it with one line, writing
nothing, the daemon included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hudi_clusterd.cli import main
from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_TABLE

pytestmark = pytest.mark.spark

TABLE = "v6_simplekeygen_nonhivestyle"


def with_metadata_table(base: Path) -> Path:
    """What Hudi leaves on a table written with its default ``hoodie.metadata.enable=true``."""
    props = base / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text(encoding="iso-8859-1") + "hoodie.table.metadata.partitions=files\n",
                     encoding="iso-8859-1")
    (base / ".hoodie" / "metadata" / ".hoodie").mkdir(parents=True)
    return base


def everything(base: Path) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in base.rglob("*"))


@pytest.mark.parametrize("argv", [
    ["schedule", "--force"], ["schedule", "--force", "--dry-run"], ["execute"], ["cluster", "--force"],
    ["run", "--once", "--metrics-address", "127.0.0.1:0"],
], ids=lambda a: " ".join(a))
def test_commands_refuse_a_table_with_a_metadata_table_writing_nothing(
        golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    base = with_metadata_table(golden_copy(TABLE))
    before = everything(base)
    code = main([*argv, "--base-path", str(base)])
    err = capsys.readouterr().err
    # the daemon logs the table's failed tick and exits 1 (its other tables would still be served)
    assert code == (EXIT_FAILURE if argv[0] == "run" else EXIT_TABLE), err
    assert "hoodie.table.metadata.partitions=files" in err and "metadata table" in err, err
    if argv[0] != "run":
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert everything(base) == before
