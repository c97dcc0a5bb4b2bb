// Model configurations for hand-worked tests: published ones, and a small one for fast graphs.
#pragma once

#include "accelsim/model.h"

namespace accelsim::testing {

// A GPT-2-style model with `layers` layers of hidden 256 (8 heads of 32), FFN 1024, vocab 1024,
// 512 learned positions: small graphs with every kind of op, for tests that build many.
inline ModelSpec small_gpt(int64_t layers) {
  return ModelSpec{.name = "small", .family = "gpt2", .hidden_size = 256, .num_layers = layers,
                   .num_heads = 8, .num_kv_heads = 8, .head_dim = 32, .ffn_size = 1024,
                   .vocab_size = 1024, .max_position_embeddings = 512,
                   .activation = Activation::gelu_tanh, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary = false, .learned_positions = true,
                   .fused_qkv = true, .tied_embeddings = true, .qkv_bias = true,
                   .output_bias = true, .ffn_bias = true};
}

// Meta-Llama-3-8B config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
// vocab 128256, untied embeddings, RMSNorm, SwiGLU, RoPE.
inline ModelSpec llama3_8b() {
  return ModelSpec{.name = "llama-3-8b",
                   .hidden_size = 4096,
                   .num_layers = 32,
                   .num_heads = 32,
                   .num_kv_heads = 8,
                   .head_dim = 128,
                   .ffn_size = 14336,
                   .vocab_size = 128256,
                   .max_position_embeddings = 8192};
}

// google/gemma-2-9b config.json: hidden 3584, 42 layers, 16 heads of 256, 8 KV heads, FFN 14336
// (GeGLU, tanh GELU), vocab 256000, tied embeddings scaled by sqrt(3584), four norms a layer,
// every other layer (the even ones) in a 4,096-token window, logits soft-capped at 50 (scores)
// and 30 (LM head).
inline ModelSpec gemma2_9b() {
  ModelSpec m = llama3_8b();
  m.name = "gemma-2-9b";
  m.family = "gemma2";
  m.hidden_size = 3584;
  m.num_layers = 42;
  m.num_heads = 16;
  m.num_kv_heads = 8;
  m.head_dim = 256;
  m.ffn_size = 14336;
  m.vocab_size = 256000;
  m.activation = Activation::gelu_tanh;
  m.tied_embeddings = true;
  m.sandwich_norms = true;
  m.embedding_multiplier = 59.866518;
  m.sliding_window = 4096;
  m.sliding_window_period = 2;
  m.attention_softcap = 50.0;
  m.final_logit_softcap = 30.0;
  return m;
}

// meta-llama/Llama-4-Scout-17B-16E's text_config: hidden 5120, 48 layers, 40 heads of 128, 8 KV
// heads, vocab 202048; in every layer 16 experts of 8192 (top-1, sigmoid scores) and a shared
// expert of 8192; every 4th layer without RoPE attending globally, the others in 8,192-token
// chunks with q/k L2 norms.
inline ModelSpec llama4_scout() {
  ModelSpec m = llama3_8b();
  m.name = "llama-4-scout";
  m.family = "llama4_text";
  m.hidden_size = 5120;
  m.num_layers = 48;
  m.num_heads = 40;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_size = 16384;
  m.vocab_size = 202048;
  m.max_position_embeddings = 10485760;
  m.moe.num_experts = 16;
  m.moe.top_k = 1;
  m.moe.expert_ffn_size = 8192;
  m.moe.shared_ffn_size = 8192;
  m.moe.sigmoid_top_k = true;
  m.nope_period = 4;
  m.attention_chunk = 8192;
  m.qk_l2_norm = true;
  return m;
}

// mistralai/Mixtral-8x7B-v0.1 config.json: Llama-like attention (32 heads, 8 KV heads), vocab
// 32000, and in every layer 8 experts of FFN width 14336 with top-2 routing.
inline ModelSpec mixtral_8x7b() {
  ModelSpec m = llama3_8b();
  m.name = "mixtral-8x7b";
  m.vocab_size = 32000;
  m.max_position_embeddings = 32768;
  m.moe = MoeSpec{.num_experts = 8, .top_k = 2, .expert_ffn_size = 14336,
                  .normalize_top_k = true, .fp32_combine = true};
  return m;
}

// deepseek-ai/DeepSeek-V3 config.json: 61 layers, hidden 7168, 128 heads with MLA (q_lora 1536,
// kv_lora 512, nope 128, rope 64, v 128), vocab 129280; the first 3 layers dense (FFN 18432), the
// rest MoE: 256 routed experts of 2048 (top-8 within 4 of 8 groups, sigmoid scores) plus one
// shared expert.
inline ModelSpec deepseek_v3() {
  ModelSpec m{.name = "deepseek-v3", .family = "deepseek_v3", .hidden_size = 7168,
              .num_layers = 61, .num_heads = 128, .num_kv_heads = 128, .head_dim = 192,
              .ffn_size = 18432, .vocab_size = 129280, .max_position_embeddings = 163840};
  m.moe = MoeSpec{.num_experts = 256, .top_k = 8, .expert_ffn_size = 2048, .shared_ffn_size = 2048,
                  .first_dense_layers = 3, .normalize_top_k = true, .fp32_combine = true,
                  .sigmoid_scoring = true, .num_groups = 8, .top_k_groups = 4};
  m.mla = MlaSpec{.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128,
                  .qk_rope_head_dim = 64, .v_head_dim = 128};
  return m;
}

// The NERSC study's ViT on ERA5 (python/accel_sim/data/models/vit-era5.json): 32 layers, hidden
// 4096, 64 heads, MLP 16384, a 720 x 1440 grid of 20 channels cut into 2 x 2 patches, HF ViTModel
// layout (CLS token, learned positions, final LayerNorm, pooler).
inline ModelSpec vit_era5() {
  return ModelSpec{.name = "vit-era5", .family = "vit", .causal = false, .hidden_size = 4096,
                   .num_layers = 32, .num_heads = 64, .num_kv_heads = 64, .head_dim = 64,
                   .ffn_size = 16384, .vocab_size = 0, .max_position_embeddings = 259201,
                   .activation = Activation::gelu, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary = false, .learned_positions = true,
                   .lm_head = false, .image_height = 720, .image_width = 1440, .patch_size = 2,
                   .num_channels = 20, .cls_token = true, .pooler = true, .qkv_bias = true,
                   .output_bias = true, .ffn_bias = true};
}

// EleutherAI/gpt-j-6b config.json: 28 layers, n_embd 4096, 16 heads of 256 with RoPE on the
// first 64 dims, n_inner 4 x 4096 (gelu_new, biases), vocab 50400, one LayerNorm per layer
// feeding attention and the MLP in parallel, an untied lm_head with a bias.
inline ModelSpec gptj_6b() {
  return ModelSpec{.name = "gpt-j-6b", .family = "gptj", .hidden_size = 4096, .num_layers = 28,
                   .num_heads = 16, .num_kv_heads = 16, .head_dim = 256, .ffn_size = 16384,
                   .vocab_size = 50400, .max_position_embeddings = 2048,
                   .activation = Activation::gelu_new, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .rotary_dim = 64, .parallel_block = true,
                   .lm_head_bias = true, .ffn_bias = true};
}

// tiiuae/falcon-180B config.json: new_decoder_architecture (parallel block, ln_attn and ln_mlp),
// 80 layers, hidden 14848, 232 query heads and 8 KV heads of 64 in one fused projection, a 4h
// GELU MLP, no biases, vocab 65024, lm_head tied to the embedding (transformers' default).
inline ModelSpec falcon_180b() {
  return ModelSpec{.name = "falcon-180b", .family = "falcon", .hidden_size = 14848,
                   .num_layers = 80, .num_heads = 232, .num_kv_heads = 8, .head_dim = 64,
                   .ffn_size = 59392, .vocab_size = 65024, .max_position_embeddings = 2048,
                   .activation = Activation::gelu, .gated_ffn = false,
                   .norm = NormKind::layer_norm, .fused_qkv = true, .parallel_block = true,
                   .parallel_ffn_norm = true, .tied_embeddings = true};
}

}  // namespace accelsim::testing
