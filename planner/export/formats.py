"""The formats `rlplan export` writes: a module of its own, so that naming them (`rlplan
plan`'s help and flags) loads no exporter."""

FORMATS = ("verl", "openrlhf", "deepspeed", "megatron", "nemo-rl")
