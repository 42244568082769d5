"""Writes `kagent export`'s dataset records as Parquet, for `kagent export --format parquet`.

Reads the records as JSON lines on stdin (agent/records/dataset.c writes them; docs/dataset.md
says what each field means) and writes the Parquet file named by its one argument (kagent
gives a temporary name and renames the file into place when this exits 0), in row groups of
ROWS_PER_GROUP as the records come, so a large export never sits in memory whole. The schema
below is explicit, so that every file has the same column types whatever its rows hold (a
column that is null in every row keeps its type), and Hugging Face `datasets` loads it
unchanged (`load_dataset("parquet", ...)`).

Run by path, not as part of the package: it needs only the standard library and pyarrow, not
torch. Exits 3 when pyarrow cannot be imported (the command line says what to install), 2 on
bad input (a line that is not a record of this schema), 1 when the file cannot be written, 0
when it is written.
"""

import json
import sys

EXIT_NO_PYARROW = 3
EXIT_BAD_INPUT = 2
SCHEMA_NAME = "kagent.dataset/1"
ROWS_PER_GROUP = 256


def schema(pa):
    """The record's columns, in the order dataset.c writes them."""
    call = pa.struct([("id", pa.string()), ("name", pa.string()), ("arguments", pa.string())])
    message = pa.struct([("role", pa.string()), ("content", pa.string()),
                         ("reasoning", pa.string()), ("tool_calls", pa.list_(call)),
                         ("tool_call_id", pa.string()), ("name", pa.string())])
    environment = pa.struct([(key, pa.string()) for key in (
        "device", "gpu", "compute_capability", "driver", "torch", "triton", "cuda_runtime",
        "python")])
    return pa.schema([
        ("schema", pa.string()), ("id", pa.string()), ("problem_id", pa.string()),
        ("problem_name", pa.string()), ("problem_source", pa.string()),
        ("run_id", pa.string()), ("variant", pa.string()), ("parent", pa.string()),
        ("turn", pa.int64()), ("source", pa.string()), ("backend", pa.string()),
        ("messages", pa.list_(message)), ("model", pa.string()), ("provider", pa.string()),
        ("status", pa.string()), ("reason", pa.string()),
        ("speedup_vs_eager", pa.float64()), ("speedup_vs_eager_ci95", pa.list_(pa.float64())),
        ("speedup_vs_compile", pa.float64()),
        ("speedup_vs_compile_ci95", pa.list_(pa.float64())),
        ("timing_basis", pa.string()), ("candidate_ms", pa.float64()),
        ("credited", pa.bool_()), ("environment", environment), ("verdict", pa.string()),
        ("kagent_version", pa.string()),
    ], metadata={"kagent.schema": SCHEMA_NAME})


def read_records(stream, names):
    """The records on stream, one at a time; raises ValueError naming the line of a bad one."""
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if not isinstance(record, dict) or record.get("schema") != SCHEMA_NAME:
            raise ValueError(f"line {number} is not a {SCHEMA_NAME} record")
        extra = set(record) - names
        if extra:
            raise ValueError(f"line {number} has fields the schema lacks: {sorted(extra)}")
        yield record


def write(pa, pq, stream, path):
    """Converts the records on stream into path, a row group at a time."""
    columns = schema(pa)
    rows = []
    with pq.ParquetWriter(path, columns) as writer:
        for record in read_records(stream, set(columns.names)):
            rows.append(record)
            if len(rows) == ROWS_PER_GROUP:
                writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=columns))
                rows = []
        if rows:
            writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=columns))


def main(argv):
    if len(argv) != 2:
        print("usage: export_parquet.py OUTPUT.parquet < records.jsonl", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        print(f"export_parquet.py: {error}", file=sys.stderr)
        return EXIT_NO_PYARROW
    try:
        write(pa, pq, sys.stdin, argv[1])
    except (ValueError, TypeError, pa.ArrowException) as error:
        print(f"export_parquet.py: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"export_parquet.py: cannot write {argv[1]}: {error}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv))
