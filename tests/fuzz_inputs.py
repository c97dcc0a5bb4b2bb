"""Seeded fuzzing of accel-sim's inputs: device, system, model-config, graph, serve-trace and grid
files, command-line values, and the sizes a model script's example inputs are resized to.

Each case takes a valid input, mutates it (a value replaced by one of the wrong kind or out of
range, a key dropped or added, bytes flipped, the file cut short), runs the command that reads it
in this process, and checks the contract every command keeps:

* exit status 0, and then every number it printed finite and every byte count and time
  non-negative (its --json parses as strict JSON: no NaN, no Infinity); or
* exit status 2 with exactly one line on stderr, `accel-sim...: error: ...`;
* never a traceback, a signal or a hang (a case that runs longer than --case-timeout ends the
  run, naming the case).

    python tests/fuzz_inputs.py                      # the CI run: 3,000 cases, at most 75 s
    python tests/fuzz_inputs.py --cases 100000 --seconds 3600 --seed 7   # longer, by hand
    python tests/fuzz_inputs.py --replay 1234        # one case again, by its number

Case n is drawn from random.Random(seed * 1_000_003 + n), so a case replays on its own. The
inputs and command of every failing case are written to build/fuzz-failures/ (or --failures).
Exit status: 0 when every case kept the contract, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import faulthandler
import io
import json
import math
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable

import yaml

REPO = Path(__file__).resolve().parent.parent
DATA = Path(str(files("accel_sim") / "data"))

# Values of the wrong kind or out of range; HUGE_INT becomes an integer of 5,000 digits in the
# file's text (beyond Python's default int/str conversion limit, as a hostile file may have).
HUGE_INT = "__fuzz_huge_int__"
WEIRD: list[Any] = [
    0, -1, 1, 2, 3, 7, 2**31, 2**32 + 1, 2**53 + 1, 2**62, 2**63, 2**64, -(2**63) - 1, 10**30, HUGE_INT,
    0.0, -0.0, 0.5, -0.5, 1.5, 1e-320, 1e-30, 1e30, 1e308, -1e308, float("inf"), float("-inf"), float("nan"),
    "", "abc", "1e3", "12", "true", "nan", "\x00", "ä€", "-", "../x", True, False, None,
    [], [1], [1, 2], ["a"], [[[]]], {}, {"a": 1}, {"": None},
]
SCALES = [0, -1, 1e-9, 1e-3, 0.5, 2, 1e3, 1e9, 1e18, 1e300]

# Sizes of the tiny models every model-config case starts from: the shipped configs with their
# dimensions shrunk, so that a case runs in milliseconds.
SHRINK = {
    "hidden_size": 64, "n_embd": 64, "num_hidden_layers": 2, "n_layer": 2, "intermediate_size": 128,
    "ffn_hidden_size": 256, "vocab_size": 512, "num_attention_heads": 4, "n_head": 4, "num_key_value_heads": 2,
    "num_kv_heads": 2, "max_position_embeddings": 512, "n_positions": 512, "num_local_experts": 4,
    "num_experts": 4, "n_routed_experts": 8, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "head_dim": 16, "rotary_dim": 8, "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1,
    "image_size": [32, 32], "patch_size": 8, "num_channels": 3, "n_inner": None,
}
CONFIGS = ["llama-3-8b", "gpt2", "mixtral-8x7b", "deepseek-v3", "bert-base-uncased", "vit-era5", "falcon-180b",
           "qwen1.5-moe-a2.7b", "qwen3-8b", "gpt-j-6b", "mistral-7b"]
ENCODERS = ("bert", "vit")


def tiny_config(model: str) -> dict:
    config = json.loads((DATA / "models" / f"{model}.json").read_text())
    for key, value in SHRINK.items():
        if key in config:
            config[key] = value
    if config.get("sliding_window"):
        config["sliding_window"] = 64
    if config.get("model_type") == "deepseek_v3":
        config["num_key_value_heads"] = 4
    return config


# ---- mutation of parsed documents -----------------------------------------------------------

def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside `doc` (dict keys and list indices), the root excluded."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append(prefix + (k,))
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append(prefix + (i,))
            out += _paths(v, prefix + (i,))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutate(doc: Any, rng: random.Random, times: int) -> Any:
    """`doc` with `times` random edits: a value replaced by a WEIRD one or by another value of the
    document, a number scaled, a key dropped, an unknown key added."""
    doc = copy.deepcopy(doc)
    for _ in range(times):
        paths = _paths(doc)
        if not paths:
            return rng.choice(WEIRD)
        path = rng.choice(paths)
        parent, key = _parent(doc, path), path[-1]
        action = rng.random()
        if action < 0.5:
            parent[key] = copy.deepcopy(rng.choice(WEIRD))
        elif action < 0.65:
            value = parent[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                scaled = value * rng.choice(SCALES)
                parent[key] = int(scaled) if isinstance(value, int) and math.isfinite(scaled) else scaled
            else:
                parent[key] = copy.deepcopy(rng.choice(WEIRD))
        elif action < 0.75:
            other = rng.choice(paths)
            parent[key] = copy.deepcopy(_parent(doc, other)[other[-1]])
        elif action < 0.9:
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif isinstance(parent, dict):
            parent[rng.choice(["fuzz", "x", "1", "sources", "kernel", "measured"])] = copy.deepcopy(rng.choice(WEIRD))
    return doc


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level edit: a byte flipped or replaced by 0xff / NUL, a span cut or repeated, the
    file truncated."""
    if not data:
        return b"\xff"
    i = rng.randrange(len(data))
    action = rng.randrange(5)
    if action == 0:
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if action == 1:
        return data[:i] + rng.choice([b"\xff", b"\x00", b"\xc3", b"\xe2\x82"]) + data[i + 1:]
    if action == 2:
        j = min(len(data), i + rng.randrange(1, 200))
        return data[:i] + data[j:]
    if action == 3:
        j = min(len(data), i + rng.randrange(1, 200))
        return data[:j] + data[i:j] * rng.randrange(2, 5) + data[j:]
    return data[:i]


