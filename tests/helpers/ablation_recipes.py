"""A bundled recipe the ablation tests plan from."""

from __future__ import annotations

INSPO_3B = "recipes/qwen2.5-3b/inspo.yaml"
