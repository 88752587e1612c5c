"""Slurm's JSON (``squeue``/``sinfo``/``sacct --json``) -> domain dataclasses.

Handles both shapes Slurm has used:

* **21.08-23.02** (``openapi/v0.0.37``/``v0.0.38``, e.g. Debian 12's 22.05): numbers are
  plain, ``null`` or ``0`` when unset; ``job_state`` is a string; GRES look like
  ``gres:gpu:a100:2``; ``sinfo`` lists ``nodes``.
* **23.11+** (``data_parser/v0.0.40`` ...): numbers are ``{"set", "infinite", "number"}``
  objects, ``job_state`` is a list (base state plus flags), GRES look like
  ``gres/gpu:a100:2``; ``sinfo`` lists aggregated ``sinfo`` rows, which are expanded to
  one record per node.

Conventions: times are POSIX seconds as ``float`` (unset -> ``None``); time limits are
seconds (``None`` when unlimited); ``memory_mb`` is the job's total requested memory
(``None`` when it asked for none and the site sets no default: ``--mem=0`` or no
``DefMemPerCPU``/``DefMemPerNode``, whatever the node's memory);
``gpus`` is the job's total GPUs (allocated for running jobs, requested otherwise) and
``gpu_type`` the requested type, else the allocated one. ``squeue`` has no SiteFactor:
callers pass the ``sprio`` values in. Live job names are given as accounting stores
them (:func:`accounting_name`), so a pending job and its history share one name.

Strictness: a document that is not JSON, lacks its top-level list, or has a job whose
fields have the wrong type raises :class:`SlurmParseError` with a one-line message
naming the command, the job and the problem.

Cost: ``squeue --json`` is parsed every cycle and runs to ~25 MB at 10,000 jobs, so it
is decoded with msgspec into :class:`SqueueJob` (only the ~35 fields read, each job's
other fields skipped undecoded) with the garbage collector paused; per job the work is
building the record. ``sinfo`` and ``sacct`` documents are small and use :mod:`json`.
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

import msgspec

from slurmsched.errors import SlurmCommandFailed, SlurmParseError, SlurmUnavailable
from slurmsched.gateway.commands import UNREACHABLE_MARKERS
from slurmsched.gateway.gres import gpu_count, gpu_type_of, gpus_from_tres, gpus_from_tres_list, parse_gres
from slurmsched.model import GresRequest, JobRecord, JobState, NodeRecord

T = TypeVar("T")

#: Slurm's NO_VAL / INFINITE sentinels for 32-bit fields (21.08-23.02 leak them as numbers).
_SENTINELS = frozenset((0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF))
#: slurmctld's stand-in for an INFINITE time limit (minutes).
YEAR_MINUTES = 365 * 24 * 60
#: accounting error "Nothing found" (sacct with no matching job on 23.02+).
NOTHING_FOUND = 9003

_BASE_STATES = {s.value for s in JobState} - {"COMPLETING", "REQUEUED", "OTHER"}
#: State text as 22.05 prints it -> state (the common case of :func:`job_state`, without parsing).
_STATE_NAMES = {s.value: s for s in JobState}
_FINISHED = frozenset(s for s in JobState if s.finished)
_PENDING = JobState.PENDING


def _int(value: Any) -> int | None:
    """A number, unwrapped from ``{"set", "infinite", "number"}``; unset/infinite/NO_VAL -> ``None``.

    Raises:
        TypeError: not a number (booleans and strings included).
    """
    if value.__class__ is int:  # the common case, checked first: this runs ~15 times per job
        return None if value in _SENTINELS else value
    if value.__class__ is dict:
        if value.get("infinite") or not value.get("set"):
            return None
        value = value.get("number")
        if value.__class__ is int:
            return None if value in _SENTINELS else value
    if value is None:
        return None
    if value.__class__ is not float:
        raise TypeError(f"expected a number, got {value!r}")
    return None if value in _SENTINELS else int(value)


def _time(value: Any) -> float | None:
    """A POSIX time; Slurm's ``0`` means "not set"."""
    value = _int(value)
    return float(value) if value else None


