#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "accelsim/builder.h"
#include "accelsim/model.h"
#include "bindings.h"

namespace nb = nanobind;

namespace accelsim::bindings {

void bind_model(nb::module_& m) {
  nb::enum_<Activation>(m, "Activation")
      .value("gelu", Activation::gelu)
      .value("gelu_tanh", Activation::gelu_tanh)
      .value("gelu_new", Activation::gelu_new)
      .value("silu", Activation::silu)
      .value("relu", Activation::relu);
  nb::enum_<NormKind>(m, "NormKind")
      .value("rms_norm", NormKind::rms_norm)
      .value("layer_norm", NormKind::layer_norm);

  nb::class_<MoeSpec>(m, "MoeSpec")
      .def(nb::init<>())
      .def_rw("num_experts", &MoeSpec::num_experts)
      .def_rw("top_k", &MoeSpec::top_k)
      .def_rw("expert_ffn_size", &MoeSpec::expert_ffn_size)
      .def_rw("shared_ffn_size", &MoeSpec::shared_ffn_size)
      .def_rw("shared_expert_gate", &MoeSpec::shared_expert_gate)
      .def_rw("router_bias", &MoeSpec::router_bias)
      .def_rw("sigmoid_top_k", &MoeSpec::sigmoid_top_k)
      .def_rw("expert_bias", &MoeSpec::expert_bias)
      .def_rw("first_dense_layers", &MoeSpec::first_dense_layers)
      .def_rw("sparse_step", &MoeSpec::sparse_step)
      .def_rw("normalize_top_k", &MoeSpec::normalize_top_k)
      .def_rw("fp32_combine", &MoeSpec::fp32_combine)
      .def_rw("sigmoid_scoring", &MoeSpec::sigmoid_scoring)
      .def_rw("num_groups", &MoeSpec::num_groups)
      .def_rw("top_k_groups", &MoeSpec::top_k_groups);

  nb::class_<MlaSpec>(m, "MlaSpec")
      .def(nb::init<>())
      .def_rw("q_lora_rank", &MlaSpec::q_lora_rank)
      .def_rw("kv_lora_rank", &MlaSpec::kv_lora_rank)
      .def_rw("qk_nope_head_dim", &MlaSpec::qk_nope_head_dim)
      .def_rw("qk_rope_head_dim", &MlaSpec::qk_rope_head_dim)
      .def_rw("v_head_dim", &MlaSpec::v_head_dim);

  nb::class_<ModelSpec>(m, "ModelSpec")
      .def(nb::init<>())
      .def_rw("name", &ModelSpec::name)
      .def_rw("family", &ModelSpec::family)
      .def_rw("causal", &ModelSpec::causal)
      .def_rw("hidden_size", &ModelSpec::hidden_size)
      .def_rw("num_layers", &ModelSpec::num_layers)
      .def_rw("num_heads", &ModelSpec::num_heads)
      .def_rw("num_kv_heads", &ModelSpec::num_kv_heads)
      .def_rw("head_dim", &ModelSpec::head_dim)
      .def_rw("ffn_size", &ModelSpec::ffn_size)
      .def_rw("vocab_size", &ModelSpec::vocab_size)
      .def_rw("max_position_embeddings", &ModelSpec::max_position_embeddings)
      .def_rw("activation", &ModelSpec::activation)
      .def_rw("gated_ffn", &ModelSpec::gated_ffn)
      .def_rw("norm", &ModelSpec::norm)
      .def_rw("rotary", &ModelSpec::rotary)
      .def_rw("rotary_dim", &ModelSpec::rotary_dim)
      .def_rw("learned_positions", &ModelSpec::learned_positions)
      .def_rw("fused_qkv", &ModelSpec::fused_qkv)
      .def_rw("post_norm", &ModelSpec::post_norm)
      .def_rw("parallel_block", &ModelSpec::parallel_block)
      .def_rw("parallel_ffn_norm", &ModelSpec::parallel_ffn_norm)
      .def_rw("type_vocab_size", &ModelSpec::type_vocab_size)
      .def_rw("embedding_norm", &ModelSpec::embedding_norm)
      .def_rw("final_norm", &ModelSpec::final_norm)
      .def_rw("lm_head_transform", &ModelSpec::lm_head_transform)
      .def_rw("lm_head_bias", &ModelSpec::lm_head_bias)
      .def_rw("lm_head", &ModelSpec::lm_head)
      .def_rw("image_height", &ModelSpec::image_height)
      .def_rw("image_width", &ModelSpec::image_width)
      .def_rw("patch_size", &ModelSpec::patch_size)
      .def_rw("num_channels", &ModelSpec::num_channels)
      .def_rw("cls_token", &ModelSpec::cls_token)
      .def_rw("pooler", &ModelSpec::pooler)
      .def("image_tokens", &ModelSpec::image_tokens)
      .def_rw("tied_embeddings", &ModelSpec::tied_embeddings)
      .def_rw("qkv_bias", &ModelSpec::qkv_bias)
      .def_rw("output_bias", &ModelSpec::output_bias)
      .def_rw("ffn_bias", &ModelSpec::ffn_bias)
      .def_rw("qk_norm", &ModelSpec::qk_norm)
      .def_rw("sliding_window", &ModelSpec::sliding_window)
      .def_rw("sliding_window_period", &ModelSpec::sliding_window_period)
      .def_rw("attention_sinks", &ModelSpec::attention_sinks)
      .def_rw("hidden_dropout", &ModelSpec::hidden_dropout)
      .def_rw("embedding_dropout", &ModelSpec::embedding_dropout)
      .def_rw("attention_dropout", &ModelSpec::attention_dropout)
      .def_rw("moe", &ModelSpec::moe)
      .def_rw("mla", &ModelSpec::mla)
      .def_rw("mtp_layers", &ModelSpec::mtp_layers)
      .def_rw("sandwich_norms", &ModelSpec::sandwich_norms)
      .def_rw("embedding_multiplier", &ModelSpec::embedding_multiplier)
      .def_rw("attention_softcap", &ModelSpec::attention_softcap)
      .def_rw("final_logit_softcap", &ModelSpec::final_logit_softcap)
      .def_rw("nope_period", &ModelSpec::nope_period)
      .def_rw("attention_chunk", &ModelSpec::attention_chunk)
      .def_rw("qk_l2_norm", &ModelSpec::qk_l2_norm)
      .def_rw("weight_dtype", &ModelSpec::weight_dtype)
      .def_rw("activation_dtype", &ModelSpec::activation_dtype)
      .def_rw("kv_cache_dtype", &ModelSpec::kv_cache_dtype)
      .def_rw("int4_group_size", &ModelSpec::int4_group_size)
      .def_rw("fp4_weights", &ModelSpec::fp4_weights)
      .def("validate", &ModelSpec::validate);
  m.def("parameter_count", &parameter_count, nb::arg("model"));
  m.def("active_parameter_count", &active_parameter_count, nb::arg("model"));
  m.def("expected_experts_touched", &expected_experts_touched, nb::arg("num_experts"),
        nb::arg("top_k"), nb::arg("tokens"));
  m.def("kv_cache_bytes", &kv_cache_bytes, nb::arg("model"), nb::arg("batch"), nb::arg("tokens"));

  nb::enum_<Phase>(m, "Phase")
      .value("prefill", Phase::prefill)
      .value("decode", Phase::decode)
      .value("train", Phase::train);
  nb::enum_<Optimizer>(m, "Optimizer")
      .value("adamw", Optimizer::adamw)
      .value("adam", Optimizer::adam)
      .value("sgd", Optimizer::sgd)
      .value("none", Optimizer::none)
      .value("adafactor", Optimizer::adafactor)
      .value("adam8bit", Optimizer::adam8bit);
  nb::enum_<OptimizerImpl>(m, "OptimizerImpl")
      .value("fused", OptimizerImpl::fused)
      .value("foreach", OptimizerImpl::foreach)
      .value("for_loop", OptimizerImpl::for_loop);
  nb::enum_<KernelStyle>(m, "KernelStyle")
      .value("fused", KernelStyle::fused)
      .value("hf_eager", KernelStyle::hf_eager);
  nb::enum_<Recompute>(m, "Recompute")
      .value("none", Recompute::none)
      .value("selective", Recompute::selective)
      .value("full", Recompute::full)
      .value("selective_op", Recompute::selective_op);
  nb::enum_<Fp8Recipe>(m, "Fp8Recipe")
      .value("transformer_engine", Fp8Recipe::transformer_engine)
      .value("torchao", Fp8Recipe::torchao);
  nb::enum_<CrossEntropy>(m, "CrossEntropy")
      .value("upcast", CrossEntropy::upcast)
      .value("fused", CrossEntropy::fused)
      .value("vocab_parallel", CrossEntropy::vocab_parallel);
  nb::enum_<Fp4Format>(m, "Fp4Format")
      .value("none", Fp4Format::none)
      .value("nvfp4", Fp4Format::nvfp4)
      .value("mxfp4", Fp4Format::mxfp4);
  nb::enum_<MoeImpl>(m, "MoeImpl")
      .value("grouped", MoeImpl::grouped)
      .value("sequential", MoeImpl::sequential);
  nb::class_<BuildOptions>(m, "BuildOptions")
      .def(nb::init<>())
      .def_rw("phase", &BuildOptions::phase)
      .def_rw("batch", &BuildOptions::batch)
      .def_rw("seq", &BuildOptions::seq)
      .def_rw("context", &BuildOptions::context)
      .def_rw("kernels", &BuildOptions::kernels)
      .def_rw("tensor_parallel", &BuildOptions::tensor_parallel)
      .def_rw("sequence_parallel", &BuildOptions::sequence_parallel)
      .def_rw("expert_parallel", &BuildOptions::expert_parallel)
      .def_rw("expert_imbalance", &BuildOptions::expert_imbalance)
      .def_rw("context_parallel", &BuildOptions::context_parallel)
      .def_rw("summa", &BuildOptions::summa)
      .def_rw("moe_impl", &BuildOptions::moe_impl)
      .def_rw("optimizer", &BuildOptions::optimizer)
      .def_rw("optimizer_impl", &BuildOptions::optimizer_impl)
      .def_rw("master_weights", &BuildOptions::master_weights)
      .def_rw("recompute", &BuildOptions::recompute)
      .def_rw("recompute_interval", &BuildOptions::recompute_interval)
      .def_rw("eager_norm", &BuildOptions::eager_norm)
      .def_rw("fp8_recipe", &BuildOptions::fp8_recipe)
      .def_rw("eager_attention", &BuildOptions::eager_attention)
      .def_rw("persistent_gradients", &BuildOptions::persistent_gradients)
      .def_rw("fp8_gemms", &BuildOptions::fp8_gemms)
      .def_rw("fp4_gemms", &BuildOptions::fp4_gemms)
      .def_rw("fused_gated_activation", &BuildOptions::fused_gated_activation)
      .def_rw("cross_entropy", &BuildOptions::cross_entropy)
      .def_rw("lora_rank", &BuildOptions::lora_rank)
      .def_rw("lora_targets", &BuildOptions::lora_targets)
      .def_rw("lora_shared_input", &BuildOptions::lora_shared_input)
      .def_rw("fp8_parameters", &BuildOptions::fp8_parameters)
      .def_rw("gradients_in_weight_dtype", &BuildOptions::gradients_in_weight_dtype);
  m.attr("LORA_TARGETS") = kLoraTargets;
  m.def(
      "build_graph",
      [](const ModelSpec& model, const BuildOptions& options) {
        nb::gil_scoped_release release;
        return build_graph(model, options);
      },
      nb::arg("model"), nb::arg("options"));
  m.def("step_kv_cache_bytes", &step_kv_cache_bytes, nb::arg("model"), nb::arg("options"));
}

}  // namespace accelsim::bindings
