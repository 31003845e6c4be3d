"""Spark batch jobs over capture archives (see issue: Spark batch analysis).

The jobs run the same sans-IO core as the CLI (``dissector``) inside Spark
executors; this package holds only the thin Spark shell around it.
"""
