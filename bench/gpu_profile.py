"""A profile of a few decode steps, for the GPU checklist's trainer step (bench/gpu_checks.py): where a decode step's
time goes, in the step's own rollout and in plain `generate` of the same weights beside it.

Why: on an H200 the 3B step's rollout decoded at about 87 ms per step against 33 ms for plain `generate` of the same
batch, and on 2 CPU cores the rollout costs nothing over plain `generate` at the step's shapes (bench/README.md, "GPU
checklist"). The timings of bench/gpu_timing.py say *whether* the step's calls are slower than plain `generate`; this
says *why*, in the same lease: wall ms per step against the GPU's busy ms per step (a GPU busy for most of the wall
time is slowed by its kernels, which the top kernels name; one idle for most of it waits on the host: launches,
Python, synchronisations, which the top host ops and the counts of synchronising calls name).

`DecodeProfile.step()` is called once per decode step (by a stopping criterion: HF's `generate` calls its criteria
once per new token); it profiles steps `skip` to `skip + active` (5 and 5) with torch.profiler (CPU, and CUDA when
there is a GPU), then summarises: about 2 s per 5 steps of a 36-layer model here (each op's events cost the host tens
of microseconds to summarise), so the window is short. Its wall time includes the profiler's own cost per op: set the
profiles beside each other, and take absolute rates from the unprofiled timings. Nothing it does may stop the
generation it watches: every failure becomes an "error" field. torch is imported inside the functions (gpu_checks.py's
rule).
"""

from __future__ import annotations

import time

# host-side calls that wait for the GPU or copy to the host, counted per step: each one empties the launch queue
SYNCHRONISING = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpyAsync",
    "cudaMemcpy",
    "aten::_local_scalar_dense",
    "aten::item",
    "aten::nonzero",
)
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
TOP = 12


class DecodeProfile:
    """Profiles decode steps `skip` .. `skip + active` of the generation it is stepped by; `result` after `finish()`:
    None if fewer than `skip` steps were seen (nothing was profiled)."""

    def __init__(self, skip: int = 5, active: int = 5):
        self.skip, self.active = skip, active
        self.seen = 0
        self.result: dict | None = None
        self._profiler = None
        self._started = 0.0

    @classmethod
    def within(cls, steps: int) -> DecodeProfile:
        """The default window if a call of `steps` decode steps holds it, else a shorter one (active < 2: too short
        to profile)."""
        skip = 5 if steps >= 20 else 1
        return cls(skip, min(5, steps - skip - 1))

    def step(self) -> None:
        self.seen += 1
        if self.result is not None:
            return
        try:
            if self.seen == self.skip and self._profiler is None:
                self._start()
            elif self.seen == self.skip + self.active and self._profiler is not None:
                self._stop()
        except Exception as error:  # a profile that fails must not cost the generation
            self._fail(error)

    def finish(self) -> dict | None:
        """Ends a profile the generation ended early (every row stopped) and returns the result."""
        if self._profiler is not None and self.result is None:
            try:
                self._stop()
            except Exception as error:
                self._fail(error)
        return self.result

    def _start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        gpu = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
        if gpu:
            torch.cuda.synchronize()
        self._profiler = profile(activities=activities)
        self._profiler.start()
        self._started = time.perf_counter()

    def _stop(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds = time.perf_counter() - self._started
        steps = self.seen - self.skip
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        # the synchronisation above, which the window's wall time needs, was recorded too: not the step's own
        own = {"cudaDeviceSynchronize": 1} if torch.cuda.is_available() else {}
        self.result = summarize(profiler.key_averages(), steps, seconds, own)

    def _fail(self, error: Exception) -> None:
        self.result = {"error": f"{type(error).__name__}: {error}"[:500]}
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            try:
                profiler.stop()
            except Exception:
                pass


def summarize(averages, steps: int, seconds: float, own: dict[str, int] | None = None) -> dict:
    """Per decode step: wall ms, the GPU's busy ms (kernels, copies and fills, summed; one stream, so no overlap) and
    its share of the wall time, host ops and kernel launches, the synchronising calls by name, and the top host ops
    (self CPU time) and top kernels (GPU time). `own`: calls by name the profiler's own bookkeeping made, left out
    of the counts."""
    from torch.autograd import DeviceType

    steps = max(steps, 1)
    host, device = [], []
    for event in averages:
        if event.device_type == DeviceType.CPU:
            host.append(event)
        elif not getattr(event, "is_user_annotation", False):
            device.append(event)
    wall_ms = 1000 * seconds / steps
    busy_ms = sum(e.self_device_time_total for e in device) / 1000 / steps
    ops = [e for e in host if e.key.startswith("aten::")]

    def per_step(events, time_of) -> list[dict]:
        top = sorted(events, key=time_of, reverse=True)[:TOP]
        return [
            {"name": e.key[:120], "calls": round(e.count / steps, 1), "us": round(time_of(e) / steps, 1)} for e in top
        ]

    counts = {e.key: e.count for e in host}
    for name, calls in (own or {}).items():  # calls the profile itself made (its closing synchronisation)
        counts[name] = max(counts.get(name, 0) - calls, 0)
    return {
        "steps": steps,
        "wall_ms_per_step": round(wall_ms, 2),
        "gpu": bool(device),
        "gpu_busy_ms_per_step": round(busy_ms, 2) if device else None,
        "gpu_busy_share": round(busy_ms / wall_ms, 3) if device and wall_ms > 0 else None,
        "host_ops_per_step": round(sum(e.count for e in ops) / steps, 1),
        "host_op_ms_per_step": round(sum(e.self_cpu_time_total for e in host) / 1000 / steps, 2),
        "kernel_launches_per_step": round(sum(counts.get(name, 0) for name in LAUNCHES) / steps, 1),
        "synchronising_per_step": {name: round(counts[name] / steps, 2) for name in SYNCHRONISING if counts.get(name)},
        "top_host_ops": per_step(host, lambda e: e.self_cpu_time_total),
        "top_kernels": per_step(device, lambda e: e.self_device_time_total),
    }


class ProfilingCriterion:
    """A stopping criterion that stops nothing: it steps `profile` once per decode step (plain `generate`'s side)."""

    def __init__(self, profile: DecodeProfile):
        self.profile = profile
        self._never = None

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        self.profile.step()
        if self._never is None or self._never.shape[0] != input_ids.shape[0]:
            self._never = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return self._never


def brief(profile: dict) -> dict:
    """A profile's headline figures, for the checklist's printed summary (the whole profile is in the results)."""
    if "error" in profile:
        return {"error": profile["error"]}
    keys = ("width", "rows", "steps", "wall_ms_per_step", "gpu_busy_ms_per_step", "gpu_busy_share")
    shown = {k: profile.get(k) for k in keys}
    shown.update({k: profile.get(k) for k in ("host_ops_per_step", "kernel_launches_per_step")})
    shown["synchronising_per_step"] = profile.get("synchronising_per_step", {})
    shown["top_kernels"] = [f"{k['name'][:60]}: {k['us']} us" for k in profile.get("top_kernels", [])[:3]]
    shown["top_host_ops"] = [f"{k['name'][:60]}: {k['us']} us" for k in profile.get("top_host_ops", [])[:3]]
    return shown