def _minutes(value: Any) -> int | None:
    """A time limit in minutes -> seconds; unset or unlimited -> ``None``.

    slurmctld stores an INFINITE limit as 365 days (``YEAR_MINUTES``), so that is
    reported as unlimited too.
    """
    value = _int(value)
    return value * 60 if value is not None and value != YEAR_MINUTES else None


def _text(value: Any) -> str:
    if value.__class__ is str:
        return value
    if value is None:
        return ""
    raise TypeError(f"expected a string, got {value!r}")


def accounting_name(name: str) -> str:
    """A live job name (``squeue``, ``scontrol``, pyslurm) as accounting stores it.

    slurmdbd's MySQL plugin replaces every double quote in a job name by a backtick, so
    ``sacct`` reports the job ``quote"s`` as ``quote`s``; no other character changes
    (measured on 22.05: a single quote and a backslash come back as they went in).
    Every backend gives live names through this, so that a pending job is matched
    with the history of its name, and ``job_submit.lua`` does the same before it looks
    a new job up in the submit cache.
    """
    return name.replace('"', "`")


def job_state(value: Any, *, flag: str = "COMPLETING") -> JobState:
    """``"PENDING"`` or ``["RUNNING", "COMPLETING"]`` -> a :class:`JobState`.

    From a list, ``flag`` wins when present (``COMPLETING`` for the live queue, as 22.05
    would have printed it; ``REQUEUED`` for accounting, where ``["PENDING", "REQUEUED"]``
    is an attempt that ended in a requeue), else the base state.
    """
    if value.__class__ is str:
        return _STATE_NAMES.get(value) or JobState.parse(value)
    if not isinstance(value, list):
        raise TypeError(f"job_state must be a string or list, got {value!r}")
    if flag in value:
        return JobState(flag)
    for item in value:
        if item in _BASE_STATES:
            return JobState(item)
    return JobState.parse(value[0]) if value else JobState.OTHER