def _dump_yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode("utf-8").replace(
        HUGE_INT.encode(), b"9" * 5000)


def _dump_json(doc: Any) -> bytes:
    return json.dumps(doc).encode("utf-8").replace(f'"{HUGE_INT}"'.encode(), b"9" * 5000)


# ---- cases ----------------------------------------------------------------------------------

class Case:
    """One command with the files it reads. `{dir}` in argv and in file contents is the case's
    directory."""

    def __init__(self, kind: str, argv: list[str], inputs: dict[str, bytes]):
        self.kind, self.argv, self.inputs = kind, argv, inputs


def _edited(rng: random.Random, doc: Any, dump: Callable[[Any], bytes]) -> bytes:
    """A document mutated (one to three edits), sometimes also at the byte level."""
    data = dump(mutate(doc, rng, rng.choice([1, 1, 1, 2, 3])))
    if rng.random() < 0.15:
        data = mutate_bytes(data, rng)
    return data


def _simulate_argv(rng: random.Random, model: str, family: str) -> list[str]:
    phases = ["prefill", "train"] + ([] if family in ENCODERS else ["decode"])
    phase = rng.choice(phases)
    argv = ["simulate", "--model", model, "--device", rng.choice(["h100", "a100", "mi300x", "tpu-v4"]),
            "--phase", phase, "--batch", str(rng.choice([1, 2, 4])), "--json", "--no-ops"]
    if family != "vit":
        argv += ["--context", "64"] if phase == "decode" else ["--seq", str(rng.choice([16, 64, 128]))]
    return argv


def device_case(rng: random.Random, base: dict) -> Case:
    doc = copy.deepcopy(base[rng.choice(sorted(base))])
    data = _edited(rng, doc, _dump_yaml)
    f = "{dir}/fuzzchip.yaml"
    argv = rng.choice([
        ["simulate", "--model", "{dir}/tiny.json", "--device-file", f, "--device", "fuzzchip", "--json", "--no-ops"],
        ["simulate", "--model", "{dir}/tiny.json", "--device-file", f, "--device", "fuzzchip", "--phase", "train",
         "--seq", "64", "--json", "--no-ops"],
        ["devices", "--device-file", f, "--json"],
        ["compare", "--model", "{dir}/tiny.json", "--devices", "h100,fuzzchip", "--device-file", f, "--json"],
        ["kernel", "matmul", "--m", "512", "--n", "512", "--k", "512", "--device-file", f, "--device", "fuzzchip",
         "--json"],
    ])
    return Case("device", argv, {"fuzzchip.yaml": data, "tiny.json": _dump_json(tiny_config("llama-3-8b"))})


