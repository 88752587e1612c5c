"""The gateway: the only code that talks to Slurm (or to a simulated Slurm)."""

from slurmsched.gateway.protocol import SlurmGateway

__all__ = ["SlurmGateway"]
