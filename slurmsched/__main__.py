"""``python -m slurmsched`` runs the CLI."""

from slurmsched.cli import main

main()
