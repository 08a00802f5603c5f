from __future__ import annotations

import pytest

from hudi_clusterd.engine.sizing import FILL, output_file_groups
from hudi_clusterd.errors import ExecutionError

MIB = 1 << 20


def test_output_file_groups_grow_with_the_codec_ratio() -> None:
    # 225 MiB of gzip that snappy writes 1.5 times larger, 8 MiB target: 338 MiB over files filled to 90 %
    assert output_file_groups(225 * MIB, 1.5, 8 * MIB) == 47
    assert output_file_groups(225 * MIB, 1.0, 8 * MIB) == 32


def test_output_file_groups_each_below_target() -> None:
    for ratio in (0.5, 1.0, 1.3, 2.7):
        n = output_file_groups(100 * MIB, ratio, 8 * MIB)
        assert 100 * MIB * ratio / n <= 8 * MIB * FILL
        assert n == 1 or 100 * MIB * ratio / (n - 1) > 8 * MIB * FILL  # and no more files than that needs


def test_output_file_groups_small_input_one_file() -> None:
    assert output_file_groups(10, 3.0, 8 * MIB) == 1
    assert output_file_groups(0, 1.0, 8 * MIB) == 1


def test_output_file_groups_bad_target_names_it() -> None:
    with pytest.raises(ExecutionError, match="target file size must be positive, got 0"):
        output_file_groups(MIB, 1.0, 0)
