"""Writers: the tables to files (:mod:`.tables`: csv, jsonl and parquet streamed in batches, or
the text table)."""
