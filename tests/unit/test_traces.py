"""Trace readers on small generated files (never real trace data)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from slurmsched.errors import TraceFormatError
from slurmsched.model import JobRecord, JobState
from slurmsched.traces import (HELIOS_EPOCH, TRACE_EPOCH, BadLine, iter_numbered, iter_trace, line_numbers,
                               list_members, read_swf_header)

SWF_HEADER = """; Version: 2.2
; UnixStartTime: 1000000000
; MaxNodes: 64
; MaxProcs: 128
; Queue:  1 batch
; Queue:  2 short
;
"""


def swf_line(job: int, submit: int = 0, wait: int = 10, run: int = 100, procs: int = 4, req_procs: int = -1,
             req_time: int = 3600, status: int = 1, user: int = 7, group: int = 3, exe: int = 42,
             queue: int = 1, part: int = -1, req_mem: int = -1) -> str:
    fields = [job, submit, wait, run, procs, -1, -1, req_procs, req_time, req_mem, status, user, group, exe, queue,
              part, -1, -1]
    return " ".join(str(f) for f in fields) + "\n"


def records(items) -> list[JobRecord]:
    return [i for i in items if isinstance(i, JobRecord)]


def bad(items) -> list[BadLine]:
    return [i for i in items if isinstance(i, BadLine)]


def test_swf_maps_fields(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + swf_line(1, submit=5, wait=10, run=100, procs=4, req_mem=409600)
                    + swf_line(2, procs=-1, req_procs=3, req_time=-1, status=5, queue=2, exe=-1)
                    + swf_line(3, run=-1, wait=-1, queue=-1, part=2, status=0))
    jobs = records(iter_trace(path, "swf"))
    assert [j.job_id for j in jobs] == [1, 2, 3]
    first, second, third = jobs
    assert first.submit_time == 1_000_000_005
    assert first.start_time == 1_000_000_015 and first.runtime_s == 100
    assert (first.user, first.account, first.name, first.partition) == ("7", "3", "42", "batch")
    assert (first.cpus, first.gpus, first.nodes, first.time_limit_s) == (4, 0, 2, 3600)
    assert first.memory_mb == 1600  # field 10: 400 MB (409,600 kB) per processor
    assert first.state is JobState.COMPLETED
    assert (second.cpus, second.time_limit_s, second.name, second.partition) == (3, None, "", "short")
    assert second.memory_mb is None
    assert second.state is JobState.CANCELLED
    assert third.start_time is None and third.runtime_s is None and third.partition == "2"
    assert third.state is JobState.FAILED


def test_swf_gzip_and_header(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(SWF_HEADER + swf_line(1))
    header = read_swf_header(path)
    assert (header.max_procs, header.max_nodes, header.unix_start_time) == (128, 64, 1_000_000_000)
    assert header.procs_per_node == 2 and dict(header.queues) == {1: "batch", 2: "short"}
    assert len(records(iter_trace(path, "swf"))) == 1


def test_swf_without_start_time_uses_fixed_epoch(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(swf_line(1, submit=60))
    (job,) = records(iter_trace(path, "swf"))
    assert job.submit_time == TRACE_EPOCH + 60
    assert read_swf_header(path).max_procs is None


def test_swf_corrupted_lines_reported_with_line_numbers(tmp_path: Path) -> None:
    good = [swf_line(i) for i in range(1, 6)]
    lines = SWF_HEADER.splitlines(keepends=True) + good[:2] + ["1 2 3\n"] + good[2:4] \
        + [swf_line(9).replace("100", "abc", 1), swf_line(10, submit=-1), swf_line(11, procs=-1, req_procs=-1)] \
        + good[4:]
    path = tmp_path / "t.swf"
    path.write_text("".join(lines))
    items = list(iter_trace(path, "swf"))
    header_len = len(SWF_HEADER.splitlines())
    assert [b.lineno for b in bad(items)] == [header_len + 3, header_len + 6, header_len + 7]
    assert "expected 18" in bad(items)[0].reason
    assert "run time" in bad(items)[1].reason
    assert "submit time" in bad(items)[2].reason
    # a well-formed row without processors is a job without processors, not an unreadable line
    assert [(j.job_id, j.cpus) for j in records(items)] == [(1, 4), (2, 4), (3, 4), (4, 4), (11, 0), (5, 4)]


@pytest.mark.parametrize("field", [0, 4, 8])  # job number, processors, requested time
def test_swf_field_beyond_64_bits_is_an_unreadable_line(tmp_path: Path, field: int) -> None:
    huge = swf_line(2).split()
    huge[field] = "1e20"
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + swf_line(1) + " ".join(huge) + "\n" + swf_line(3))
    items = list(iter_trace(path, "swf"))
    assert [j.job_id for j in records(items)] == [1, 3]
    assert [b.reason.endswith("is out of range ('1e20')") for b in bad(items)] == [True]


@pytest.mark.parametrize("field", [4, 7])  # allocated, requested processors
def test_swf_count_beyond_32_bits_is_an_unreadable_line(tmp_path: Path, field: int) -> None:
    """The jobs table stores counts as 32-bit integers (PostgreSQL's ``integer``): a row
    of 99999999999 processors is one bad line, not a batch the database refuses."""
    huge = swf_line(2, procs=4 if field == 4 else -1).split()  # requested counts when none were allocated
    huge[field] = "99999999999"
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + swf_line(1) + " ".join(huge) + "\n" + swf_line(3))
    items = list(iter_trace(path, "swf"))
    assert [j.job_id for j in records(items)] == [1, 3]
    assert [b.reason for b in bad(items)] == [
        f"{'allocated' if field == 4 else 'requested'} processors (field {field + 1}) is out of range ('99999999999')"]


def test_swf_memory_beyond_64_bits_is_an_unreadable_line(tmp_path: Path) -> None:
    """Field 10 is per processor: 9e18 kB on each of 2,000 processors is about 1.8e19 MB,
    more than the jobs table's 64-bit memory column holds (the import stopped at that row)."""
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + swf_line(1) + swf_line(2, procs=2000, req_mem=9 * 10**18) + swf_line(3))
    items = list(iter_trace(path, "swf"))
    assert [j.job_id for j in records(items)] == [1, 3]
    assert [b.reason for b in bad(items)] == ["requested memory (field 10) is out of range for 2000 processors "
                                              "('9000000000000000000')"]


