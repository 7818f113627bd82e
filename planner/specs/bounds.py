"""The limits on what a user can ask for, in one place, and why.

Each maximum is far above any real RL post-training run, and low enough that the arithmetic
stays exact and bounded: token counts and FLOPs stay well inside float64 (no inf, no NaN), the
solver's whole milliseconds and MiB fit its int64 model (`planner.search.cpsat` checks the
sums), and the per-sequence arrays (one entry per sequence of a step) fit in memory.
The floors keep divisions by a rate from producing times beyond the solver's range: a link or a
chip slower than the floor is not one a plan could be made for.

A field that breaks a limit is rejected up front by pydantic (`Field(le=..., ge=...)`), with a
message naming the field (and `planner.specs.scenario.SCENARIO_FLAGS` its flag) and the limit.
"""

from __future__ import annotations

# --- cluster -------------------------------------------------------------------------------
# The largest published training clusters are ~10^5 GPUs: 10^5 nodes and 10^6 GPUs leave a
# decade of room while keeping GPU counts × milliseconds inside int64 in the cost objective.
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 1_024  # a node is one OS host: 4–8 GPUs today, 72 in an NVL72 rack domain
MAX_TOTAL_GPUS = 1_000_000
# Heterogeneous pools: teams mix 2–4 GPU kinds; each pool multiplies the search's group shapes,
# and a plan has at most 3 groups (planner/search/space.py MAX_SLOTS), so 8 pools is ample.
MAX_POOLS = 8

# --- workload ------------------------------------------------------------------------------
# Published RL steps use 10^2–10^4 prompts and 1–64 samples each (≤ 10^6 sequences). The
# rollout model simulates every sequence of a step, so the step's sequence count is bounded
# too: 2^20 (8,192 prompts × 128 samples) keeps one `plan` within minutes, not hours.
MAX_PROMPTS_PER_STEP = 10_000_000  # for the flag's own message; the sequence bound binds first
MAX_SAMPLES_PER_PROMPT = 10_000
MAX_SEQUENCES_PER_STEP = 2**20
# Context windows reach 10^6–10^7 tokens (Llama 4 Scout: 10^7); a sequence beyond is no run.
MAX_SEQUENCE_TOKENS = 10_000_000
# Passes over a step's data: 1–4 in practice; 1,000 keeps one step's time within years, not
# the 10^6-epoch "66,888,872 s per step" that a typo produces.
MAX_PPO_EPOCHS = 1_000
MAX_MINI_BATCHES = MAX_SEQUENCES_PER_STEP  # it must divide the step's sequences anyway

# --- hardware ------------------------------------------------------------------------------
# Floors for rates (TFLOP/s, TB/s, GB/s): 10^-3 is a thousand times below a 1990s PCIe bus;
# below it, one step's milliseconds leave int64. Ceilings keep MiB counts inside int64.
MIN_RATE = 1e-3
MAX_RATE = 1e9  # TFLOP/s, TB/s or GB/s: 10^6× any chip or link shipped
MAX_MEMORY_GIB = 1e6  # per GPU or per node (host memory): a PiB
MIN_EFFICIENCY = 0.01  # fraction of a peak: below 1%, a profile describes no usable chip
MAX_LATENCY_US = 1e6  # one second per collective step
MAX_PRICE_USD_PER_GPU_HOUR = 1e4
MAX_CPU_CORES = 100_000  # per node: today's two-socket hosts have ≤ 512 cores

# --- runtime -------------------------------------------------------------------------------
# Host time per generated token: a rule-based verifier takes microseconds, a code sandbox
# ~1 ms per token (seconds per response); 0.1 s per token is no run anyone would plan.
MAX_CONTROLLER_US_PER_TOKEN = 1e5

# --- search --------------------------------------------------------------------------------
MIN_TARGET_TOKENS_PER_S = 1e-3
MAX_TARGET_TOKENS_PER_S = 1e12  # 10^6× the fastest published RL runs
MAX_MEMORY_HEADROOM = 0.5  # leaving more than half of each GPU free plans for another machine
# `--time-limit` bounds the whole command: a week is far beyond any search worth waiting for,
# and a finite bound keeps `inf` (or 1e400, read as inf) from meaning "no limit".
MAX_TIME_LIMIT_S = 7 * 24 * 3600  # seconds

# --- input files ---------------------------------------------------------------------------
# Every file the CLI reads (scenario, plan, model config, hardware profile, lengths, import
# and baseline files) is a regular file of at most this size, read once: the largest real
# input, a lengths file of 2^20 observed lengths, is ~10 MB of text. A FIFO or a device
# (/dev/zero, /dev/urandom) is refused before it is opened, so nothing blocks or reads
# without end.
MAX_INPUT_BYTES = 32 * 1024**2
# Nesting of mappings and lists in a YAML or JSON file: real inputs nest 4-6 deep; the
# parsers recurse per level, and Python's stack ends near 1,000.
MAX_NESTING = 64
# Digits of one number in a file: int64 has 19, a float's literal rarely more than 25;
# Python refuses to convert integers of over 4,300 digits (and slows down well before).
MAX_NUMBER_CHARS = 100
