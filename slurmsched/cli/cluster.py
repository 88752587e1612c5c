"""Commands that show the cluster through the gateway (filled in by the gateway work)."""

COMMANDS: list = []
