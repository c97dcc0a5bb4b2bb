#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "accelsim/error.h"
#include "accelsim/graph.h"
#include "accelsim/op_catalog.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {
namespace {

// A Python attribute value (bool, int, float, str or a sequence of ints) as an AttrValue.
AttrValue to_attr(const std::string& op, const std::string& name, nb::handle v) {
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v);
  if (nb::isinstance<nb::int_>(v)) return nb::cast<int64_t>(v);
  if (nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    std::vector<int64_t> values;
    for (nb::handle item : v) {
      if (!nb::isinstance<nb::int_>(item) || nb::isinstance<nb::bool_>(item)) {
        throw ConfigError("op '" + op + "': attribute '" + name +
                          "' must be a list of ints");
      }
      values.push_back(nb::cast<int64_t>(item));
    }
    return values;
  }
  throw ConfigError("op '" + op + "': attribute '" + name +
                    "' must be a bool, int, float, string or list of ints");
}

nb::object from_attr(const AttrValue& v) {
  return std::visit([](const auto& x) -> nb::object { return nb::cast(x); }, v);
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::enum_<DType>(m, "DType")
      .value("fp64", DType::fp64)
      .value("fp32", DType::fp32)
      .value("fp16", DType::fp16)
      .value("bf16", DType::bf16)
      .value("fp8_e4m3", DType::fp8_e4m3)
      .value("fp8_e5m2", DType::fp8_e5m2)
      .value("int64", DType::int64)
      .value("int32", DType::int32)
      .value("int16", DType::int16)
      .value("int8", DType::int8)
      .value("uint8", DType::uint8)
      .value("boolean", DType::boolean)
      .value("complex64", DType::complex64)
      .value("complex128", DType::complex128)
      .value("fp4_e2m1", DType::fp4_e2m1);
  m.def("parse_dtype", &parse_dtype, nb::arg("name"));
  m.def("dtype_name", [](DType d) { return std::string(dtype_name(d)); });
  m.def("dtype_size_bytes", [](DType d) { return size_bytes(d); });

  nb::enum_<StorageKind>(m, "StorageKind")
      .value("parameter", StorageKind::parameter)
      .value("buffer", StorageKind::buffer)
      .value("input", StorageKind::input)
      .value("activation", StorageKind::activation)
      .value("gradient", StorageKind::gradient)
      .value("optimizer_state", StorageKind::optimizer_state);

  nb::enum_<Pass>(m, "Pass")
      .value("forward", Pass::forward)
      .value("backward", Pass::backward)
      .value("optimizer", Pass::optimizer);
  m.def("parse_pass", &parse_pass, nb::arg("name"));

  nb::class_<Storage>(m, "Storage")
      .def_ro("size_bytes", &Storage::size_bytes)
      .def_ro("kind", &Storage::kind)
      .def_ro("released_after", &Storage::released_after)
      .def_ro("frozen", &Storage::frozen);

  nb::class_<TensorMeta>(m, "TensorMeta")
      .def_ro("shape", &TensorMeta::shape)
      .def_ro("strides", &TensorMeta::strides)
      .def_ro("storage_offset", &TensorMeta::storage_offset)
      .def_ro("dtype", &TensorMeta::dtype)
      .def_ro("storage", &TensorMeta::storage)
      .def_ro("name", &TensorMeta::name)
      .def("numel", &TensorMeta::numel)
      .def("logical_bytes", &TensorMeta::logical_bytes)
      .def("accessed_bytes", &TensorMeta::accessed_bytes);

  nb::class_<Node>(m, "Node")
      .def_ro("op", &Node::op)
      .def_ro("overload", &Node::overload)
      .def_ro("inputs", &Node::inputs)
      .def_ro("outputs", &Node::outputs)
      .def_ro("module_path", &Node::module_path)
      .def_ro("module_type", &Node::module_type)
      .def_ro("source", &Node::source)
      .def_prop_ro("pass_name", [](const Node& n) { return std::string(pass_name(n.pass)); })
      .def_prop_ro("attrs", [](const Node& n) {
        nb::dict d;
        for (const Attr& a : n.attrs) d[a.name.c_str()] = from_attr(a.value);
        return d;
      });

  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def_rw("name", &Graph::name)
      .def(
          "add_storage",
          [](Graph& g, int64_t size_bytes, StorageKind kind, NodeId released_after) {
            return g.add_storage(
                {.size_bytes = size_bytes, .kind = kind, .released_after = released_after});
          },
          nb::arg("size_bytes"), nb::arg("kind"), nb::arg("released_after") = kNoNode)
      .def(
          "add_tensor",
          [](Graph& g, StorageId storage, DType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides, int64_t offset, std::string name) {
            return g.add_tensor(TensorMeta{.shape = std::move(shape),
                                           .strides = std::move(strides),
                                           .storage_offset = offset,
                                           .dtype = dtype,
                                           .storage = storage,
                                           .name = std::move(name)});
          },
          nb::arg("storage"), nb::arg("dtype"), nb::arg("shape"), nb::arg("strides"),
          nb::arg("offset") = 0, nb::arg("name") = "")
      .def(
          "add_node",
          [](Graph& g, std::string op, std::string overload, std::vector<TensorId> inputs,
             std::vector<TensorId> outputs, nb::dict attrs, std::string module_path,
             std::string module_type, std::string source, Pass pass) {
            Node n{.op = std::move(op),
                   .overload = std::move(overload),
                   .inputs = std::move(inputs),
                   .outputs = std::move(outputs),
                   .module_path = std::move(module_path),
                   .module_type = std::move(module_type),
                   .source = std::move(source),
                   .pass = pass};
            for (auto [k, v] : attrs) {
              const std::string name = nb::cast<std::string>(k);
              n.attrs.push_back({name, to_attr(n.op, name, v)});
            }
            return g.add_node(std::move(n));
          },
          nb::arg("op"), nb::arg("overload"), nb::arg("inputs"), nb::arg("outputs"),
          nb::arg("attrs"), nb::arg("module_path") = "", nb::arg("module_type") = "",
          nb::arg("source") = "", nb::arg("pass_") = Pass::forward)
      .def("add_output", &Graph::add_output, nb::arg("tensor"))
      .def_prop_ro("num_storages", [](const Graph& g) { return g.storages().size(); })
      .def_prop_ro("num_tensors", [](const Graph& g) { return g.tensors().size(); })
      .def_prop_ro("num_nodes", [](const Graph& g) { return g.nodes().size(); })
      .def_prop_ro("outputs",
                   [](const Graph& g) {
                     return std::vector<TensorId>(g.outputs().begin(), g.outputs().end());
                   })
      .def("storage", &Graph::storage, nb::arg("id"), nb::rv_policy::copy)
      .def("tensor", &Graph::tensor, nb::arg("id"), nb::rv_policy::copy)
      .def("node", &Graph::node, nb::arg("id"), nb::rv_policy::copy);

  nb::enum_<OpClass>(m, "OpClass")
      .value("view", OpClass::view)
      .value("allocation", OpClass::allocation)
      .value("matmul", OpClass::matmul)
      .value("attention", OpClass::attention)
      .value("convolution", OpClass::convolution)
      .value("normalization", OpClass::normalization)
      .value("softmax", OpClass::softmax)
      .value("elementwise", OpClass::elementwise)
      .value("reduction", OpClass::reduction)
      .value("indexing", OpClass::indexing)
      .value("copy", OpClass::copy)
      .value("fill", OpClass::fill)
      .value("communication", OpClass::communication)
      .value("unknown", OpClass::unknown);

  nb::class_<OpCount>(m, "OpCount")
      .def_ro("flops", &OpCount::flops)
      .def_ro("masked_flops", &OpCount::masked_flops)
      .def_prop_ro("useful_flops", &OpCount::useful_flops)
      .def_ro("bytes_read", &OpCount::bytes_read)
      .def_ro("bytes_written", &OpCount::bytes_written)
      .def_ro("communication_bytes", &OpCount::communication_bytes)
      .def_prop_ro("bytes", &OpCount::bytes)
      .def_ro("op_class", &OpCount::op_class)
      .def_ro("compute_dtype", &OpCount::compute_dtype)
      .def_ro("launches_kernel", &OpCount::launches_kernel)
      .def_ro("known", &OpCount::known);

  m.def(
      "count_op",
      [](const Graph& g, NodeId node) { return count_op(g, g.node(node)); },
      nb::arg("graph"), nb::arg("node"));
  m.def("is_known_op", &is_known_op, nb::arg("op"));
  m.def("known_ops", &known_ops);
}

}  // namespace accelsim::bindings
