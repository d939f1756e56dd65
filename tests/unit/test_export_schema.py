"""iowhy.export.schema: the one definition of the Parquet tables. Its invariants (the
conventions the page states) and its accessors; that the committed page is what it
writes is test_export_parquet_parity.py."""

from __future__ import annotations

import contextlib
import io

import pytest

from iowhy.categories import ATTRIBUTION_CATEGORIES
from iowhy.export import schema


def test_every_table_starts_with_run_uuid_and_has_unique_columns():
    for t in schema.TABLE_NAMES:
        names = schema.column_names(t)
        assert names[0] == "run_uuid", t
        assert len(set(names)) == len(names), t
        assert [n for n, _ in schema.column_types(t)] == names


def test_column_types_are_known_words():
    for t in schema.TABLE_NAMES:
        assert {ty for _, ty in schema.column_types(t)} <= set(schema.TYPE_WORDS)


def test_units_are_in_the_names():
    # durations and points in time are integer ns: int64 (or uint64), never a string
    for t in schema.TABLE_NAMES:
        for n, ty in schema.column_types(t):
            if n.endswith(("_ns", "_bytes", "_sector", "_sectors")):
                assert ty in (schema.INT64, schema.UINT64), (t, n, ty)


def test_runs_has_a_column_per_attribution_category():
    """The runs table's category columns, as users' queries name them (a new category
    is a new column, and a new schema version: test_versions_...)."""
    runs = schema.column_names("runs")
    assert len(ATTRIBUTION_CATEGORIES) == 13
    assert [c for c in runs if c in schema.CATEGORY_COLUMNS] == [
        "cpu_ns", "runqueue_ns", "barrier_ns", "log_ns", "metadata_ns", "data_ns", "read_ns",
        "throttle_ns", "helper_cpu_ns", "helper_runqueue_ns", "sleep_ns", "external_ns",
        "wait_other_ns"]


def test_versions_are_consecutive_and_end_at_the_current():
    assert [v for v, _ in schema.CHANGES] == list(range(1, schema.SCHEMA_VERSION + 1))


def test_unknown_table_is_a_key_error():
    with pytest.raises(KeyError):
        schema.column_names("nope")


def test_arrow_schema_follows_column_types():
    pa = pytest.importorskip("pyarrow")
    words = {pa.string(): schema.STRING, pa.int64(): schema.INT64,
             pa.uint64(): schema.UINT64, pa.bool_(): schema.BOOL,
             pa.list_(pa.string()): schema.STRINGS}
    for t in schema.TABLE_NAMES:
        got = [(f.name, words[f.type]) for f in schema.arrow_schema(pa, t)]
        assert got == schema.column_types(t)


def test_page_has_every_table_and_the_version():
    doc = schema.schema_doc()
    assert doc.startswith(f"# iowhy Parquet schema (version {schema.SCHEMA_VERSION})\n")
    for t in schema.TABLE_NAMES:
        assert f"\n## {t}\n" in doc and f"| `{t}.parquet` |" in doc
    assert f"| {schema.SCHEMA_VERSION} | " in doc.split("## Versions", 1)[1]


def test_main_writes_the_page(tmp_path):
    out = tmp_path / "page.md"
    assert schema.main(["-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == schema.schema_doc()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert schema.main([]) == 0
    assert buf.getvalue() == schema.schema_doc()
