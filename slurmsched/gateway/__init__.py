"""The gateway: the only code that talks to Slurm (or to a simulated Slurm).

``make_gateway(config)`` returns the configured backend; :class:`CliGateway` is the
default (JSON CLI), ``slurmsched.gateway.pyslurm_backend.PyslurmGateway`` the optional
in-process one.
"""

from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.gateway.factory import make_gateway
from slurmsched.gateway.protocol import SlurmGateway

__all__ = ["CliGateway", "SlurmGateway", "make_gateway"]