HELIOS = """# comment line
job_id,user,tenant,class,submit_time,num_chips,chip_type,num_nodes,duration_s,walltime_limit_s,final_status
10,alice,vcA,finetune,2000000,8,,1,120.0,120.0,COMPLETED
11,bob,vcB,finetune,3000000,16,,2,50.0,50.0,CANCELED
12,bob,vcB,finetune,oops,16,,2,50.0,50.0,FAILED
13,bob,vcB,finetune,4000000,16,,2,-5,50.0,FAILED
"""


def test_helios_ignores_walltime_copy_and_reports_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "venus.csv"
    path.write_text(HELIOS)
    items = list(iter_trace(path, "helios"))
    jobs = records(items)
    assert [j.job_id for j in jobs] == [10, 11]
    assert jobs[0].submit_time == HELIOS_EPOCH + 2 and jobs[0].runtime_s == 120
    assert all(j.time_limit_s is None for j in jobs)
    assert (jobs[1].gpus, jobs[1].nodes, jobs[1].partition, jobs[1].state) == (16, 2, "vcB", JobState.CANCELLED)
    assert [(b.lineno, "submit_time" in b.reason) for b in bad(items)] == [(5, True), (6, False)]
    assert "negative" in bad(items)[1].reason


def test_philly_rows(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-09 07:01:55,66.0,1,66.0,vc1\n"
                    "not-a-date,66.0,1,66.0,vc1\n"
                    "2017-10-09 07:02:00,30.0,8,240.0\n"
                    "2017-10-09 07:03:00,30.0,8,240.0,vc2\n"
                    "2017-10-09 07:04:00,30.0,-2,-60.0,vc2\n")
    items = list(iter_trace(path, "philly"))
    jobs = records(items)
    assert [j.job_id for j in jobs] == [1, 4]
    assert jobs[0].submit_time == 1507532515.0 and jobs[0].runtime_s == 66 and jobs[0].partition == "vc1"
    assert [b.lineno for b in bad(items)] == [3, 4, 6]
    assert bad(items)[2].reason == "num_gpus is negative ('-2')"


def _itp_csv(rows: list[str]) -> bytes:
    return ("job_id,submission_time,duration,num_gpu\n" + "".join(rows)).encode()


def test_itp_tar_members_and_extracted_csv(tmp_path: Path) -> None:
    archive = tmp_path / "itp.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, rows in (("cluster02.csv", ["a-1,100,60,2\n", "a-2,x,60,2\n"]),
                           ("cluster01.csv", ["b-1,0,10,4\n"]), ("LICENSE", [])):
            data = _itp_csv(rows) if name.endswith(".csv") else b"MIT"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert list_members(archive) == ["cluster01.csv", "cluster02.csv"]
    items = list(iter_trace(archive, "itp"))
    assert [(j.cluster, j.job_id, j.gpus) for j in records(items)] == [("cluster01", 1, 4), ("cluster02", 1, 2)]
    (problem,) = bad(items)
    assert problem.lineno == 3 and problem.reason.startswith("cluster02.csv: ")
    one = records(iter_trace(f"{archive}:cluster02.csv", "itp"))
    assert [(j.cluster, j.submit_time) for j in one] == [("cluster02", TRACE_EPOCH + 100)]
    with pytest.raises(TraceFormatError, match="no member 'cluster09.csv'"):
        list(iter_trace(f"{archive}:cluster09.csv", "itp"))
    extracted = tmp_path / "cluster07.csv"
    extracted.write_bytes(_itp_csv(["c-1,5,7,1\n"]))
    assert [j.cluster for j in records(iter_trace(extracted, "itp"))] == ["cluster07"]


EAGLE_HEADER = ("job_id,user,account,partition,qos,wallclock_req,nodes_req,processors_req,gpus_req,mem_req,"
                "submit_time,start_time,end_time,run_time,state,name,work_dir,submit_line\n")