def system_case(rng: random.Random, base: dict) -> Case:
    doc = copy.deepcopy(base[rng.choice(sorted(base))])
    data = _edited(rng, doc, _dump_yaml)
    f = "{dir}/fuzzsys.yaml"
    argv = rng.choice([
        ["kernel", "allreduce", "--bytes", "1G", "--gpus", "16", "--system", f, "--json"],
        ["train", "--model", "{dir}/tiny.json", "--system", f, "--gpus", "8", "--tp", "2", "--pp", "2", "--dp", "2",
         "--global-batch", "16", "--seq", "128", "--json"],
        ["simulate", "--model", "{dir}/tiny.json", "--tp", "2", "--system", f, "--seq", "64", "--json", "--no-ops"],
        ["systems", "--system-file", f, "--json"],
    ])
    return Case("system", argv, {"fuzzsys.yaml": data, "tiny.json": _dump_json(tiny_config("llama-3-8b"))})


def config_case(rng: random.Random, base: dict) -> Case:
    name = rng.choice(sorted(base))
    doc = base[name]
    family = doc["model_type"]
    data = _edited(rng, doc, _dump_json)
    model = "{dir}/config.json"
    argv = _simulate_argv(rng, model, family)
    if family not in ENCODERS and rng.random() < 0.25:
        argv = rng.choice([
            ["serve", "--model", model, "--device", "h100", "--requests", "12", "--qps", "8", "--input-len", "48",
             "--output-len", "8", "--json"],
            ["train", "--model", model, "--system", "dgx-h100", "--gpus", "4", "--tp", "2", "--dp", "2",
             "--global-batch", "8", "--seq", "64", "--json"],
        ])
    return Case("config", argv, {"config.json": data})


def graph_case(rng: random.Random, base: dict) -> Case:
    doc = base[rng.choice(sorted(base))]
    data = _edited(rng, doc, _dump_json)
    argv = rng.choice([["simulate", "{dir}/graph.json", "--device", "a100", "--json", "--no-ops"],
                       ["compare", "{dir}/graph.json", "--devices", "a100,h100", "--json"],
                       ["simulate", "{dir}/graph.json", "--device", "h100", "--free-at-last-use", "--json", "--no-ops"]])
    return Case("graph", argv, {"graph.json": data})


def trace_case(rng: random.Random, base: dict) -> Case:
    rows = copy.deepcopy(base["rows"])
    if rng.random() < 0.7:
        edited = mutate({"rows": rows}, rng, rng.choice([1, 2]))
        rows = edited.get("rows", []) if isinstance(edited, dict) else []
    if rng.random() < 0.5:
        lines = [json.dumps(r) if not isinstance(r, str) else r for r in (rows if isinstance(rows, list) else [rows])]
        data, name = "\n".join(lines).encode().replace(f'"{HUGE_INT}"'.encode(), b"9" * 5000) + b"\n", "trace.jsonl"
    else:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["arrival_s", "input_len", "output_len"])
        for r in rows if isinstance(rows, list) else [rows]:
            writer.writerow([r.get(k, "") for k in ("arrival_s", "input_len", "output_len")] if isinstance(r, dict) else [r])
        data, name = out.getvalue().encode().replace(HUGE_INT.encode(), b"9" * 5000), "trace.csv"
    if rng.random() < 0.15:
        data = mutate_bytes(data, rng)
    argv = ["serve", "--model", "{dir}/tiny.json", "--device", "h100", "--workload", "{dir}/" + name, "--json"]
    return Case("trace", argv, {name: data, "tiny.json": _dump_json(tiny_config("llama-3-8b"))})


def grid_case(rng: random.Random, base: dict) -> Case:
    doc = base[rng.choice(sorted(base))]
    data = _edited(rng, doc, _dump_yaml)
    argv = ["sweep", "--grid", "{dir}/grid.yaml", "--out", "{dir}/out.csv", "--workers", "1", "--quiet"]
    return Case("grid", argv, {"grid.yaml": data, "tiny.json": _dump_json(tiny_config("llama-3-8b"))})


