"""Malformed device, system, model-config and graph files end in one line on stderr naming the
file, the key and what was expected, with exit status 2: never a traceback, never a figure
computed from an infinity, a string or an integer the core cannot hold."""

from __future__ import annotations

import copy
import re
import json
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from accel_sim.cli.main import main
from conftest import mlp_graph

DATA = Path(str(files("accel_sim") / "data"))


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-sim: error: ") and "Traceback" not in err, err
    return lines[0]


def _device(tmp_path: Path, edit, name: str = "fuzzchip") -> Path:
    data = yaml.safe_load((DATA / "devices" / "h100_sxm.yaml").read_text())
    data["id"], data["aliases"] = name, []
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d["kernel"].update(gemm_tile_overhead_us=float("inf")), "'gemm_tile_overhead_us' must be a finite number"),
    (lambda d: d.update(memory_bandwidth_gbs=float("nan")), "'memory_bandwidth_gbs' must be a finite number"),
    (lambda d: d.update(memory_gib="eighty"), "'memory_gib' must be a number, got 'eighty'"),
    (lambda d: d.update(memory_gib=[80]), "'memory_gib' must be a number, got a list"),
    (lambda d: d.update(memory_gib=True), "'memory_gib' must be a number, got True"),
    (lambda d: d.update(memory_gib=0), "'memory_gib' must be at least 9.53674e-07"),
    (lambda d: d.update(memory_gib=1e-320), "'memory_gib' must be at least 9.53674e-07"),  # a denormal
    (lambda d: d["peak_tflops"].update(bf16=1e-300), "'bf16' must be 0 (no such unit) or at least 1e-09 TFLOP/s"),
    # A --clock-mhz override divides by this clock: its peaks became infinite.
    (lambda d: d.update(clock_mhz=1e-300), "'clock_mhz' must be 0 (not known) or at least 0.001 MHz (a kilohertz)"),
    (lambda d: d["kernel"].update(matmul_efficiency=1e-300), "'kernel.matmul_efficiency' must be a fraction in [1e-06, 1]"),
    (lambda d: d.update(memory_gib=1e300), "'memory_gib' must be at most"),
    (lambda d: d.update(compute_units=2**63), "'compute_units' must be an integer in"),
    (lambda d: d.update(compute_units=132.5), "'compute_units' must be an integer"),
    (lambda d: d["peak_tflops"].update(bf16=float("inf")), "peak_tflops: 'bf16' must be a finite number"),
    (lambda d: d["peak_tflops"].update(bf16=-1), "peak_tflops: 'bf16' must be at least 0"),
    (lambda d: d.update(name=17), "'name' must be a string, got 17"),
])
def test_malformed_device_values(tmp_path, capsys, edit, expected):
    path = _device(tmp_path, edit)
    line = _one_line_error(capsys, ["simulate", "--model", "llama-3-8b", "--device-file", str(path), "--device", "fuzzchip"])
    assert str(path) in line and expected in line, line
    line = _one_line_error(capsys, ["simulate", "--model", "llama-3-8b", "--device-file", str(path), "--device", "fuzzchip",
                                    "--clock-mhz", "1000"])
    assert str(path) in line and expected in line, line


def test_a_clock_of_zero_is_not_known(tmp_path, capsys):
    # clock_mhz 0 is a clock not given: the run goes on, and only an override is refused.
    path = _device(tmp_path, lambda d: d.update(clock_mhz=0))
    assert main(["simulate", "--model", "gpt2", "--seq", "128", "--device-file", str(path), "--device", "fuzzchip",
                 "--json", "--no-ops"]) == 0
    capsys.readouterr()
    line = _one_line_error(capsys, ["simulate", "--model", "gpt2", "--seq", "128", "--device-file", str(path),
                                    "--device", "fuzzchip", "--clock-mhz", "1000"])
    assert "fuzzchip's file gives no clock_mhz" in line, line


