"""The exit codes of the tool's command lines, defined once: ``amqp-dissect`` (cli/common.py
re-exports them with their help text) and the spark-submit entry of the archive job
(:mod:`amqp_dissect.pipelines.spark.submit`), which the layer order keeps from importing cli/."""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_OPEN = 3
EXIT_FORMAT = 4
EXIT_DAMAGED = 5
EXIT_EXTRA = 6  # the command needs an optional part of the install (an extra) that is not installed


def input_error_exit(code: str) -> int:
    """The exit code of an archive input's failure (the ``code`` of
    :class:`~amqp_dissect.pipelines.archive.InputError`): a path that does not exist or a scheme
    without its connector cannot be opened; anything else is not a capture this tool reads."""
    return EXIT_OPEN if code in ("missing", "connector") else EXIT_FORMAT