# A command line whose numbers (and some names) are replaced by wrong ones, one or two at a time.
CLI_TEMPLATES = [
    ["simulate", "--model", "{dir}/tiny.json", "--device", "h100", "--batch", "2", "--seq", "64", "--json", "--no-ops"],
    ["simulate", "--model", "{dir}/tiny.json", "--device", "h100", "--phase", "decode", "--batch", "4", "--context",
     "128", "--json", "--no-ops"],
    ["simulate", "--model", "{dir}/tiny.json", "--phase", "train", "--batch", "1", "--seq", "64", "--grad-accum", "2",
     "--clock-mhz", "1500", "--json", "--no-ops"],
    ["train", "--model", "{dir}/tiny.json", "--system", "dgx-h100", "--gpus", "8", "--tp", "2", "--pp", "2", "--dp", "2",
     "--global-batch", "16", "--microbatch", "1", "--seq", "128", "--json"],
    ["plan", "--model", "{dir}/tiny.json", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "16", "--seq", "128",
     "--top", "3", "--json"],
    ["serve", "--model", "{dir}/tiny.json", "--device", "h100", "--requests", "12", "--qps", "8", "--input-len", "48",
     "--output-len", "8", "--seed", "3", "--json"],
    ["kernel", "matmul", "--m", "256", "--n", "512", "--k", "1024", "--device", "h100", "--json"],
    ["kernel", "attention", "--batch", "2", "--heads", "8", "--kv-heads", "2", "--seq-q", "256", "--head-dim", "64",
     "--device", "h100", "--json"],
    ["kernel", "allreduce", "--bytes", "1G", "--gpus", "16", "--system", "dgx-h100", "--json"],
    ["fit", "--model", "{dir}/tiny.json", "--devices", "h100", "--axis", "batch", "--seq", "64", "--max", "64", "--json"],
    ["sweep", "--model", "{dir}/tiny.json", "--device", "h100", "--vary", "batch=1,2", "--seq", "64", "--json"],
]
CLI_VALUES = ["0", "-1", "1", "1.5", "1e3", "1e309", "-1e309", "nan", "inf", "-inf", "99999999999999999999",
              str(2**63), str(2**64), "", "abc", "0x10", "1G", "1T", "1e-400", " 3", "1_000", "२"]


def cli_case(rng: random.Random, base: dict) -> Case:
    argv = list(rng.choice(CLI_TEMPLATES))
    slots = [i for i, a in enumerate(argv) if i > 0 and not a.startswith("--") and argv[i - 1].startswith("--")
             and argv[i - 1] not in ("--model", "--system", "--device", "--devices", "--phase", "--axis")]
    for i in rng.sample(slots, min(len(slots), rng.choice([1, 1, 2]))):
        argv[i] = rng.choice(CLI_VALUES)
    return Case("cli", argv, {"tiny.json": _dump_json(tiny_config("llama-3-8b"))})


# A model script with get_model(), token ids in, logits out: --batch and --seq resize its example
# input (2 sequences of 8 ids) before capture, to sizes up to and beyond what a tensor can count.
TOKEN_SCRIPT = b"""import torch
from torch import nn


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100)

    def forward(self, ids):
        return self.head(self.embed(ids))


def get_model():
    return Tokens(), torch.zeros(2, 8, dtype=torch.long)
"""
SCRIPT_TEMPLATES = [
    ["simulate", "{dir}/tokens.py", "--batch", "2", "--seq", "8", "--json", "--no-ops"],
    ["simulate", "{dir}/tokens.py", "--train", "--batch", "2", "--seq", "8", "--json", "--no-ops"],
    ["compare", "{dir}/tokens.py", "--devices", "a100,h100", "--batch", "2", "--seq", "8", "--json"],
    ["fit", "{dir}/tokens.py", "--axis", "batch", "--devices", "h100", "--seq", "8", "--max", "64", "--json"],
    ["fit", "{dir}/tokens.py", "--axis", "seq", "--devices", "h100", "--batch", "2", "--max", "64", "--json"],
]
SIZE_VALUES = ["1", "3", "2000000", "100000000000", str(2**40), str(2**53), str(2**62), str(2**63 - 1)]