@pytest.mark.parametrize("command,text,expected", [
    # YAML keeps the last of a key given twice: the device ran with 96 GiB, not the 80 it also said.
    (["devices", "--device-file"], "id: fuzzchip\nmemory_gib: 80\nmemory_gib: 96\n",
     ":3: 'memory_gib' is given twice in the same mapping"),
    (["systems", "--system-file"], "id: fuzzsys\nscaleup:\n  gpus: 8\n  gpus: 72\n",
     ":4: 'gpus' is given twice in the same mapping"),
    (["devices", "--device-file"], "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 20)) + "  " * 20 + "v: 1\n",
     ":16: nested more than 16 levels deep"),
])
def test_device_and_system_files_are_read_as_strictly_as_grid_files(tmp_path, capsys, command, text, expected):
    path = tmp_path / ("fuzzchip.yaml" if command[0] == "devices" else "fuzzsys.yaml")
    path.write_text(text)
    assert _one_line_error(capsys, [*command, str(path)]) == f"accel-sim: error: {path}{expected}"


def test_non_utf8_device_file(tmp_path, capsys):
    path = tmp_path / "fuzzchip.yaml"
    path.write_bytes(b"id: fuzzchip\nname: \xff\xfe chip\n")
    line = _one_line_error(capsys, ["devices", "--device-file", str(path)])
    assert line == f"accel-sim: error: {path}: line 2: byte 0xff is not UTF-8 text (a device file is UTF-8)"


def _system(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load((DATA / "systems" / "dgx_h100.yaml").read_text())
    edit(data)
    path = tmp_path / "fuzzsys.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda d: d.update(measured=["abc"]), "'measured[0]' must be a mapping"),
    (lambda d: d["measured"][0].pop("busbw_gbs"), "measured[0]: missing 'busbw_gbs'"),
    (lambda d: d["measured"][0].update(busbw_gbs="fast"), "measured[0]: 'busbw_gbs' must be a number"),
    (lambda d: d["measured"][0].update(gpus=2**63), "measured[0]: 'gpus' must be an integer in"),
    (lambda d: d.update(measured={"collective": "all_reduce"}), "'measured' must be a list"),
    (lambda d: d.update(gpus_per_node=2**63), "'gpus_per_node' must be an integer in [1, 10000000], got 9223372036854775808"),
    (lambda d: d["scaleup"].update(bandwidth_gbs=float("inf")), "scaleup: 'bandwidth_gbs' must be a finite number"),
    (lambda d: d["scaleup"].update(in_network_reduction="yes"), "'in_network_reduction' must be true or false"),
    (lambda d: d["scaleout"].update(nics_per_gpu=0), "'nics_per_gpu' must be at least 1e-06"),
    (lambda d: d["scaleup"].update(bandwidth_gbs=1e-320), "scaleup: 'bandwidth_gbs' must be at least 1e-06"),
    (lambda d: d.update(scaleup=[1, 2]), "'scaleup' must be a mapping"),
    (lambda d: (d.update(collective_efficiency={"scaleup": "high"}),
                d["sources"].update(collective_efficiency="test")), "collective_efficiency: 'scaleup' must be a number"),
])
def test_malformed_system_values(tmp_path, capsys, edit, expected):
    path = _system(tmp_path, edit)
    line = _one_line_error(capsys, ["kernel", "allreduce", "--bytes", "1G", "--gpus", "16", "--system", str(path)])
    assert str(path) in line and expected in line, line


