"""`rlplan import` on the 20 published launch scripts of ../shared/data/launch_scripts/ (their
origins in SOURCES.tsv): per script, its exit code, the settings rlplan read as the script
writes them, beside the imported cluster, workload and layout, and `rlplan evaluate` of the
result on H100s.

Not a test: prints a report. Run: .venv/bin/python bench/import_scripts.py [--no-evaluate]

What a script cannot hold is given on the command line, printed with its reason: a model the
catalog does not ship gets a stand-in of the nearest shipped architecture (--actor/--critic/
--reward NAME), and a node count the script says to change (--set NAME=VALUE). GPT-3 175B's
config.json is written from the script's own GPT_MODEL_ARGS (GPT-3 is GPT-2's architecture:
LayerNorm, GELU MLP of 4 × hidden, learned positions, tied embeddings; the script's
--vocab-file is GPT-2's BPE vocabulary of 50,257 tokens).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "launch_scripts"
GPU = "h100-sxm"

LLAMA3_8B = "llama-3.1-8b (Llama-3-8B fine-tunes are not shipped: the nearest shipped " \
    "architecture stands in)"
QWEN2_7B = "qwen2.5-7b (Qwen2-7B-Instruct is not shipped: the nearest shipped architecture " \
    "stands in)"
DEEPSEEK_7B = "olmo-2-1124-7b (deepseek-llm-7b-chat is not shipped: a shipped 7B with " \
    "multi-head attention stands in)"
# script → (extra arguments, why)
GIVEN: dict[str, list[tuple[list[str], str]]] = {
    "megatron__gpt3_train_gpt3_175b_distributed.sh": [
        (["--set", "NUM_NODES=16"], "TP 8 × PP 16 needs 128 GPUs; the script's NUM_NODES=1 "
         "says 'Change for multinode config'"),
        (["--actor", "{gpt3}"], "GPT-3 175B from the script's GPT_MODEL_ARGS (see the module "
         "docstring)")],
    "verl__grpo_trainer_run_qwen2-7b.sh": [(["--actor", "qwen2.5-7b"], QWEN2_7B)],
    "verl__grpo_trainer_run_qwen2-7b_math_megatron.sh": [(["--actor", "qwen2.5-7b"], QWEN2_7B)],
    "verl__ppo_trainer_run_qwen2-7b_math_gsm8k_megatron.sh": [
        (["--actor", "qwen2.5-7b", "--critic", "qwen2.5-7b"], QWEN2_7B)],
    "verl__ppo_trainer_run_qwen2-7b_rm_seq_balance.sh": [
        (["--actor", "qwen2.5-7b", "--critic", "qwen2.5-7b"], QWEN2_7B),
        (["--reward", "llama-3.1-8b"], "llama-3.1-8b (FsfairX-LLaMA3-RM, a Llama-3-8B reward "
         "model, is not shipped)")],
    "verl__ppo_trainer_run_deepseek7b_llm.sh": [
        (["--actor", "olmo-2-1124-7b", "--critic", "olmo-2-1124-7b"], DEEPSEEK_7B)],
    "verl__ppo_trainer_run_deepseek7b_llm_sp2.sh": [
        (["--actor", "olmo-2-1124-7b", "--critic", "olmo-2-1124-7b"], DEEPSEEK_7B)],
    "openrlhf-head__train_dapo_ray_hybrid_engine.sh": [(["--actor", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-head__train_dpo_llama.sh": [(["--actor", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-v0.8.9__train_dpo_ring_llama.sh": [(["--actor", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-head__train_ppo_ray_hybrid_engine.sh": [
        (["--actor", "llama-3.1-8b", "--reward", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-head__train_ppo_ray_slurm.sh": [
        (["--actor", "llama-3.1-8b", "--reward", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-v0.8.9__train_ppo_llama_ray_ring.sh": [
        (["--actor", "llama-3.1-8b", "--reward", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-v0.9.5__train_ppo_ray_hybrid_engine.sh": [
        (["--actor", "llama-3.1-8b", "--reward", "llama-3.1-8b"], LLAMA3_8B)],
    "openrlhf-v0.8.9__train_ppo_llama_ray_70b.sh": [
        (["--actor", "llama-3.1-70b", "--reward", "llama-3.1-70b"], "llama-3.1-70b "
         "(Meta-Llama-3-70B-Instruct is not shipped: the nearest shipped architecture stands "
         "in)")]}

GPT3 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 96,
        "n_embd": 12288, "n_head": 96, "n_inner": 4 * 12288, "vocab_size": 50257,
        "n_positions": 2048, "_rlplan_source": "GPT_MODEL_ARGS of Megatron-LM "
        "examples/gpt3/train_gpt3_175b_distributed.sh; GPT-2 BPE vocabulary"}


def rlplan() -> list[str]:
    exe = shutil.which("rlplan", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from planner.cli.main import main; main()"]


def layout_line(role: str, stage: str, lay: dict) -> str:
    degrees = " ".join(f"{k}{lay[k]}" for k in ("dp", "tp", "pp", "cp", "ep") if lay.get(k, 1)
                       > 1 or k == "dp")
    extra = []
    if stage != "generation":
        extra += [f"zero{lay['zero']}"] + (["sp"] if lay.get("sp") else [])
        extra += [f"recompute {lay['recompute']}"] if lay.get("recompute", "none") != "none" \
            else []
        extra += [f"offload {lay['offload']}"] if lay.get("offload", "none") != "none" else []
        extra += [f"mb{lay['micro_batch']}"]
    elif lay.get("max_num_seqs"):
        extra.append(f"max_num_seqs {lay['max_num_seqs']}")
    return f"{role} {stage} on {lay['group']}: {degrees} {' '.join(extra)}".rstrip()


def one(path: Path, tmp: Path, evaluate: bool) -> tuple[bool, bool]:
    """(imported, fits as evaluated) for one script."""
    name = path.name
    extra: list[str] = []
    print(f"\n== {name}")
    for args, why in GIVEN.get(name, []):
        if "{gpt3}" in args:
            cfg = tmp / "gpt3-175b.json"
            cfg.write_text(json.dumps(GPT3))
            args = [a.replace("{gpt3}", str(cfg)) for a in args]
        extra += args
        print(f"   given:    {' '.join(args)}  — {why}")
    plan, scen = tmp / f"{path.stem}.plan.json", tmp / f"{path.stem}.yaml"
    run = subprocess.run([*rlplan(), "import", str(path), "--gpu", GPU, "--out", str(plan),
                          "--out-scenario", str(scen), "--json", *extra],
                         capture_output=True, text=True, check=False)
    print(f"   import:   exit {run.returncode}")
    if run.returncode != 0:
        print("   " + run.stderr.strip().replace("\n", "\n   "))
        return False, False
    got = json.loads(run.stdout)
    print(f"   release:  {got['release']}")
    print(f"   script:   {' '.join(got['read'])}")
    s = got["scenario"]
    w, c = s["workload"], s["cluster"]
    print(f"   cluster:  {c['nodes']} × {c['gpus_per_node']} {c['gpu']}  "
          f"(groups {' + '.join(str(g['gpus']) for g in got['groups'])})")
    models = ", ".join(f"{r} {m}" for r, m in s["models"].items())
    print(f"   workload: {s['algorithm']}; {models}; {w['prompts_per_step']} prompts × "
          f"{w.get('samples_per_prompt', 1)}, prompt {w['prompt_len']}, response "
          f"{w.get('response_len')} (cap {w.get('max_response_len', w.get('response_len'))}), "
          f"{w.get('mini_batches', 1)} mini-batch(es), {w.get('ppo_epochs', 1)} epoch(s)")
    for role, stages in got["layouts"].items():
        for stage, lay in stages.items():
            print(f"   layout:   {layout_line(role, stage, lay)}")
    print(f"   inter:    {got['inter_model']['placement']}, staleness "
          f"{got['inter_model']['staleness']}")
    for note in got["notes"]:
        if not note.startswith("ignored"):
            print(f"   note:     {note}")
    ignored = next((n for n in got["notes"] if n.startswith("ignored")), None)
    if ignored:
        print(f"   {ignored.split(':', 1)[0]}")
    fits = False
    if evaluate:
        ev = subprocess.run([*rlplan(), "evaluate", str(scen), str(plan), "--json"],
                            capture_output=True, text=True, check=False)
        e = json.loads(ev.stdout) if ev.returncode in (0, 3) and ev.stdout.strip() else None
        fits = e is not None and e["status"] != "infeasible"
        if fits:
            mem = e["memory"]
            print(f"   evaluate: {e['iteration_time_s']:.1f} s per step, peak "
                  f"{mem['peak_gib_per_gpu']:.1f} of {mem['capacity_gib']:.0f} GiB per GPU")
        elif e is not None:
            print(f"   evaluate: does not fit on {GPU} — {e.get('reason', '')}")
        else:
            print(f"   evaluate: exit {ev.returncode}: {ev.stderr.strip()[:300]}")
    return True, fits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-evaluate", action="store_true", help="import only")
    ap.add_argument("--scripts", type=Path, default=SCRIPTS)
    args = ap.parse_args()
    paths = sorted(args.scripts.glob("*.sh"))
    if not paths:
        sys.exit(f"no scripts in {args.scripts} (the shared data folder beside the repository)")
    with tempfile.TemporaryDirectory() as tmp:
        done = [one(p, Path(tmp), not args.no_evaluate) for p in paths]
    print(f"\n{sum(i for i, _ in done)} of {len(paths)} scripts imported (exit 0)")
    if not args.no_evaluate:
        print(f"{sum(f for _, f in done)} of {len(paths)} fit on {GPU} as imported "
              "(rlplan evaluate, the default memory headroom)")


if __name__ == "__main__":
    main()
