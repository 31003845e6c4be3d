"""Command-line shell of amqp-dissect (typer)."""