def _reason(value: Any) -> str:
    text = _text(value)
    return "" if text == "None" else text


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large document becomes records.

    A 10,000-job queue makes 10,000 records, and in the 23.11+ shape a dict for every
    wrapped number (~150,000), all alive until parsing ends: the collector would scan
    every few hundred allocations and promote them towards a full collection over the
    daemon's whole heap (0.1-0.2 s with a fitted predictor loaded; with :mod:`json`
    decoding, which built every job's whole dict, ~0.3 s a cycle). Nothing here can
    form a reference cycle, so there is nothing for it to find; the decoded document is
    freed by reference counting. A collector already disabled by the caller stays so.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decode_json(raw: bytes | str, command: str) -> dict[str, Any]:
    """Decode one JSON object printed by ``command``.

    Raises:
        SlurmParseError: not JSON, or not an object.
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SlurmParseError(f"{command}: output is not valid JSON ({exc.msg} at line {exc.lineno} "
                              f"column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise SlurmParseError(f"{command}: expected a JSON object, got {type(doc).__name__}")
    return doc


def require_list(doc: dict[str, Any], command: str, key: str) -> list[Any]:
    """The top-level list ``key`` of a decoded document, honouring Slurm's ``errors``.

    "Nothing found" (error 9003, or that text) yields an empty list; any other error
    Slurm reports in a document without data raises.

    Raises:
        SlurmParseError: ``key`` missing or not a list.
        SlurmUnavailable: the error is Slurm's generic RPC failure (-1) or names an
            unreachable daemon (22.05's squeue/sinfo report that in JSON and exit 0).
        SlurmCommandFailed: any other error from Slurm.
    """
    for error in doc.get("errors") or ():
        if not isinstance(error, dict):
            continue
        number = error.get("error_number", error.get("errno"))
        text = error.get("description") or error.get("error") or f"error {number}"
        if number == NOTHING_FOUND or text == "Nothing found":
            return doc.get(key) or []
        if doc.get(key):
            continue
        if number == -1 or any(marker in text for marker in UNREACHABLE_MARKERS):
            # 22.05 prints {"errors": [{"error_number": -1, ...}]} and exits 0 when the RPC failed
            raise SlurmUnavailable(f"{command}: {text} (slurmctld or slurmdbd unreachable?)")
        raise SlurmCommandFailed(f"{command}: {text}")
    items = doc.get(key)
    if not isinstance(items, list):
        raise SlurmParseError(f"{command}: no top-level '{key}' list in its JSON output")
    return items


def _label(item: Any, index: int) -> str:
    if isinstance(item, SqueueJob):
        return f"job {item.job_id!r}" if item.job_id is not msgspec.UNSET else f"item {index}"
    if isinstance(item, dict):
        if "job_id" in item:
            return f"job {item['job_id']!r}"
        if isinstance(item.get("name"), str):
            return f"node {item['name']!r}"
    return f"item {index}"


def _each(items: Iterable[Any], command: str, build: Callable[[Any], T | None]) -> list[T]:
    """Build one record per item; a malformed item raises a one-line SlurmParseError."""
    out: list[T] = []
    for index, item in enumerate(items):
        try:
            record = build(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise SlurmParseError(f"{command}: {_label(item, index)}: {detail}") from None
        if record is not None:
            out.append(record)
    return out


# --- squeue -------------------------------------------------------------------------

class SqueueJob(msgspec.Struct, gc=False):
    """The fields of one ``squeue --json`` job that slurmsched reads, as Slurm printed them.

    Decoding into this struct skips the other ~80-100 fields of every job without
    building them (a 10,000-job queue is ~25 MB of JSON). Values keep their JSON shape
    (plain or ``{"set", "infinite", "number"}`` numbers, strings, lists) and are checked
    when the record is built. A field Slurm did not print is ``None``; the three a
    record cannot do without are :data:`msgspec.UNSET` (reported as missing).
    ``gc=False``: decoded JSON holds no reference cycles.
    """

    job_id: Any = msgspec.UNSET
    job_state: Any = msgspec.UNSET
    submit_time: Any = msgspec.UNSET
    user_name: Any = None
    user_id: Any = ""
    name: Any = None
    cluster: Any = None
    array_job_id: Any = None
    array_task_id: Any = None
    account: Any = None
    partition: Any = None
    qos: Any = None
    state_reason: Any = None
    eligible_time: Any = None
    start_time: Any = None
    end_time: Any = None
    time_limit: Any = None
    node_count: Any = None
    cpus: Any = None
    tasks: Any = None
    memory_per_node: Any = None
    memory_per_cpu: Any = None
    tres_per_node: Any = None
    tres_per_job: Any = None
    tres_per_task: Any = None
    tres_req_str: Any = None
    tres_alloc_str: Any = None
    features: Any = None
    excluded_nodes: Any = None
    admin_comment: Any = None
    nodes: Any = None
    required_switches: Any = None
    maximum_switch_wait_time: Any = None
    priority: Any = None
    nice: Any = None
    restart_cnt: Any = None
    het_job_id: Any = None
    het_job_offset: Any = None


class _SqueueDocument(msgspec.Struct, gc=False):
    jobs: list[SqueueJob] | None = None
    errors: Any = None


_SQUEUE_DECODER = msgspec.json.Decoder(_SqueueDocument)


def _squeue_jobs(raw: bytes | str) -> list[Any]:
    """The jobs of a ``squeue --json`` document, decoded into :class:`SqueueJob` values.

    A document the typed decoder refuses (not JSON, invalid UTF-8, a top level or job
    list of another shape) goes through :func:`decode_json` and :func:`require_list`
    instead, which repair bad UTF-8 and raise the usual one-line errors; its job
    objects are converted to the struct, anything else is left for the record builder
    to reject.
    """
    try:
        doc = _SQUEUE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        items = require_list(decode_json(raw, "squeue --json"), "squeue --json", "jobs")
        return [msgspec.convert(item, SqueueJob) if isinstance(item, dict) else item for item in items]
    return require_list({"jobs": doc.jobs, "errors": doc.errors}, "squeue --json", "jobs")


def parse_squeue(raw: bytes | str, site_factors: Mapping[int, int] | None = None,
                 *, include_finished: bool = False) -> list[JobRecord]:
    """Parse ``squeue --json`` into live jobs.

    Args:
        raw: the command's stdout.
        site_factors: job id -> SiteFactor (from ``sprio``), set on pending jobs.
        include_finished: keep jobs in terminal states (22.05 lists them for
            ``MinJobAge`` seconds and ignores ``-t``); by default they are dropped.

    Raises:
        SlurmParseError: see module docstring.
    """
    factors = site_factors or {}

    def build(job: SqueueJob) -> JobRecord | None:
        state = job_state(_required(job.job_state, "job_state"))
        if state in _FINISHED and not include_finished:
            return None
        return _squeue_job(job, state, factors)

    with _collector_paused():
        return _each(_squeue_jobs(raw), "squeue --json", build)


def _required(value: Any, name: str) -> Any:
    if value is msgspec.UNSET:
        raise KeyError(name)
    return value


def _squeue_job(job: SqueueJob, state: JobState, factors: Mapping[int, int]) -> JobRecord:
    """One record; the hot loop of every cycle (once per job in the queue)."""
    job_id = int(_required(job.job_id, "job_id"))
    pending = state is _PENDING
    het_job_id = _int(job.het_job_id) or None  # 0: not a heterogeneous job
    nodes = _int(job.node_count) or 1
    cpus = _int(job.cpus) or 1
    gres = parse_gres(_text(job.tres_per_node))
    alloc = _text(job.tres_alloc_str)
    req_gpus, req_type = gpus_from_tres(_text(job.tres_req_str))
    if alloc and not pending:
        gpus, alloc_type = gpus_from_tres(alloc)
    else:
        gpus = req_gpus or _gpus_from_request(job, gres, nodes)
        alloc_type = None
    return JobRecord(
        job_id=job_id,
        user=_text(job.user_name) or str(job.user_id),
        submit_time=float(_int(_required(job.submit_time, "submit_time")) or 0),
        name=accounting_name(_text(job.name)),
        cluster=_text(job.cluster),
        array_job_id=_int(job.array_job_id) or None,
        array_task_id=_int(job.array_task_id),
        account=_text(job.account),
        partition=_text(job.partition),
        qos=_text(job.qos),
        state=state,
        reason=_reason(job.state_reason),
        eligible_time=_time(job.eligible_time),
        start_time=None if pending else _time(job.start_time),  # a pending job's is only a forecast
        end_time=_time(job.end_time) if state in _FINISHED else None,
        time_limit_s=_minutes(job.time_limit),
        nodes=nodes,
        cpus=cpus,
        memory_mb=_memory_mb(job, nodes, cpus),
        gpus=gpus,
        gpu_type=_requested_type(job, gres) or req_type or alloc_type,
        gres_per_node=gres,
        features=_text(job.features),
        excluded_nodes=_text(job.excluded_nodes),
        node_list=_text(job.nodes),
        switches=_int(job.required_switches),
        switch_wait_s=_int(job.maximum_switch_wait_time),
        priority=_int(job.priority),
        site_factor=factors.get(job_id) if pending else None,
        admin_comment=_text(job.admin_comment),
        nice=_int(job.nice) or 0,
        restart_count=_int(job.restart_cnt) or 0,
        het_job_id=het_job_id,
        het_job_offset=(_int(job.het_job_offset) or 0) if het_job_id is not None else None,
    )


def _gpus_from_request(job: SqueueJob, per_node: tuple[GresRequest, ...], nodes: int) -> int:
    """GPUs from the ``tres_per_*`` request fields when no TRES string says it."""
    per_task = gpu_count(parse_gres(_text(job.tres_per_task)))
    return (gpu_count(per_node) * nodes + gpu_count(parse_gres(_text(job.tres_per_job)))
            + per_task * (_int(job.tasks) or 1))


def _requested_type(job: SqueueJob, per_node: tuple[GresRequest, ...]) -> str | None:
    return gpu_type_of(per_node) or gpu_type_of(parse_gres(_text(job.tres_per_job)))


def _memory_mb(job: SqueueJob, nodes: int, cpus: int) -> int | None:
    per_node = _int(job.memory_per_node)
    if per_node:
        return per_node * nodes
    per_cpu = _int(job.memory_per_cpu)
    return per_cpu * cpus if per_cpu else None


# --- sinfo --------------------------------------------------------------------------

def parse_sinfo(raw: bytes | str) -> list[NodeRecord]:
    """Parse ``sinfo --json`` (or ``scontrol show nodes --json``) into one record per node.

    22.05 lists ``nodes``; 23.11+ ``sinfo --json`` lists aggregated rows (nodes with the
    same state and resources, once per partition), which are merged per node name:
    partitions are united, CPUs in use split evenly across the row's nodes.

    Raises:
        SlurmParseError: see module docstring.
    """
    doc = decode_json(raw, "sinfo --json")
    if "sinfo" not in doc:
        return _each(require_list(doc, "sinfo --json", "nodes"), "sinfo --json", _node)
    merged: dict[str, NodeRecord] = {}
    for row_nodes in _each(require_list(doc, "sinfo --json", "sinfo"), "sinfo --json", _sinfo_row):
        for node in row_nodes:
            seen = merged.get(node.name)
            if seen is not None:
                extra = tuple(p for p in node.partitions if p not in seen.partitions)
                node = replace(seen, partitions=seen.partitions + extra)
            merged[node.name] = node
    return list(merged.values())


def _state_words(state: Any, flags: Any = ()) -> tuple[str, ...]:
    words = [state] if isinstance(state, str) else list(state or ())
    words += list(flags or ())
    return tuple(w.upper() for w in words if w)


def _features(value: Any) -> tuple[str, ...]:
    return tuple(f for f in _text(value).split(",") if f)


def _node(node: Mapping[str, Any]) -> NodeRecord:
    partitions = node.get("partitions") or ()
    if isinstance(partitions, str):
        partitions = partitions.split(",")
    return NodeRecord(
        name=_text(node["name"]),
        state=_state_words(node.get("state"), node.get("state_flags")),
        partitions=tuple(partitions),
        cpus=_int(node.get("cpus")) or 0,
        cpus_alloc=_int(node.get("alloc_cpus")) or 0,
        memory_mb=_int(node.get("real_memory")) or 0,
        features=_features(node.get("active_features") or node.get("features")),
        gres=parse_gres(_text(node.get("gres"))),
        gres_used=parse_gres(_text(node.get("gres_used"))),
    )


def _sinfo_row(row: Mapping[str, Any]) -> list[NodeRecord]:
    names = row["nodes"]["nodes"]
    cpus = row.get("cpus") or {}
    memory = row.get("memory") or {}
    features = row.get("features") or {}
    gres = row.get("gres") or {}
    partition = (row.get("partition") or {}).get("name")
    count = max(1, len(names))
    return [NodeRecord(
        name=name,
        state=_state_words((row.get("node") or {}).get("state")),
        partitions=(partition,) if partition else (),
        cpus=_int(cpus.get("maximum")) or 0,
        cpus_alloc=(_int(cpus.get("allocated")) or 0) // count,
        memory_mb=_int(memory.get("maximum")) or 0,
        features=_features(features.get("active") or features.get("total")),
        gres=parse_gres(_text(gres.get("total"))),
        gres_used=parse_gres(_text(gres.get("used"))),
    ) for name in names]


# --- sacct --------------------------------------------------------------------------

def parse_sacct(raw: bytes | str) -> list[JobRecord]:
    """Parse ``sacct --json`` (allocations, ``-X``) into one record per job attempt.

    With ``--duplicates`` a requeued job has one entry per attempt; where Slurm does
    not carry ``restart_cnt`` (22.05) the attempts of one job id are numbered in
    submit/start order. Steps are ignored. "Nothing found" (error 9003) is empty.
    A job that never got nodes (``"nodes": "None assigned"``: cancelled while pending,
    or a requeued attempt that never restarted) has no start time: 22.05 reports the
    cancel time as its start, a 0-second run that never happened; 24.11 and later
    report none.
    Stub records that slurmdbd has not filled in yet are left out (they come back
    complete on a later read, so callers should re-read a window behind their cursor).

    Raises:
        SlurmParseError: see module docstring.
    """
    jobs = require_list(decode_json(raw, "sacct --json"), "sacct --json", "jobs")
    records = _each(jobs, "sacct --json", _sacct_job)
    records = [r for r, job in zip(records, jobs) if not _placeholder(job)]
    if jobs and isinstance(jobs[0], dict) and "restart_cnt" not in jobs[0]:
        records = _number_attempts(records)
    return records


def _asked_memory(required: Mapping[str, Any]) -> bool:
    """Whether a job asked for memory, or got a default, as ``squeue`` shows it pending.

    sacct's ``required`` holds the request (22.05 ``memory``; 24.11 and 25.11 ``memory_per_cpu``
    and ``memory_per_node``), 0 for none. Its requested ``mem`` TRES is the total, but for
    a job with none it is a whole node's memory (seen on 22.05 under ``CR_Core``).
    """
    return any(_int(required.get(key)) for key in ("memory", "memory_per_cpu", "memory_per_node"))


def _placeholder(job: Mapping[str, Any]) -> bool:
    """22.05's slurmdbd first stores a finished batch job as a stub (name ``allocation``,
    time limit 0, nothing requested) and fills it in a second or two later."""
    return job["time"].get("limit") == 0 and not (job.get("tres") or {}).get("requested")


def _sacct_job(job: Mapping[str, Any]) -> JobRecord:
    times = job["time"]
    state_info = job["state"]
    state = job_state(state_info["current"], flag="REQUEUED")
    tres = job.get("tres") or {}
    req_gpus, req_type = gpus_from_tres_list(tres.get("requested"))
    alloc_gpus, alloc_type = gpus_from_tres_list(tres.get("allocated"))
    required = job.get("required") or {}
    array = job.get("array") or {}
    nodes_text = _text(job.get("nodes"))
    requested = {e["type"]: _int(e.get("count")) for e in tres.get("requested") or () if e["type"] != "gres"}
    return JobRecord(
        job_id=int(job["job_id"]),
        user=_text(job.get("user")),
        submit_time=float(_int(times["submission"]) or 0),
        name=_text(job.get("name")),
        cluster=_text(job.get("cluster")),
        array_job_id=_int(array.get("job_id")) or None,
        array_task_id=_int(array.get("task_id")),
        account=_text(job.get("account")),
        partition=_text(job.get("partition")),
        qos=_text(job.get("qos")),
        state=state,
        reason=_reason(state_info.get("reason")),
        eligible_time=_time(times.get("eligible")),
        start_time=None if nodes_text == "None assigned" else _time(times.get("start")),
        end_time=_time(times.get("end")),
        time_limit_s=_minutes(times.get("limit")),
        nodes=_int(job.get("allocation_nodes")) or requested.get("node") or 1,
        cpus=_int(required.get("CPUs")) or requested.get("cpu") or 1,
        memory_mb=requested.get("mem") if _asked_memory(required) else None,
        gpus=alloc_gpus or req_gpus,
        gpu_type=req_type or alloc_type,
        features=_text(job.get("constraints")),
        node_list="" if nodes_text == "None assigned" else nodes_text,
        priority=_int(job.get("priority")),
        restart_count=_int(job.get("restart_cnt")) or 0,
        exit_code=_exit_code(job.get("exit_code"), state),
    )


def _exit_code(value: Any, state: JobState) -> int | None:
    """``{"status", "return_code", "signal"}`` -> the script's status; a signal N -> 128+N.

    22.05's JSON (``status`` a string) reports ``SUCCESS``/0 even for failed jobs, so
    there a zero is believed only for COMPLETED jobs and is ``None`` otherwise.
    """
    if not isinstance(value, dict):
        return _int(value)
    status = value.get("status")
    if isinstance(status, str):
        code = _int(value.get("return_code"))
        return None if code == 0 and state is not JobState.COMPLETED else code
    if "SIGNALED" in (status or ()):
        signal = value.get("signal") or {}
        number = _int(signal.get("id", signal.get("signal_id")))
        if number is not None:
            return 128 + number
    return _int(value.get("return_code"))


def _number_attempts(records: list[JobRecord]) -> list[JobRecord]:
    """Give repeated entries of one job id (requeued attempts) increasing restart counts."""
    by_id: dict[int, list[int]] = {}
    for index, record in enumerate(records):
        by_id.setdefault(record.job_id, []).append(index)
    out = list(records)
    for indexes in by_id.values():
        if len(indexes) < 2:
            continue
        ordered = sorted(indexes, key=lambda i: (records[i].start_time or float("inf"), i))
        for attempt, index in enumerate(ordered):
            out[index] = replace(records[index], restart_count=attempt)
    return out
