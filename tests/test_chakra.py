"""`simulate --chakra FILE`: the trace read back through protobuf's own parser, with message classes
built from Chakra's public schema (et_def.proto of https://github.com/mlcommons/chakra: the field
numbers and types of GlobalMetadata, Node and AttributeProto below are that file's), not by the
writer's encoder."""

from __future__ import annotations

import pytest

from conftest import run_cli

descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
from google.protobuf import descriptor_pool, message_factory  # noqa: E402

_F = descriptor_pb2.FieldDescriptorProto


def _classes():
    """GlobalMetadata, Node and AttributeProto of et_def.proto (package ChakraProtoMsg)."""
    f = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg", syntax="proto3")
    attr = f.message_type.add(name="AttributeProto")
    attr.oneof_decl.add(name="value")
    for name, number, kind in (("name", 1, _F.TYPE_STRING), ("doc_string", 2, _F.TYPE_STRING)):
        attr.field.add(name=name, number=number, type=kind, label=_F.LABEL_OPTIONAL)
    for name, number, kind in (("int32_val", 7, _F.TYPE_INT32), ("int64_val", 9, _F.TYPE_INT64),
                               ("uint64_val", 13, _F.TYPE_UINT64),
                               ("bool_val", 27, _F.TYPE_BOOL), ("string_val", 29, _F.TYPE_STRING)):
        attr.field.add(name=name, number=number, type=kind, label=_F.LABEL_OPTIONAL, oneof_index=0)
    meta = f.message_type.add(name="GlobalMetadata")
    meta.field.add(name="version", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    meta.field.add(name="attr", number=2, type=_F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.AttributeProto",
                   label=_F.LABEL_REPEATED)
    node = f.message_type.add(name="Node")
    for name, number, kind, label in (("id", 1, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
                                      ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL),
                                      ("type", 3, _F.TYPE_INT32, _F.LABEL_OPTIONAL),  # the NodeType enum's wire type
                                      ("ctrl_deps", 4, _F.TYPE_UINT64, _F.LABEL_REPEATED),
                                      ("data_deps", 5, _F.TYPE_UINT64, _F.LABEL_REPEATED),
                                      ("start_time_micros", 6, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
                                      ("duration_micros", 7, _F.TYPE_UINT64, _F.LABEL_OPTIONAL)):
        node.field.add(name=name, number=number, type=kind, label=label)
    node.field.add(name="attr", number=10, type=_F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.AttributeProto",
                   label=_F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata")),
            get(pool.FindMessageTypeByName("ChakraProtoMsg.Node")))


def _read(path) -> tuple:
    """Chakra's file layout: each message after its varint length (protolib.decodeMessage)."""
    from google.protobuf.internal.decoder import _DecodeVarint32

    metadata_class, node_class = _classes()
    data = path.read_bytes()
    messages, at = [], 0
    while at < len(data):
        size, at = _DecodeVarint32(data, at)
        messages.append(data[at:at + size])
        at += size
    meta = metadata_class()
    meta.ParseFromString(messages[0])
    nodes = []
    for m in messages[1:]:
        n = node_class()
        n.ParseFromString(m)
        nodes.append(n)
    return meta, nodes


def _attrs(node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def test_a_tensor_parallel_prefill_reads_back_as_chakra_nodes(tmp_path):
    """Llama-3-8B cut to 2 layers, TP 2, a prefill of 128 tokens: every all-reduce of the hidden
    states is 128 x 4,096 x 2 bytes = 1,048,576 bytes (comm_type ALL_REDUCE = 0); compute nodes chain
    in execution order, and every data dependency names an earlier node of the file."""
    import json

    from conftest import REPO

    config = json.loads((REPO / "python" / "accel_sim" / "data" / "models" / "llama-3-8b.json").read_text())
    model = tmp_path / "llama-2-layers.json"
    model.write_text(json.dumps({**config, "num_hidden_layers": 2}))
    path = tmp_path / "step.et"
    result = run_cli("simulate", "--model", str(model), "--device", "h100", "--seq", "128", "--tp", "2",
                     "--chakra", str(path), "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    meta, nodes = _read(path)
    assert meta.version == "0.0.4"
    compute = [n for n in nodes if n.type == 4]
    collectives = [n for n in nodes if n.type == 7]
    assert len(compute) + len(collectives) == len(nodes)
    # Two row-parallel outputs per layer (o_proj, down_proj) all-reduced, and the vocabulary-
    # parallel embedding's.
    hidden = [n for n in collectives if _attrs(n)["comm_size"] == 128 * 4096 * 2]
    assert len(hidden) == 2 * 2 + 1
    assert all(_attrs(n)["comm_type"] == 0 for n in hidden)
    seen = set()
    for n in nodes:
        assert all(d in seen for d in n.data_deps), n.name
        seen.add(n.id)
    for before, after in zip(compute, compute[1:]):
        assert list(after.ctrl_deps) == [before.id]
    assert all(_attrs(n)["is_cpu_op"] is False for n in nodes)
    assert sum(_attrs(n)["num_ops"] for n in compute) > 0


def test_a_training_step_carries_its_backward_collectives(tmp_path):
    """The same model's training step: the backward all-reduces the input gradients of the
    column-parallel projections (q/k/v and gate/up) of each layer and the embedding's, so the
    trace holds more collectives than the forward's five, each after the ops it waits for."""
    import json

    from conftest import REPO

    config = json.loads((REPO / "python" / "accel_sim" / "data" / "models" / "llama-3-8b.json").read_text())
    model = tmp_path / "llama-2-layers.json"
    model.write_text(json.dumps({**config, "num_hidden_layers": 2}))
    path = tmp_path / "train.et"
    result = run_cli("simulate", "--model", str(model), "--device", "h100", "--seq", "128", "--tp", "2",
                     "--phase", "train", "--chakra", str(path))
    assert result.returncode == 0, result.stderr
    assert "Chakra execution trace" in result.stdout
    _, nodes = _read(path)
    collectives = [n for n in nodes if n.type == 7]
    assert len(collectives) > 5
    seen = set()
    for n in nodes:
        assert all(d in seen for d in n.data_deps), n.name
        seen.add(n.id)


def test_a_pipelined_training_step_is_one_trace_per_stage(tmp_path):
    """GPT-2 on 4 H100s, PP 2 x DP 2, 8 sequences of 1,024 in micro-batches of 1: 4 micro-batches
    per data-parallel replica. Each stage's trace holds its 4 forwards and 4 backwards and the
    optimizer (compute), the 4 activations it sends or receives forward and the 4 gradients
    backward, each 1 x 1,024 x 768 bf16 = 1,572,864 bytes, and the distributed optimizer's
    reduce-scatter of the gradients and all-gather of the parameters over DP. The first stage
    holds 6 layers (12 e^2 + 13 e = 7,087,872 parameters each) and the token and position tables
    (50,257 x 768 + 1,024 x 768): 81,911,040 parameters, their bf16 gradients (megatron-core's
    grad_reduce_in_fp32 off) 163,822,080 bytes."""
    prefix = tmp_path / "gpt2"
    result = run_cli("train", "--model", "gpt2", "--system", "dgx_h100", "--gpus", "4", "--pp", "2", "--dp", "2",
                     "--global-batch", "8", "--seq", "1024", "--zero", "1", "--chakra", str(prefix))
    assert result.returncode == 0, result.stderr
    assert f"{prefix}.0.et" in result.stdout and f"{prefix}.1.et" in result.stdout
    for stage in (0, 1):
        meta, nodes = _read(tmp_path / f"gpt2.{stage}.et")
        assert {a.name: a.int64_val for a in meta.attr} == {"pipeline_stage": stage, "pipeline_stages": 2}
        by_type = {t: [n for n in nodes if n.type == t] for t in (4, 5, 6, 7)}
        assert len(by_type[4]) == 2 * 4 + 1
        assert len(by_type[5]) == 4 and len(by_type[6]) == 4
        for n in by_type[5] + by_type[6]:
            a = _attrs(n)
            assert a["comm_size"] == 1024 * 768 * 2
            assert {a["comm_src"], a["comm_dst"]} == {0, 1}
        kinds = sorted(_attrs(n)["comm_type"] for n in by_type[7])
        assert kinds == [2, 7]  # ALL_GATHER, REDUCE_SCATTER
        seen = set()
        for n in nodes:
            assert all(d in seen for d in list(n.data_deps) + list(n.ctrl_deps)), n.name
            seen.add(n.id)
    _, first = _read(tmp_path / "gpt2.0.et")
    scatter = next(n for n in first if n.type == 7 and _attrs(n)["comm_type"] == 7)
    assert _attrs(scatter)["comm_size"] == 2 * (6 * 7_087_872 + 50_257 * 768 + 1_024 * 768)
    # Stage 1's forwards each wait for the activations they receive.
    _, second = _read(tmp_path / "gpt2.1.et")
    recv = {n.id for n in second if n.type == 6 and n.name.startswith("recv forward")}
    forwards = [n for n in second if n.type == 4 and n.name.startswith("forward")]
    assert len(forwards) == 4 and all(set(n.data_deps) & recv for n in forwards)


def test_interleaved_stages_tag_every_message_apart(tmp_path):
    """PP 2 with 2 virtual stages: activations and gradients cross between the stages both ways
    (a chunk's forward wraps from stage 1 back to stage 0), so a message is told apart by its
    direction in comm_tag: every send has a distinct (src, dst, tag), and every receive on one
    stage matches exactly one send of the other."""
    prefix = tmp_path / "inter"
    result = run_cli("train", "--model", "gpt2", "--system", "dgx_h100", "--gpus", "2", "--pp", "2",
                     "--virtual-stages", "2", "--global-batch", "4", "--seq", "1024", "--chakra", str(prefix))
    assert result.returncode == 0, result.stderr
    sends, recvs = [], []
    for stage in (0, 1):
        _, nodes = _read(tmp_path / f"inter.{stage}.et")
        key = lambda n: (_attrs(n)["comm_src"], _attrs(n)["comm_dst"], _attrs(n)["comm_tag"])  # noqa: E731
        sends += [key(n) for n in nodes if n.type == 5]
        recvs += [key(n) for n in nodes if n.type == 6]
        # No data-parallel collectives with one data-parallel rank.
        assert not [n for n in nodes if n.type == 7]
    assert len(sends) == len(set(sends)) and sorted(sends) == sorted(recvs)
    # 4 micro-batches (global batch 4 of 1) x the 3 boundaries between the 4 model stages x
    # (activations forward, gradients backward).
    assert len(sends) == 4 * 3 * 2
