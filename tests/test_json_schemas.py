"""Every command's `--json` output against its JSON Schema (docs/formats/schemas/), and the
schemas against the commands: each command with --json has a schema, each schema names the
`schema` and `schema_version` its command prints, and docs/formats/report.md points at each."""

from __future__ import annotations

import argparse
import copy
import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from accel_sim.cli.main import main
from accel_sim.commands.parser import build_parser as _parser
from accel_sim.report.json_report import SCHEMA_VERSION
from conftest import REPO

SCHEMA_DIR = REPO / "docs" / "formats" / "schemas"
SCHEMAS = {p.name.removesuffix(".schema.json"): json.loads(p.read_text(encoding="utf-8"))
           for p in sorted(SCHEMA_DIR.glob("*.schema.json"))}
REGISTRY = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in SCHEMAS.values()])
LISTS = {"devices", "models", "systems"}  # bare arrays, kept as they were (report.md, Versioning)


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name], registry=REGISTRY)


def _errors(name: str, data) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(name).iter_errors(data)]


def _run(capsys, *argv: str, code: int = 0):
    capsys.readouterr()
    assert main(list(argv)) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


# (schema, argv): small inputs that still reach the optional parts (training facts, MoE facts,
# a capture without model_info, a device that cannot serve, a plan sweep).
RUNS = {
    "simulate prefill": ("simulate", ["simulate", "--model", "gpt2", "--seq", "128", "--device", "h100", "--json"]),
    "simulate train": ("simulate", ["simulate", "--model", "gpt2", "--phase", "train", "--seq", "128", "--json"]),
    "simulate decode moe": ("simulate", ["simulate", "--model", "mixtral-8x7b", "--phase", "decode", "--batch", "4",
                                         "--context", "512", "--device", "mi300x", "--json", "--no-ops"]),
    "simulate graph file": ("simulate", ["simulate", "{graph}", "--device", "a100", "--fuse", "--json"]),
    "compare": ("compare", ["compare", "--model", "gpt2", "--seq", "128", "--devices", "v100,h100", "--json"]),
    "devices": ("devices", ["devices", "--json"]),
    "models": ("models", ["models", "--json"]),
    "systems": ("systems", ["systems", "--json"]),
    "stacks": ("stacks", ["stacks", "--json"]),
    "train": ("train", ["train", "--model", "gpt2", "--system", "dgx-h100", "--gpus", "8", "--tp", "2", "--pp", "2",
                        "--dp", "2", "--sp", "--global-batch", "16", "--seq", "1024", "--json"]),
    "plan": ("plan", ["plan", "--model", "gpt2", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "64",
                      "--seq", "1024", "--top", "3", "--json"]),
    "plan sweep": ("plan", ["plan", "--model", "gpt2", "--system", "dgx-h100,dgx-a100", "--gpus", "8", "--global-batch",
                            "64", "--seq", "1024", "--top", "1", "--json"]),
    "serve": ("serve", ["serve", "--model", "gpt2", "--device", "h100", "--qps", "10", "--requests", "50",
                        "--input-len", "128", "--output-len", "16", "--json"]),
    "serve one device cannot": ("serve", ["serve", "--model", "llama-3-8b", "--devices", "v100,h100", "--qps", "5",
                                          "--requests", "20", "--input-len", "128", "--output-len", "8",
                                          "--slo-ttft-p99", "500ms", "--json"]),
    "serve-plan": ("serve-plan", ["serve-plan", "--model", "llama-3-8b", "--devices", "h100,v100", "--qps", "10",
                                  "--input-len", "512", "--output-len", "64", "--slo-tpot-p99", "40ms", "--requests", "100",
                                  "--tp", "1", "--pp", "1", "--max-seqs", "64", "--json"]),
    "kernel matmul": ("kernel", ["kernel", "matmul", "--m", "1024", "--n", "1024", "--k", "1024", "--json"]),
    "kernel attention": ("kernel", ["kernel", "attention", "--heads", "8", "--seq-q", "512", "--head-dim", "64",
                                    "--causal", "--backward", "--forward", "--json"]),
    "kernel memory": ("kernel", ["kernel", "memory", "--op", "add", "--elements", "1e6", "--json"]),
    "collective": ("collective", ["kernel", "allreduce", "--bytes", "1G", "--gpus", "16", "--system", "dgx-h100", "--json"]),
    "fit": ("fit", ["fit", "--model", "gpt2", "--devices", "v100,h100", "--axis", "batch", "--seq", "128", "--max",
                    "64", "--json"]),
    "validate": ("validate", ["validate", "--json"]),
    "sweep device": ("sweep", ["sweep", "--model", "gpt2", "--seq", "128", "--devices", "v100,h100", "--vary",
                               "memory_bandwidth_gbs=1000,2000", "--json"]),
    "sweep graph file": ("sweep", ["sweep", "{graph}", "--vary", "memory_gb=0.5,80", "--json"]),
    "sweep grid": ("sweep-grid", ["sweep", "--grid", "{grid}", "--out", "{grid}.csv", "--workers", "1", "--json"]),
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict:
    """Cache of each RUNS entry's parsed output (each command runs once per module), and the
    hand-built graph file "simulate graph file" reads."""
    from conftest import mlp_graph

    graph = tmp_path_factory.mktemp("graph") / "mlp.json"
    graph.write_text(json.dumps(mlp_graph()))
    grid = graph.parent / "grid.yaml"
    grid.write_text("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {batch: [1, 2], device: [h100, v100]}\n")
    return {"{graph}": str(graph), "{grid}": str(grid)}


def _output(outputs: dict, capsys, case: str):
    if case not in outputs:
        outputs[case] = _run(capsys, *[a.replace("{graph}", outputs["{graph}"]).replace("{grid}", outputs["{grid}"])
                                       for a in RUNS[case][1]])
    return outputs[case]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_files_are_valid_draft_2020_12(name):
    schema = SCHEMAS[name]
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    # The $id carries the version: a consumer can pin the one it was written against.
    assert schema["$id"] == f"urn:accel-sim:schema:{name}:{SCHEMA_VERSION}"
    assert schema["title"].startswith("accel-sim ") and "--json" in schema["title"]
    assert "Versioning" in schema["description"]


@pytest.mark.parametrize("case", sorted(RUNS))
def test_output_matches_its_schema(outputs, capsys, case):
    name = RUNS[case][0]
    assert _errors(name, _output(outputs, capsys, case)) == []


def test_optional_parts_were_reached(outputs, capsys):
    """The runs above exercise the schema's optional and nullable parts, not only the common path."""
    assert "ops" in _output(outputs, capsys, "simulate prefill")
    assert _output(outputs, capsys, "simulate train")["model_info"]["recompute"] == "none"
    assert _output(outputs, capsys, "simulate decode moe")["model_info"]["moe"]["top_k"] == 2
    captured = _output(outputs, capsys, "simulate graph file")
    assert captured["model_info"] is None and captured["tokens_per_s"] is None and captured["fused"] is True
    assert isinstance(_output(outputs, capsys, "plan sweep"), list)
    results = _output(outputs, capsys, "serve one device cannot")["results"]
    assert [("error" in r) for r in results] == [False, True]  # h100 serves; 8B bf16 weights exceed a V100
    assert _output(outputs, capsys, "serve one device cannot")["slo"]["ttft_p99_s"] == 0.5
    swept = _output(outputs, capsys, "sweep graph file")  # 0.5 GiB is under the runtime's own reserve
    assert swept["workload"] == {"graph": "mlp"} and [p["fits"] for p in swept["points"]] == [False, True]
    assert swept["points"][0]["tokens_per_s"] is None


def _schema_consts(node) -> set:
    """Every `const` under a property named `schema` in a schema document."""
    found = set()
    if isinstance(node, dict):
        props = node.get("properties", {})
        if "const" in props.get("schema", {}):
            found.add(props["schema"]["const"])
        for v in node.values():
            found |= _schema_consts(v)
    elif isinstance(node, list):
        for v in node:
            found |= _schema_consts(v)
    return found


@pytest.mark.parametrize("case", sorted(RUNS))
def test_schema_names_what_the_command_prints(outputs, capsys, case):
    name = RUNS[case][0]
    out = _output(outputs, capsys, case)
    if name in LISTS:
        assert isinstance(out, list) and out and SCHEMAS[name]["type"] == "array"
        assert not any("schema" in item for item in out)
        assert _schema_consts(SCHEMAS[name]) == set()
        return
    objects = out if isinstance(out, list) else [out]
    for obj in objects:
        assert obj["schema"] == f"accel-sim/{name}" and obj["schema_version"] == SCHEMA_VERSION
    # compare embeds simulate's object (by $ref), so its file names only its own.
    assert _schema_consts(SCHEMAS[name]) == {f"accel-sim/{name}"}


def test_check_output_and_its_baseline_match_their_schemas(tmp_path, capsys):
    base, model = tmp_path / "baseline.json", tmp_path / "gpt2.json"
    config = json.loads((REPO / "python" / "accel_sim" / "data" / "models" / "gpt2.json").read_text())
    model.write_text(json.dumps(config))
    args = ["check", "--model", str(model), "--seq", "128", "--device", "h100", "--baseline", str(base),
            "--max-memory-regression", "100%"]
    capsys.readouterr()
    assert main(args + ["--write-baseline"]) == 0
    assert _errors("simulate", json.loads(base.read_text())) == []
    passed = _run(capsys, *args, "--json")
    assert _errors("check", passed) == [] and passed["passed"] is True
    # The model grown from 12 layers to 24: the layers' 12 x 7.1 M parameters are added to its
    # 124 M (+68% of the fp32 weights that make nearly all of peak memory, under the 100% limit),
    # and their GEMMs' 2 x 128 x 12 x 768^2 FLOPs each to the LM head's 2 x 128 x 768 x 50257
    # (the prefill's time grows by more than half; exit 1, and the JSON still follows the schema).
    model.write_text(json.dumps({**config, "n_layer": 24}))
    failed = _run(capsys, *args, "--json", code=1)
    assert _errors("check", failed) == [] and failed["passed"] is False
    latency, memory = failed["checks"]
    assert latency["metric"] == "latency_s" and latency["change_fraction"] > 0.5 and latency["exceeded"]
    assert memory["metric"] == "peak_memory_bytes" and 0.5 < memory["change_fraction"] < 1 and not memory["exceeded"]


@pytest.mark.torch
def test_capture_output_matches_its_schema(tmp_path, capsys):
    pytest.importorskip("torch")
    script = tmp_path / "tiny.py"
    script.write_text("import torch\n\n\ndef get_model():\n"
                      "    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU()), (torch.randn(4, 16),)\n")
    out = _run(capsys, "capture", str(script), "-o", str(tmp_path / "tiny.json"), "--json")
    assert _errors("capture", out) == []
    assert out["schema"] == "accel-sim/capture" and out["num_nodes"] >= 2  # addmm (or mm + add) and relu


def test_schemas_catch_regressions(outputs, capsys):
    """Tight where it matters: a missing key, a retyped number, a renamed marker or an unknown enum
    value fails; a new key does not (additionalProperties stays open)."""
    def broken(name, data, edit) -> list[str]:
        d = copy.deepcopy(data)
        edit(d)
        return _errors(name, d)

    sim = _output(outputs, capsys, "simulate prefill")
    assert broken("simulate", sim, lambda d: d.pop("latency_s"))
    assert broken("simulate", sim, lambda d: d.update(peak_memory_bytes="1.2 GB"))
    assert broken("simulate", sim, lambda d: d["device"].pop("memory_bytes"))
    assert broken("simulate", sim, lambda d: d["ops"][0].update(bound="fast"))
    assert broken("simulate", sim, lambda d: d["breakdown"]["op"][0].update(time_s=None))
    assert broken("simulate", sim, lambda d: d.update(schema_version=SCHEMA_VERSION + 1))
    assert broken("simulate", sim, lambda d: d["model_info"].update(batch=0))
    assert broken("simulate", sim, lambda d: d.update(a_new_key={"anything": 1})) == []
    serve = _output(outputs, capsys, "serve")
    assert broken("serve", serve, lambda d: d.update(version=d.pop("schema_version")))
    assert broken("serve", serve, lambda d: d["results"][0]["ttft_s"].pop("p99"))
    assert broken("serve", serve, lambda d: d["results"][0].update(timeline=[{"t_s": 0.0}] * 201))
    comp = _output(outputs, capsys, "compare")
    assert broken("compare", comp, lambda d: d["devices"][0].pop("verdict"))
    assert broken("compare", comp, lambda d: d["devices"][1].pop("latency_s"))  # simulate's object, by $ref
    plan = _output(outputs, capsys, "plan")
    assert broken("plan", plan, lambda d: d["best"][0]["layout"].update(zero=4))  # train's layout, by $ref
    assert broken("plan", plan, lambda d: d.pop("pruned"))
    devices = _output(outputs, capsys, "devices")
    assert broken("devices", devices, lambda d: d[0]["peak_tflops"].update(bf16="fast"))


def _json_commands() -> set[str]:
    """Schema names of every command (and kernel kind) that accepts --json."""
    def subparsers(p):
        return next(a.choices for a in p._actions if isinstance(a, argparse._SubParsersAction))

    def has_json(p):
        return any("--json" in a.option_strings for a in p._actions)

    from accel_sim.commands.systems import COLLECTIVES

    names = set()
    for command, p in subparsers(_parser()).items():
        if command == "kernel":
            names |= {"collective" if kind in COLLECTIVES else "kernel"
                      for kind, k in subparsers(p).items() if has_json(k)}
        elif has_json(p):
            names.add(command)
            if any("--grid" in a.option_strings for a in p._actions):
                names.add(f"{command}-grid")  # sweep --grid prints its own object
    return names


def test_every_json_command_has_a_schema_and_a_run():
    assert _json_commands() == set(SCHEMAS)
    assert {name for name, _ in RUNS.values()} | {"check", "capture"} == set(SCHEMAS)


def test_report_md_points_at_every_schema_file():
    text = (REPO / "docs" / "formats" / "report.md").read_text(encoding="utf-8")
    missing = [f"schemas/{name}.schema.json" for name in SCHEMAS if f"schemas/{name}.schema.json" not in text]
    assert missing == []
    assert "## Versioning" in text
