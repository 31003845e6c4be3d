"""Scenarios driven by other AMQP 1.0 stacks than proton (filled in below)."""
OTHER_SCENARIOS: list = []
