"""The launch-script shell reader (planner/importers/shell.py): what a script runs, read without
running it — variables, defaults, arithmetic, arrays, here-documents, tests, `bash -c`."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.importers.shell import read_script


def words(text: str, **settings: str) -> list[list[str]]:
    return [[w.text for w in c.words] for c in read_script(text, settings).commands]


def test_variables_defaults_and_arithmetic():
    script = """
NNODES=${NNODES:-2}
GPUS=${GPUS:=8}
export TP=4
WORLD=$((NNODES * GPUS))
len=$(((1024 + 512) * 10 / 10))
odd=$(( (7 - 10) / 2 ))   # bash truncates toward zero
python3 -m x --world $WORLD --tp=${TP} --len $len --odd $odd
"""
    assert words(script) == [["python3", "-m", "x", "--world", "16", "--tp=4", "--len", "1536",
                              "--odd", "-1"]]
    assert words(script, NNODES="3")[0][4] == "24"  # --set gives the environment's value


def test_a_setting_replaces_the_scripts_own_assignment():
    got = read_script("NUM_NODES=1\ntorchrun --nnodes $NUM_NODES train.py\n",
                      {"NUM_NODES": "16"})
    assert [w.text for w in got.commands[0].words] == ["torchrun", "--nnodes", "16", "train.py"]
    assert got.overridden == ["NUM_NODES"]


def test_unset_variables_stay_visible():
    got = read_script("python3 -m x trainer.nnodes=$NNODES path=${HOME}/m --n ${K:-$J}\n")
    w = got.commands[0].words
    assert (w[3].text, w[3].unset) == ("trainer.nnodes=${NNODES}", ("NNODES",))
    assert w[4].unset == ("HOME",) and w[6].unset == ("J",)


def test_arrays_quoted_and_unquoted():
    script = """
ARGS=(
    --a 1      # a comment inside the array
    "--b two words"
)
ARGS+=(--c "3 4")
MORE=( --d )
python3 run.py "${ARGS[@]}" ${MORE[@]} ${ARGS[0]}
python3 run.py ${ARGS[@]}
"""
    quoted, unquoted = words(script)
    assert quoted == ["python3", "run.py", "--a", "1", "--b two words", "--c", "3 4", "--d",
                      "--a"]
    assert unquoted == ["python3", "run.py", "--a", "1", "--b", "two", "words", "--c", "3", "4"]


def test_line_continuations_quotes_and_comments():
    script = ("python3 -m verl.trainer.main_ppo --config-name='ppo_megatron_trainer.yaml'\\\n"
              "    data.files=\"['$A', 'b c']\" \\\n"
              "    trainer.logger=['console','wandb'] \\\n"
              "    x.y=\"a\\\"b\" # trailing comment\n")
    assert words(script, A="a")[0][3:] == ["--config-name=ppo_megatron_trainer.yaml",
                                           "data.files=['a', 'b c']",
                                           "trainer.logger=[console,wandb]", 'x.y=a"b']


def test_heredoc_read_into_a_variable_and_if_tests():
    script = """
read -r -d '' cmds <<EOF
openrlhf.cli.train_dpo \\
   --train.batch_size $((128 * 2))
EOF
if [[ ${1} != "slurm" ]]; then
    deepspeed --module $cmds
else
    echo never
fi
DTYPE=fp8
EXTRA=()
if [ "$DTYPE" == "fp8" ] && [[ -z "$UNSET_X" ]]; then EXTRA+=("--fp8-format hybrid"); fi
if [ -f /cluster/only/file ]; then exit 1; fi
python3 run.py ${EXTRA[@]}
"""
    got = read_script(script)
    assert [[w.text for w in c.words] for c in got.commands] == [
        ["deepspeed", "--module", "openrlhf.cli.train_dpo", "--train.batch_size", "256"],
        ["python3", "run.py"]]
    # the -z test needs UNSET_X, which the script leaves open: not decided, read as false
    assert any("UNSET_X" in n for n in got.notes)
    assert any("-f /cluster/only/file" in n for n in got.notes)


def test_bash_c_strings_and_loops():
    script = """
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
arr=( $nodes )
for ((i = 1; i < 4; i++)); do
  srun -w ${arr[$i]} ray start --block &
done
srun --overlap -N 1 bash -c "pip install x && ray job submit --address=http://h:8265 \\
    -- python3 -m openrlhf.cli.train_ppo_ray --actor.num_nodes ${N:-2}" &>> log.txt
"""
    got = words(script)
    assert got == [["ray", "job", "submit", "--address=http://h:8265", "--", "python3", "-m",
                    "openrlhf.cli.train_ppo_ray", "--actor.num_nodes", "2"]]


def test_sbatch_directives():
    got = read_script("#!/bin/bash\n#SBATCH -N 4   # nodes\n#SBATCH --gpus-per-node=8\necho\n")
    assert got.sbatch == {"-N": "4", "--gpus-per-node": "8"}


@pytest.mark.parametrize("text, match", [
    ("python x 'unterminated\n", "single quote"),
    ('python x "unterminated\n', "double quote"),
    ("A=( a b\n", "array A=\\( is not closed"),
    ("X=$((2 / 0))\n", "division by zero"),
    ("X=abc\nY=$((X + 1))\n", "X is 'abc', not a whole number"),
    ("if true; then echo\n", "expected 'fi'"),
    ("( " * 3000 + "echo" + " )" * 3000, "too deeply"),
    ("X=${A:-" * 3000 + "}" * 3000, "too deeply"),
])
def test_broken_scripts_are_one_error(text, match):
    with pytest.raises(InputError, match=match):
        read_script(text)


def test_nothing_is_run(tmp_path):
    """Command substitutions, `source` and redirections stay text: no file is touched."""
    marker = tmp_path / "made"
    script = (f"X=$(touch {marker})\nsource {marker}\necho hi > {marker}\n"
              f"python3 -m x --v \"$X\"\n")
    got = read_script(script)
    assert not marker.exists()
    v = got.commands[0].words[-1]
    assert v.text == "$(...)" and v.unset == ("X",)
    assert any("source" in n for n in got.notes)