def script_case(rng: random.Random, base: dict) -> Case:
    argv = list(rng.choice(SCRIPT_TEMPLATES))
    slots = [i for i, a in enumerate(argv) if argv[i - 1] in ("--batch", "--seq", "--max")]
    for i in rng.sample(slots, rng.choice([1, 1, 2])):
        argv[i] = rng.choice(SIZE_VALUES if rng.random() < 0.6 else CLI_VALUES)
    return Case("script", argv, {"tokens.py": TOKEN_SCRIPT})


KINDS: list[tuple[str, float, Callable]] = [
    ("device", 0.2, device_case), ("system", 0.12, system_case), ("config", 0.24, config_case),
    ("graph", 0.14, graph_case), ("trace", 0.1, trace_case), ("grid", 0.08, grid_case), ("cli", 0.12, cli_case),
    ("script", 0.04, script_case),
]


def bases() -> dict[str, dict]:
    """The valid inputs the cases mutate, per kind."""
    devices = {}
    for name in ("h100_sxm", "a100_80gb", "mi300x", "tpu_v4"):
        doc = yaml.safe_load((DATA / "devices" / f"{name}.yaml").read_text())
        doc["id"], doc["aliases"] = "fuzzchip", []
        devices[name] = doc
    systems = {name: yaml.safe_load((DATA / "systems" / f"{name}.yaml").read_text())
               for name in ("dgx_h100", "mi300x_8", "tpu_v5p", "gb200_nvl72")}
    configs = {name: tiny_config(name) for name in CONFIGS}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import mlp_graph

    graphs = {"mlp": mlp_graph()}
    try:
        from accel_sim.api import load_target

        block = load_target(REPO / "examples" / "transformer_block.py")
        graphs["block"] = json.loads(json.dumps(block))
    except ImportError:  # no torch: the hand-built graph only
        pass
    rows = [{"arrival_s": round(0.05 * i, 3), "input_len": 16 + 7 * i, "output_len": 4 + i} for i in range(10)]
    grids = {
        "simulate": {"command": "simulate", "fixed": {"model": "{dir}/tiny.json", "phase": "decode", "context": 64},
                     "grid": {"device": ["a100", "h100"], "batch": [1, 2]}},
        "range": {"command": "simulate", "fixed": {"model": "{dir}/tiny.json", "seq": 64},
                  "grid": {"memory_bandwidth_gbs": "2000:4000:3"}},
        "train": {"command": "train", "fixed": {"model": "{dir}/tiny.json", "system": "dgx-h100", "seq": 128,
                                                "global_batch": 16},
                  "points": [{"gpus": 8, "tp": 2, "pp": 2, "dp": 2}, {"gpus": 4, "tp": 2, "pp": 1, "dp": 2}]},
    }
    return {"device": devices, "system": systems, "config": configs, "graph": graphs, "trace": {"rows": rows},
            "grid": grids}


def draw(seed: int, n: int, base: dict) -> Case:
    rng = random.Random(seed * 1_000_003 + n)
    x = rng.random() * sum(w for _, w, _ in KINDS)
    for kind, weight, make in KINDS:
        if x < weight:
            return make(rng, base[kind] if kind in base else base)
        x -= weight
    return KINDS[-1][2](rng, base)


# ---- running and judging ----------------------------------------------------------------------

