"""The gateway: the only code that talks to Slurm (or to a simulated Slurm).

``make_gateway(config)`` returns the configured backend; :class:`CliGateway` is the
default (JSON CLI), ``slurmsched.gateway.pyslurm_backend.PyslurmGateway`` the optional
in-process one.

Job names: accounting (slurmdbd) stores a double quote in a job name as a backtick,
while ``squeue``, ``scontrol`` and pyslurm show the name as submitted. Every backend
gives live jobs their name as accounting has it
(:func:`~slurmsched.gateway.parse.accounting_name`: ``quote"s`` -> ``quote`s``), so one
job has one name across the queue, the history and the submit cache; ``job_submit.lua``
normalises ``job_desc.name`` the same way before its cache lookup.
"""

from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.gateway.factory import make_gateway
from slurmsched.gateway.protocol import SlurmGateway

__all__ = ["CliGateway", "SlurmGateway", "make_gateway"]
