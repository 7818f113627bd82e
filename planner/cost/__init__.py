"""The practical cost model (DESIGN.md "The cost model"): what the hardware makes of the work.

- `constants`: every constant of the formulas, with unit and source.
- `flops`: architecture-exact FLOPs and bytes moved per model invocation (reduces to the
  theory's Table I on the paper's canonical Transformer).
- `memory`: bytes per GPU for a (role, stage, layout), as a named breakdown summing to its total.
"""