def test_eagle_rows(tmp_path: Path) -> None:
    path = tmp_path / "eagle.csv"
    path.write_text(EAGLE_HEADER
                    + "5,u1,a1,p1,normal,3600.0,2,72,2,1024.0,2019-01-01 00:00:00,2019-01-01 00:01:00,"
                      "2019-01-01 00:11:00,600.0,TIMEOUT,train,w,s\n"
                    + "6,u1,a1,p1,normal,,1,1,0,0.0,2019-01-01 00:00:00,,,0.0,CANCELLED by 0,n,w,s\n"
                    + "7,u1,a1,p1,normal,60,1,1,0,0,2019-01-01 00:00:00,2019-01-01 00:05:00,"
                      "2019-01-01 00:01:00,0,COMPLETED,n,w,s\n"
                    + "8,u1,a1,p1,normal,60,1,1,0,0,2019-01-01 00:10:00,2019-01-01 00:05:00,"
                      "2019-01-01 00:06:00,60,COMPLETED,n,w,s\n"
                    + "9,u1,a1,p1,normal,60,1,1,-1,0,2019-01-01 00:00:00,,,0,PENDING,n,w,s\n")
    items = list(iter_trace(path, "eagle"))
    first, second = records(items)
    assert (first.user, first.account, first.partition, first.qos, first.name) == ("u1", "a1", "p1", "normal", "train")
    assert (first.time_limit_s, first.nodes, first.cpus, first.gpus, first.memory_mb) == (3600, 2, 72, 2, 1024)
    assert first.runtime_s == 600 and first.state is JobState.TIMEOUT
    assert second.time_limit_s is None and second.start_time is None and second.state is JobState.CANCELLED
    assert [(b.lineno, b.reason) for b in bad(items)] == [
        (4, "end_time is before start_time"), (5, "start_time is before submit_time"), (6, "gpus_req is negative ('-1')")]


def test_unreadable_inputs_raise_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="unknown trace format 'xls'"):
        iter_trace(tmp_path / "x", "xls")
    with pytest.raises(TraceFormatError, match="cannot read trace"):
        list(iter_trace(tmp_path / "missing.swf", "swf"))
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(TraceFormatError, match="header lacks column"):
        list(iter_trace(wrong, "philly"))
    with pytest.raises(TraceFormatError, match="tar archive"):
        list_members(wrong)


@pytest.mark.parametrize("fmt, text", [
    ("swf", SWF_HEADER + "".join(swf_line(i) for i in range(1, 400))),
    ("philly", "timestamp,duration,num_gpus,gpu_time,cluster\n" + "2017-10-09 07:01:55,66.0,1,66.0,vc1\n" * 400),
])
def test_a_corrupt_or_truncated_gzip_is_a_trace_format_error(fmt: str, text: str, tmp_path: Path) -> None:
    """Not gzip's own exceptions (click turned EOFError into a bare "Aborted!")."""
    corrupt = tmp_path / "badhdr.gz"
    corrupt.write_bytes(b"\x1f\x8bXXXXXXXXXX")
    truncated = tmp_path / "trunc.gz"
    truncated.write_bytes(gzip.compress(text.encode())[:60])
    for path in (corrupt, truncated):
        with pytest.raises(TraceFormatError, match=f"cannot read trace {path} to the end"):
            list(iter_trace(path, fmt))
    with pytest.raises(TraceFormatError, match="to the end: .*compression method"):
        read_swf_header(corrupt)


def test_a_quoted_csv_field_may_span_lines(tmp_path: Path) -> None:
    path = tmp_path / "eagle.csv"
    path.write_text(EAGLE_HEADER
                    + "# a comment between records\n"
                    + '5,u1,a1,p1,normal,60,1,1,0,0,2019-01-01 00:00:00,2019-01-01 00:01:00,'
                      '2019-01-01 00:02:00,60,COMPLETED,n,w,"sbatch \\\n# not a comment\n  run.sh"\n'
                    + "6,u1,a1,p1,normal,60,1,1,0,0,oops,,,0,COMPLETED,n,w,s\n"
                    + '7,u1,a1,p1,normal,60,1,1,0,0,2019-01-01 00:00:00,,,0,COMPLETED,n,w,"open\n'
                    + "8,u1,a1,p1,normal,60,1,1,0,0,2019-01-01 00:00:00,,,0,COMPLETED,n,w,s\n")
    numbered = list(iter_numbered(path, "eagle"))
    assert [(line, type(item).__name__) for line, item in numbered] == [(3, "JobRecord"), (6, "BadLine"),
                                                                        (7, "BadLine")]
    assert numbered[0][1].job_id == 5 and "submit_time" in numbered[1][1].reason
    assert numbered[2][1].reason == ("unreadable CSV (unexpected end of data) "
                                     "(a record of lines 7-8: a quote left open?)")
    assert [b.lineno for b in bad(iter_trace(path, "eagle"))] == [6, 7]


def test_line_numbers_stay_short() -> None:
    assert line_numbers([3, 4, 6]) == "3, 4, 6"
    assert line_numbers(list(range(1, 1001))) == "1, 2, 3, 4, 5 and 995 more"
