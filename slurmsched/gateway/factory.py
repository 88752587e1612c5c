"""``make_gateway(config)``: the configured :class:`SlurmGateway` backend."""

from __future__ import annotations

import os
from typing import TypedDict

from slurmsched.config import Config
from slurmsched.errors import ConfigError
from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.gateway.pyslurm_backend import PyslurmGateway, import_pyslurm


class _GatewayKwargs(TypedDict):
    """What either backend's constructor takes from ``[slurm]``."""

    slurm_conf: str | None
    bin_dir: str | None
    timeout_s: float


def pyslurm_available() -> bool:
    """True when ``import pyslurm`` works (it can fail on a Slurm version mismatch)."""
    try:
        import_pyslurm()
    except ConfigError:
        return False
    return True


def make_gateway(config: Config) -> SlurmGateway:
    """Build the backend named by ``slurm.backend``.

    ``cli`` (default) is :class:`CliGateway`; ``pyslurm`` is
    :class:`~slurmsched.gateway.pyslurm_backend.PyslurmGateway`; ``auto`` picks pyslurm
    when it imports, else the CLI. ``slurm.conf``, ``slurm.bin_dir`` and
    ``slurm.timeout_s`` are passed to either.

    Raises:
        ConfigError: ``slurm.conf`` (or, when it is unset, the environment's
            ``SLURM_CONF``) names no file (checked here, when Slurm is first
            needed, so that offline commands such as ``simulate --trace`` run on a
            machine without it; Slurm's commands would retry a missing file for a
            minute), or ``pyslurm`` was asked for and cannot be imported.
    """
    slurm = config.slurm
    where, conf = (("slurm.conf", slurm.conf) if slurm.conf
                   else ("SLURM_CONF (environment)", os.environ.get("SLURM_CONF", "")))
    if conf and not os.path.isfile(conf):
        why = "is not a file" if os.path.exists(conf) else "does not exist"
        raise ConfigError(f"{where}: {conf} {why}")
    kwargs: _GatewayKwargs = {"slurm_conf": slurm.conf or None, "bin_dir": slurm.bin_dir or None,
                              "timeout_s": slurm.timeout_s}
    if slurm.backend == "pyslurm" or (slurm.backend == "auto" and pyslurm_available()):
        return PyslurmGateway(**kwargs)
    return CliGateway(**kwargs)
