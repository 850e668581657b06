"""The paper's tab-separated files (``--spread``, the pooling-bias reference): a row the reader cannot take whole is
an error naming the file and line, never a row dropped, shifted or counted twice."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate import load_spread

from ..conftest import SHARED_DATA

HEAD = "system\tmicro-p\tmicro-r\tother\n"
ROWS = "SF_B2\t0.5\t0.2\tx\nKB_A_1\t0.25\t0.1\tx\n"


def test_a_bom_and_crlf_read_as_the_plain_file(tmp_path):
    f = tmp_path / "s.tsv"
    f.write_bytes(b"\xef\xbb\xbf" + (HEAD + ROWS).replace("\n", "\r\n").encode())
    p, r, _, names = load_spread(f)
    assert names == ("KB_A_1", "SF_B2") and p.tolist() == [0.25, 0.5] and r.tolist() == [0.1, 0.2]


@pytest.mark.parametrize("text, line, what", [
    (HEAD + ROWS + "SF_B2\t0.4\t0.3\tx\n", 4, "system 'SF_B2' is also on line 2"),
    (HEAD + "\t0.4\t0.3\tx\n" + ROWS, 2, "empty system name"),
    (HEAD + "SF_C1\t0.4\t0.3\tx\t0.9\n" + ROWS, 2, "5 fields, the header 4"),
    (HEAD + ROWS + "SF_C1\t0.4\n", 4, "2 fields, the header 4"),
    (HEAD + ROWS + "\n\nSF_C1\t0.4\t0.3\n", 6, "3 fields, the header 4"),
    ("system\tmicro-p\tmicro-r\tmicro-p\n" + ROWS, 1, "column 'micro-p' twice in the header"),
])
def test_rows_it_cannot_take_whole_are_located_errors(tmp_path, text, line, what):
    f = tmp_path / "s.tsv"
    f.write_text(text)
    with pytest.raises(InvalidInputError, match=re.escape(what) + ".*" + re.escape(f"{f}:{line}")):
        load_spread(f)


def test_a_quote_is_part_of_a_name_not_the_start_of_a_field(tmp_path):
    f = tmp_path / "s.tsv"
    f.write_text(HEAD + '"SF_C1\t0.4\t0.3\tx\n' + ROWS)
    assert load_spread(f)[3] == ('"SF_C1', "KB_A_1", "SF_B2")


def test_the_papers_file_reads_whole():
    p, r, _, names = load_spread(SHARED_DATA / "paper" / "pooling_bias" / "pooling_bias_anydoc.tsv")
    assert len(names) == len(set(names)) == 70 and np.all((p >= 0) & (p <= 1) & (r >= 0) & (r <= 1))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z_0-9\"' ]{0,12}", fullmatch=True).map(str.strip)
                            .filter(lambda s: s and s != "LDC"),
                            st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=8),
       crlf=st.booleans(), bom=st.booleans(), blank=st.booleans(), cut=st.integers(0, 40))
def test_every_row_is_read_once_or_the_file_is_refused(tmp_path, rows, crlf, bom, blank, cut):
    """Whatever the line ends, a BOM, blank lines: the systems read are the rows written, each once; a file cut short
    keeps each whole line's row once, or the reader names the file."""
    end = "\r\n" if crlf else "\n"
    text = "system\tmicro-p\tmicro-r\n" + ("\n" if blank else "") + "".join(
        f"{n}\t{p!r}\t{r!r}{end}" for n, (p, r) in rows.items())
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    f = tmp_path / "s.tsv"
    f.write_bytes(data)
    p, r, _, names = load_spread(f)
    assert names == tuple(sorted(rows)) and [(x, y) for x, y in zip(p, r)] == [rows[n] for n in names]
    kept = data[: len(data) - cut]
    f.write_bytes(kept)
    try:
        p, r, _, names = load_spread(f)
    except InvalidInputError as exc:
        assert str(f) in str(exc)
        return
    whole = {n for n, (x, y) in rows.items() if f"\n{n}\t{x!r}\t{y!r}{end}".encode() in kept}
    # each row at most once, every whole line's row read (a cut inside the last number reads a shorter one)
    assert len(set(names)) == len(names) and whole <= set(names) <= set(rows)
