"""`inspo ablate --scheduler local --workers N`: N runs at once on one machine, each pinned to its own GPUs.

    outcome = run_parallel(ablation, workers=4, gpus_per_run=2, device="cuda")   # an 8-GPU box, 2-GPU runs

Each run is its own process, `python -m inspo_cli.ablation.workers DIR RUN ...`, started with
`CUDA_VISIBLE_DEVICES` set to its share of the visible GPUs, and does exactly what a sequential `inspo ablate` does
for it (`runner.run_one`: train or resume, evaluate, record a failure). Runs are started in plan order as workers
free up; finished runs are skipped without a process. Ctrl-C stops every worker; the same command continues.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from inspo_cli.ablation.directory import FINISHED, AblationDir
from inspo_cli.ablation.plan import PlannedRun
from inspo_cli.ablation.results import choose_step, results_file
from inspo_cli.ablation.runner import Outcome, run_one
from inspo_cli.ablation.status import local_job
from inspo_cli.errors import InspoError


def gpu_groups(workers: int, gpus_per_run: int | None, device: str | None) -> list[str | None]:
    """The CUDA_VISIBLE_DEVICES of each worker (None: leave it as it is, e.g. on CPU)."""
    if device == "cpu" or not gpus_per_run:
        return [None] * workers
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        import torch

        visible = [str(i) for i in range(torch.cuda.device_count())]
    if workers * gpus_per_run > len(visible):
        raise InspoError(
            f"--workers {workers} x --gpus-per-run {gpus_per_run} = {workers * gpus_per_run} GPUs, but "
            f"{len(visible)} are visible; lower one of them"
        )
    return [",".join(visible[i * gpus_per_run : (i + 1) * gpus_per_run]) for i in range(workers)]


def run_parallel(
    ablation: AblationDir,
    workers: int,
    gpus_per_run: int | None = None,
    device: str | None = None,
    on_event: Callable[[str], None] = lambda line: None,
    rule: str = "best",
    launcher: str = "inspo",
) -> Outcome:
    groups = gpu_groups(workers, gpus_per_run, device)
    outcome = Outcome()
    queue: list[PlannedRun] = []
    skipped: list[PlannedRun] = []
    for run in ablation.plan.runs():
        (skipped if _done(ablation, run, rule) else queue).append(run)
    outcome.skipped = [run.name for run in skipped]
    free = list(range(workers))
    active: dict[subprocess.Popen, tuple[PlannedRun, int]] = {}
    try:
        while queue or active:
            while queue and free:
                run, slot = queue.pop(0), free.pop(0)
                env, group = dict(os.environ), groups[slot]
                if group is not None:
                    env["CUDA_VISIBLE_DEVICES"] = group
                command = [
                    sys.executable,
                    "-m",
                    "inspo_cli.ablation.workers",
                    str(ablation.path),
                    run.name,
                    device or "",
                    rule,
                    launcher,
                ]
                on_event(f"{run.name}: worker {slot + 1}" + (f" (GPUs {group})" if group else ""))
                process = subprocess.Popen(command, env=env)
                ablation.record_jobs({run.name: local_job(process.pid)})
                active[process] = (run, slot)
            time.sleep(0.5)
            for process in [p for p in active if p.poll() is not None]:
                run, slot = active.pop(process)
                free.append(slot)
                result = {0: "finished", 3: "skipped"}.get(process.returncode, "failed")
                getattr(outcome, result).append(run.name)
                if result == "failed" and run.name not in ablation.failures():
                    ablation.record_failure(run, f"its worker exited with code {process.returncode}")
    except KeyboardInterrupt:
        for process in active:
            process.terminate()
        for process in active:
            process.wait()
        raise
    return outcome


def _done(ablation: AblationDir, run: PlannedRun, rule: str) -> bool:
    """Finished and evaluated at the step the table reports: nothing for a worker to do."""
    if ablation.status(run) != FINISHED:
        return False
    choice = choose_step(ablation.run_dir(run), rule)
    return choice.step is not None and results_file(ablation.run_dir(run), choice.step).is_file()


def main(argv: list[str]) -> int:
    """One worker: one run to its result. Exit 0 finished, 3 skipped (finished before), 1 failed."""
    path, name, device, rule, launcher = argv
    ablation = AblationDir.open(path)
    run = next(r for r in ablation.plan.runs() if r.name == name)
    result = run_one(
        ablation, run, device or None, lambda line: print(line, file=sys.stderr, flush=True), rule, launcher=launcher
    )
    return {"finished": 0, "skipped": 3}.get(result, 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
