"""Readers for public job traces: each row becomes a :class:`~slurmsched.model.JobRecord`.

One entry point, :func:`iter_trace` ``(path, fmt)``, yields a ``JobRecord`` for every
readable job and a :class:`BadLine` ``(lineno, reason)`` for every row it cannot read
(``lineno`` is the 1-based physical line in the file, headers and comments included;
a CSV record whose quoted field holds line breaks counts from its first line), so an
importer can load the rest and name the bad lines (:func:`line_numbers` lists them
briefly). :func:`iter_numbered` yields the same items with the line each begins on. A
file that cannot be read at all (missing, unknown format, missing columns), or not to
the end (a corrupt or truncated gzip or tar), raises
:class:`~slurmsched.errors.TraceFormatError`. Records come in file order (not all
traces are sorted by submit time); plain or gzip-compressed files are both accepted.

How each format maps onto ``JobRecord`` (fields not listed keep their defaults):

``swf`` (Standard Workload Format, Parallel Workloads Archive)
    job_id = field 1; submit_time = ``UnixStartTime`` header + field 2 (fixed
    :data:`TRACE_EPOCH` when the header lacks it); start = submit + wait (field 3);
    end = start + run time (field 4); ``time_limit_s`` = requested time (field 9);
    ``user`` = user id (field 12); ``account`` = group id (field 13); ``name`` =
    executable id (field 14, the job-name proxy); ``partition`` = queue (field 15),
    named from the header's ``Queue:`` lines when present, else the SWF partition
    number (field 16) when the queue is missing;
    ``state`` from status (field 11: 1 COMPLETED, 0/4 FAILED, 5 CANCELLED).
    ``-1`` means missing: a missing run time leaves start/end unset, a missing wait
    counts as zero, a missing request leaves ``time_limit_s`` None.
    **Processors:** ``cpus`` = allocated processors (field 5, or requested, field 8,
    when 5 is missing; 0 when neither gives any: a job without processors, which
    the simulator leaves out as ``no_processors`` and ``history import`` skips, not
    an unreadable line) and ``gpus`` = 0: SWF machines have no GPUs. ``nodes`` =
    processors divided by the header's processors per node (MaxProcs / MaxNodes),
    rounded up. ``memory_mb`` = requested memory (field 10, kilobytes per processor)
    times ``cpus``, in MB (None when missing; an unreadable line when it reaches 2**63, which
    no 64-bit SQL integer stores). Whoever needs one "allocation unit"
    per job (the simulator's cluster size, QSSF's service = duration x units) should
    use ``gpus`` when it is > 0 and ``cpus`` otherwise; :func:`read_swf_header` gives the machine size (MaxProcs,
    MaxNodes) to simulate against.

``helios`` (the Helios "Venus" CSV slice, ``#`` comment lines)
    job_id, user; ``partition`` = ``tenant`` (virtual cluster); ``gpus`` =
    ``num_chips``; ``nodes`` = ``num_nodes``; ``gpu_type`` = ``chip_type`` when set;
    submit = :data:`HELIOS_EPOCH` + ``submit_time`` (microseconds); runs for
    ``duration_s``. No job name. ``walltime_limit_s`` is a copy of the true duration,
    not a request, so it is **ignored**: ``time_limit_s`` is None.

``philly`` (``philly-pollux.csv``: timestamp, duration, num_gpus, gpu_time, cluster)
    job_id = data row number (1-based); ``user`` = "" (the trace has none);
    ``cluster`` = "philly"; ``partition`` = the Philly virtual cluster; submit =
    ``timestamp`` read as UTC.

``itp`` (Microsoft ITP clusters, ``itp-elasticflow-traces.tar.gz``)
    ``path`` may be the tar (every ``*.csv`` member, in name order), ``TAR:MEMBER``
    (one member, e.g. ``itp.tar.gz:cluster04.csv``; see :func:`list_members`), or an
    extracted CSV. ``cluster`` = the member's stem (``cluster04``); job_id = data row
    number within its member (the trace's ids are UUIDs); ``user`` = ""; submit =
    :data:`TRACE_EPOCH` + ``submission_time`` (s); ``gpus`` = ``num_gpu``. Bad-line
    reasons name the member, and line numbers count within it.

``eagle`` (the NREL Eagle Slurm accounting export)
    user, account, partition, qos, name as given; ``time_limit_s`` =
    ``wallclock_req``; nodes/cpus/gpus from ``*_req``; ``memory_mb`` = ``mem_req``
    when > 0; submit/start/end timestamps read as UTC; ``state`` parsed as Slurm text.

Traces without a start time (helios, philly, itp) do not record waits: ``start_time``
is set to ``submit_time`` and ``end_time`` to submit + duration, so ``runtime_s`` is the
true duration and ``wait_s`` is 0.
"""

from slurmsched.traces.base import HELIOS_EPOCH, TRACE_EPOCH, BadLine, Numbered, TraceItem, line_numbers, reading
from slurmsched.traces.reader import FORMATS, iter_numbered, iter_trace, list_members
from slurmsched.traces.swf import SwfHeader, read_swf_header

__all__ = [
    "FORMATS", "HELIOS_EPOCH", "TRACE_EPOCH", "BadLine", "Numbered", "SwfHeader", "TraceItem",
    "iter_numbered", "iter_trace", "line_numbers", "list_members", "read_swf_header", "reading",
]
