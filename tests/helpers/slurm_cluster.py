"""A real one-node SLURM for the tests: munged, slurmctld and slurmd from Debian's packages, without systemd.

    with slurm_cluster() as conf:          # conf: the slurm.conf path; SLURM_CONF is set while it runs
        subprocess.run(["sbatch", ...])

Everything lives in a scratch directory under /tmp (munge's socket must be reachable by the munge user, which
pytest's 0700 temporary directories are not); the daemons are stopped by their pids afterwards. Needs root (the
daemons run as root and munged as the munge user) and the packages `slurmctld slurmd slurm-client munge`; without
them `available()` says why, and the fixture skips, unless INSPO_REQUIRE_SLURM=1 (CI) makes that a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CONF_TEMPLATE = Path(__file__).parent.parent / "slurm" / "slurm.conf.in"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def available() -> str | None:
    """Why a test SLURM cannot run here, or None."""
    missing = [name for name in DAEMONS if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists()]
    if missing:
        return (
            f"SLURM is not installed (missing {', '.join(missing)}): "
            "apt-get install slurmctld slurmd slurm-client munge"
        )
    if os.geteuid() != 0:
        return "the test SLURM needs root (its daemons run as root, munged as the munge user)"
    if not Path("/etc/munge/munge.key").is_file():
        return "no /etc/munge/munge.key (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 1024  # slurmd refuses a node configured with more than it has
    return 1024


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@contextlib.contextmanager
def slurm_cluster():
    scratch = Path(tempfile.mkdtemp(prefix="inspo-slurm-"))
    scratch.chmod(0o711)
    for sub in ("munge", "state", "spool", "log"):
        (scratch / sub).mkdir()
    shutil.chown(scratch / "munge", "munge", "munge")
    (scratch / "munge").chmod(0o711)
    host = socket.gethostname().split(".")[0]
    conf = scratch / "slurm.conf"
    conf.write_text(
        CONF_TEMPLATE.read_text().format(
            host=host,
            scratch=scratch,
            ctld_port=_free_port(),
            slurmd_port=_free_port(),
            cpus=os.cpu_count() or 1,
            memory=_memory_mb(),
        )
    )
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    munge = scratch / "munge"
    try:
        subprocess.run(
            [
                "su",
                "-s",
                "/bin/sh",
                "munge",
                "-c",
                f"{_binary('munged')} --socket={munge}/munge.socket --pid-file={munge}/munged.pid "
                f"--log-file={munge}/munged.log --seed-file={munge}/munged.seed "
                "--key-file=/etc/munge/munge.key",
            ],
            check=True,
            timeout=30,
        )
        subprocess.run([_binary("slurmctld"), "-f", str(conf)], check=True, timeout=30)
        subprocess.run([_binary("slurmd"), "-f", str(conf)], check=True, timeout=30)
        deadline = time.time() + 60
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True)
            if state.stdout.strip() in ("idle", "mix", "alloc"):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the test SLURM did not come up: {(scratch / 'log/slurmctld.log').read_text()[-2000:]}")
        yield conf
    finally:
        for pid_file in (scratch / "slurmd.pid", scratch / "slurmctld.pid", munge / "munged.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        time.sleep(1)
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        shutil.rmtree(scratch, ignore_errors=True)
