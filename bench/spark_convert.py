"""The typed change log's conversion: rows stored as JSON -> typed Arrow columns, per row
(`pgtail.spark.json_rows.columns_reader` + ``pa.array``, what the change logs used before)
against vectorised (`arrow_columns_reader`, what they use now), alternating.

The rows are those of ``bench/spark.py``'s table (bigint, text, int, numeric(12,2),
timestamptz, text[], jsonb, boolean), written by ``pgtail.values.dumps`` as the source
writes them. No server, no Spark session: the conversion alone, in this process.

Usage: python bench/spark_convert.py [--rows 100000] [--repeat 5]
Prints each pair's seconds and the median of the per-row/vectorised ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def bench_rows(count: int) -> list[str]:
    import orjson

    from pgtail.values import dumps

    return [
        dumps(
            {
                "id": g,
                "name": f"customer {g}",
                "qty": g % 1000,
                "price": f"{g % 100000 / 100:.2f}",
                "at": f"2024-01-01T00:{g % 60:02d}:{g % 60:02d}.{g % 1000:03d}+00:00",
                "tags": [f"tag{g % 7}", "other tag", f"x{g % 13}"],
                "doc": orjson.Fragment(
                    orjson.dumps({"id": g, "kind": "order", "items": [g % 5, g % 3]})
                ),
                "flag": g % 2 == 0,
            }
        ).decode()
        for g in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from pgtail.catalog.spark import ColumnType
    from pgtail.spark import arrow_rows, json_rows, types

    columns = [
        ColumnType("id", 20, "bigint", -1, 0, 0),
        ColumnType("name", 25, "text", -1, 0, 0),
        ColumnType("qty", 23, "integer", -1, 0, 0),
        ColumnType("price", 1700, "numeric", (12 << 16 | 2) + 4, 0, 0),
        ColumnType("at", 1184, "timestamptz", -1, 0, 0),
        ColumnType("tags", 1009, "text[]", -1, 25, 1),
        ColumnType("doc", 3802, "jsonb", -1, 0, 0),
        ColumnType("flag", 16, "boolean", -1, 0, 0),
    ]
    targets = [to_arrow_type(types.spark_field(c)[0].dataType, timezone="UTC") for c in columns]
    texts = pa.array(bench_rows(args.rows), pa.string())

    def per_row() -> Any:
        values = json_rows.columns_reader(columns)(texts.to_pylist())
        return [pa.array(v, type=t) for v, t in zip(values, targets, strict=True)]

    def vectorised() -> Any:
        return arrow_rows.arrow_columns_reader(columns, targets)(texts)

    assert [a.to_pylist() for a in per_row()] == [a.to_pylist() for a in vectorised()]
    ratios = []
    for i in range(args.repeat):
        t0 = time.perf_counter()
        per_row()
        slow = time.perf_counter() - t0
        t0 = time.perf_counter()
        vectorised()
        fast = time.perf_counter() - t0
        ratios.append(slow / fast)
        print(f"run {i + 1}: per row {slow:.3f}s, vectorised {fast:.3f}s ({args.rows:,} rows)")
    print(f"median per-row/vectorised: {statistics.median(ratios):.1f}x")


if __name__ == "__main__":
    main()