def _config(tmp_path: Path, edit, model: str = "llama-3-8b.json") -> Path:
    data = json.loads((DATA / "models" / model).read_text())
    edit(data)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda c: c.update(intermediate_size=2**63), "'intermediate_size' must be an integer in [0, 2147483647]"),
    (lambda c: c.update(hidden_act=["silu"]), "hidden_act ['silu'] is not supported"),
    (lambda c: c.update(hidden_size="4096"), "'hidden_size' must be an integer, got '4096'"),
    (lambda c: c.update(num_hidden_layers=True), "'num_hidden_layers' must be an integer, got True"),
    (lambda c: c.update(tie_word_embeddings="false"), "'tie_word_embeddings' must be true or false, got 'false'"),
    (lambda c: c.update(attention_dropout="0.1"), "'attention_dropout' must be a number"),
    (lambda c: c.update(attention_dropout=1.0), "'attention_dropout' must be a probability below 1"),
    (lambda c: c.update(quantization_config=[4]), "'quantization_config' must be a mapping"),
    (lambda c: c.update(architectures="LlamaForCausalLM"), "'architectures' must be a list of class names"),
    (lambda c: c.update(torch_dtype=16), "torch_dtype 16 is not supported"),
])
def test_malformed_model_configs(tmp_path, capsys, edit, expected):
    path = _config(tmp_path, edit)
    line = _one_line_error(capsys, ["simulate", "--model", str(path), "--device", "h100", "--seq", "128"])
    assert str(path) in line and expected in line, line


def test_malformed_vit_image_size(tmp_path, capsys):
    path = _config(tmp_path, lambda c: c.update(image_size="abc"), "vit-era5.json")
    line = _one_line_error(capsys, ["simulate", "--model", str(path), "--device", "h100"])
    assert line.endswith(f"{path}: 'image_size' must be an integer or [height, width], got 'abc'")


def test_config_json_without_json_numbers(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text((DATA / "models" / "llama-3-8b.json").read_text().replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'))
    line = _one_line_error(capsys, ["simulate", "--model", str(path), "--device", "h100"])
    assert line == f"accel-sim: error: {path}: not a JSON config (NaN is not a JSON number)"


def _graph(tmp_path: Path, edit) -> Path:
    graph = copy.deepcopy(mlp_graph())
    edit(graph)
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda g: g["tensors"][3].update(shape=[1e30, 4096]), "tensors[3]: 'shape[0]' must be an integer, got 1e+30"),
    (lambda g: g["tensors"][3].update(shape=[2**40, 2**40]), "tensors[3]: shape [1099511627776, 1099511627776] of fp32 is beyond 2^62 bytes"),
    (lambda g: g["tensors"][3].update(shape=[2**63, 1]), "tensors[3]: 'shape[0]' must be an integer in"),
    (lambda g: g["tensors"][3].update(shape="512x4096"), "tensors[3]: 'shape' must be a list"),
    (lambda g: g["tensors"][3].update(dtype="fp12"), "tensors[3]: unknown dtype"),
    (lambda g: g["storages"][3].update(size_bytes=-5), "storages[3]: 'size_bytes' must be an integer in"),
    (lambda g: g["storages"][3].update(kind=7), "storages[3]: unknown kind 7"),
    (lambda g: g["storages"][3].update(released_after=2**64), "storages[3]: 'released_after' must be an integer in"),
    (lambda g: g["nodes"][0].update(inputs=[0, 99]), "nodes[0]: 'inputs[1]' is tensor 99, but the graph has 6"),
    (lambda g: g["nodes"][0].update(op=["mm"]), "nodes[0]: 'op' must be a string"),
    (lambda g: g["nodes"][0].update(attrs={"alpha": 2**70}), "nodes[0]: 'attrs.alpha' must be an integer in"),
    (lambda g: g["nodes"][0].update(attrs={"alpha": {"x": 1}}), "nodes[0]: 'attrs.alpha' must be a bool, int, float, string or list of ints"),
    (lambda g: g.update(storages={"0": 1}), "'storages' must be a list"),
    (lambda g: g.update(version=True), "graph format version True is not supported"),
    (lambda g: g.update(metadata=1.5), "'metadata' must be a mapping"),
])
def test_malformed_graph_files(tmp_path, capsys, edit, expected):
    path = _graph(tmp_path, edit)
    line = _one_line_error(capsys, ["simulate", str(path), "--device", "a100"])
    assert str(path) in line and expected in line, line