_NON_FINITE_TEXT = re.compile(r"(?<![A-Za-z])(nan|inf|infinity)(?![A-Za-z])", re.IGNORECASE)


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def _impossible(doc: Any, path: str = "") -> str | None:
    """The first figure in `doc` that is not finite, or a byte count or time that is negative."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            found = _impossible(v, f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(doc, list):
        for i, v in enumerate(doc):
            found = _impossible(v, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(doc, bool) or not isinstance(doc, (int, float)):
        return None
    if isinstance(doc, float) and not math.isfinite(doc):
        return f"{path} = {doc}"
    key = path.rsplit(".", 1)[-1].split("[")[0]
    if doc < 0 and (key.endswith("bytes") or key.endswith("_s") or "flops" in key):
        return f"{path} = {doc} (negative)"
    return None


def judge(code: Any, out: str, err: str, argv: list[str]) -> str | None:
    """None when the run kept the contract, else what broke it."""
    if "Traceback (most recent call last)" in err or "Traceback (most recent call last)" in out:
        return "a traceback"
    if code == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("accel-sim") or ": error: " not in lines[0]:
            return f"exit 2 without exactly one error line (stderr: {err.strip()[:400]!r})"
        return None
    if code != 0:
        return f"exit status {code!r}"
    if "--json" in argv:
        try:
            doc = _strict_json(out)
        except ValueError as e:
            return f"--json output is not strict JSON ({str(e)[:200]})"
        found = _impossible(doc)
        if found:
            return f"an impossible figure: {found}"
    elif _NON_FINITE_TEXT.search(out):
        return f"a non-finite number in the output ({_NON_FINITE_TEXT.search(out).group(0)})"
    table = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    if table is not None and table.is_file():
        with table.open(newline="") as f:
            for row in csv.DictReader(f):
                for column, cell in row.items():
                    figure = column and (column.endswith(("_s", "_bytes")) or column in ("mfu", "tokens_per_s"))
                    if figure and cell:
                        value = float(cell)
                        if not math.isfinite(value) or value < 0:
                            return f"an impossible figure in the grid table: {column} = {cell} (point {row.get('point')})"
    return None


def run_case(case: Case, directory: Path) -> tuple[Any, str, str, list[str]]:
    from accel_sim.cli.main import main

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, data in case.inputs.items():
        (directory / name).write_bytes(data.replace(b"{dir}", str(directory).encode()))
    argv = [a.replace("{dir}", str(directory)) for a in case.argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        except BaseException:  # noqa: BLE001 - an escaping exception is what the fuzzer looks for
            traceback.print_exc()
            code = "exception"
    return code, out.getvalue(), err.getvalue(), argv


def save_failure(case: Case, n: int, why: str, out: str, err: str, root: Path) -> Path:
    where = root / f"case-{n}-{case.kind}"
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for name, data in case.inputs.items():
        (where / name).write_bytes(data.replace(b"{dir}", str(where).encode()))
    command = "accel-sim " + " ".join(a.replace("{dir}", str(where)) for a in case.argv)
    (where / "README.txt").write_text(f"{why}\n\n{command}\n\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}\n")
    return where


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=20261124)
    p.add_argument("--cases", type=int, default=3000, help="cases to run at most (default: 3000)")
    p.add_argument("--seconds", type=float, default=75.0, help="stop starting cases after this long (default: 75; 0: no limit, every case of --cases runs)")
    p.add_argument("--case-timeout", type=float, default=60.0, help="a case running longer is a hang (default: 60 s)")
    p.add_argument("--replay", type=int, action="append", help="run only case N (repeatable)")
    p.add_argument("--failures", default=str(REPO / "build" / "fuzz-failures"), help="where failing cases are written")
    p.add_argument("--progress", help="a file rewritten with the number of the case about to run")
    args = p.parse_args(argv)

    base = bases()
    numbers = args.replay or range(args.cases)
    counts = {"exit 0": 0, "exit 2": 0}
    kinds: dict[str, int] = {}
    failures = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="accel-sim-fuzz-") as tmp:
        for n in numbers:
            if not args.replay and args.seconds and time.monotonic() - start > args.seconds:
                break
            case = draw(args.seed, n, base)
            if args.progress:
                Path(args.progress).write_text(f"{n} {case.kind} {' '.join(case.argv)}\n")
            faulthandler.dump_traceback_later(args.case_timeout, exit=True)
            code, out, err, used = run_case(case, Path(tmp) / "case")
            faulthandler.cancel_dump_traceback_later()
            kinds[case.kind] = kinds.get(case.kind, 0) + 1
            why = judge(code, out, err, used)
            if why:
                failures.append({"case": n, "kind": case.kind, "why": why,
                                 "saved": str(save_failure(case, n, why, out, err, Path(args.failures)))})
            elif code in (0, 2):
                counts[f"exit {code}"] += 1
    summary = {"seed": args.seed, "cases": sum(kinds.values()), "seconds": round(time.monotonic() - start, 1),
               "by_kind": kinds, **counts, "failures": failures}
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
