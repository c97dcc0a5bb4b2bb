// Published model configurations for hand-worked tests.
#pragma once

#include "accelsim/model.h"

namespace accelsim::testing {

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

}  // namespace accelsim::testing