def test_graph_file_with_an_infinity(tmp_path, capsys):
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(mlp_graph()).replace('"size_bytes": 2097152, "kind": "input"',
                                                     '"size_bytes": 2097152, "kind": "input", "released_after": -Infinity'))
    line = _one_line_error(capsys, ["simulate", str(path), "--device", "a100"])
    assert line == f"accel-sim: error: {path}: not a JSON graph file (-Infinity is not a JSON number)"


@pytest.mark.parametrize("argv,expected", [
    (["simulate", "--model", "gpt2", "--batch", str(2**70)],
     "argument --batch: expected a whole number from 1 to 2^63 - 1, got 1180591620717411303424"),
    (["simulate", "--model", "gpt2", "--clock-mhz", "nan"], "argument --clock-mhz: expected a clock in MHz from 0.001 to 100,000, got nan"),
    # A kernel's time scales by the file's clock over this one: 1e-300 MHz made it 2e306 s.
    (["simulate", "--model", "gpt2", "--clock-mhz", "1e-300"], "argument --clock-mhz: expected a clock in MHz from 0.001"),
    (["kernel", "matmul", "--m", "8", "--n", "8", "--k", "8", "--clock-mhz", "1e-300"], "argument --clock-mhz: expected a clock"),
    (["simulate", "--model", "gpt2", "--batch", "x"], "argument --batch: invalid int value: 'x'"),
])
def test_command_line_numbers(capsys, argv, expected):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors exit from inside parse_args
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


@pytest.mark.parametrize("argv,expected", [
    (["serve", "--model", "llama3-8b", "--requests", str(10**12)], "argument --requests: expected a whole number from 1 to 10,000,000"),
    (["serve", "--model", "llama3-8b", "--replicas", "100000"], "argument --replicas: expected a whole number from 1 to 10,000"),
])
def test_serving_work_is_bounded(capsys, argv, expected):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_a_model_of_too_many_layers_is_refused_before_building(tmp_path, capsys):
    path = _config(tmp_path, lambda c: c.update(num_hidden_layers=1_000_000))
    line = _one_line_error(capsys, ["simulate", "--model", str(path), "--device", "h100", "--seq", "128"])
    assert "1000000 layers are more than the 16384 a graph is built for" in line


def test_running_out_of_memory_is_one_line(monkeypatch, capsys):
    import accel_sim.cli.main as cli

    def exhausted(args):
        raise MemoryError

    monkeypatch.setitem(cli._COMMANDS, "devices", exhausted)
    line = _one_line_error(capsys, ["devices"])
    assert line.startswith("accel-sim: error: devices ran out of memory")


def test_no_parsed_number_reaches_a_command_unchecked():
    """The backstop behind every flag's own range: whatever a parser let through, a non-finite
    float or an int beyond int64 stops the command."""
    import argparse

    from accel_sim.commands.flags import check_numbers
    from accel_sim.errors import UsageError

    check_numbers(argparse.Namespace(qps=1.5, batch=2**63 - 1, values=[1, 2.0]))
    for bad, expected in (({"qps": float("inf")}, "--qps must be a finite number, got inf"),
                          ({"max_seqs": 2**63}, "--max-seqs is out of range (19 digits; at most 2^63 - 1)"),
                          ({"values": [1.0, float("nan")]}, "--values must be a finite number, got nan")):
        with pytest.raises(UsageError, match=re.escape(expected)):
            check_numbers(argparse.Namespace(**bad))


def test_swept_device_values_keep_the_device_files_bounds(capsys):
    # A peak of 1e-300 TFLOP/s gave a finite but absurd 8e298 s latency.
    line = _one_line_error(capsys, ["sweep", "--model", "llama3-8b", "--device", "h100", "--vary", "peak_tflops=1e-300,1",
                                    "--phase", "decode"])
    assert "peak_tflops must be in [1e-09, 1e+06]" in line and "got 1e-300" in line
    line = _one_line_error(capsys, ["sweep", "--model", "llama3-8b", "--device", "h100", "--vary",
                                    "memory_bandwidth_gbs=1e-9,2000", "--phase", "decode"])
    assert "memory_bandwidth_gbs must be in [1e-06, 1e+06]" in line
