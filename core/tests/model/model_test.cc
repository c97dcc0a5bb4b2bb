#include "accelsim/model.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "testing/models.h"

namespace accelsim {
namespace {

TEST(ModelSpecTest, Llama3_8bHasItsPublishedParameterCount) {
  // embed 128256*4096 = 525,336,576, the same again for lm_head; per layer q,o 4096*4096 each,
  // k,v 4096*1024 each, FFN 3*4096*14336, two norms 2*4096 = 218,112,000; final norm 4096:
  // 2*525,336,576 + 32*218,112,000 + 4096 = 8,030,261,248.
  EXPECT_EQ(parameter_count(testing::llama3_8b()), 8030261248);
  ModelSpec tied = testing::llama3_8b();
  tied.tied_embeddings = true;
  EXPECT_EQ(parameter_count(tied), 8030261248 - 525336576);
}

TEST(ModelSpecTest, BiasesAndQkNormAddTheirWeights) {
  ModelSpec m = testing::llama3_8b();
  m.qkv_bias = true;  // q 4096 + k 1024 + v 1024 per layer
  EXPECT_EQ(parameter_count(m), 8030261248 + 32 * 6144);
  m.qkv_bias = false;
  m.qk_norm = true;  // two [head_dim] weights per layer
  EXPECT_EQ(parameter_count(m), 8030261248 + 32 * 256);
}

TEST(ModelSpecTest, MixtralTotalAndActiveParameters) {
  // Per layer: attention 2*4096*4096 + 2*4096*1024 = 41,943,040; norms 8,192; router 4096*8 =
  // 32,768; experts 8 * 3*4096*14336 = 1,409,286,144. Embedding and lm_head 2*32000*4096,
  // final norm 4096: 32 * 1,451,270,144 + 262,144,000 + 4,096 = 46,702,792,704.
  EXPECT_EQ(parameter_count(testing::mixtral_8x7b()), 46702792704);
  // Active: 2 of the 8 experts (352,321,536 per layer): 32 * 394,305,536 + 262,148,096.
  EXPECT_EQ(active_parameter_count(testing::mixtral_8x7b()), 12879925248);
  EXPECT_EQ(active_parameter_count(testing::llama3_8b()), parameter_count(testing::llama3_8b()));
}

TEST(ModelSpecTest, SinksRouterAndExpertBiasesAddTheirWeights) {
  // gpt-oss's extras on Mixtral's shapes (32 layers, 32 heads, 8 experts of 14336, hidden 4096):
  // sinks 32 x 32 = 1,024; router biases 32 x 8 = 256; expert biases (gate/up 2 x 14336, down
  // 4096) 32 x 8 x 32,768 = 8,388,608, of which a token uses 2 experts' 32 x 2 x 32,768 = 2,097,152.
  ModelSpec m = testing::mixtral_8x7b();
  m.attention_sinks = true;
  m.moe.router_bias = m.moe.expert_bias = true;
  EXPECT_EQ(parameter_count(m), 46702792704 + 1024 + 256 + 8388608);
  EXPECT_EQ(active_parameter_count(m), 12879925248 + 1024 + 256 + 2097152);
  ModelSpec dense = testing::llama3_8b();
  dense.moe.expert_bias = true;  // no experts to carry them
  EXPECT_THROW(dense.validate(), ConfigError);
  dense = testing::llama3_8b();
  dense.sliding_window_period = 2;  // a period without a window
  EXPECT_THROW(dense.validate(), ConfigError);
  dense.sliding_window = 128;
  EXPECT_TRUE(dense.windowed_layer(0) && !dense.windowed_layer(1) && dense.windowed_layer(2));
  EXPECT_EQ(dense.layer_pattern(), 2);
}

TEST(ModelSpecTest, ExpectedExpertsTouchedUnderUniformRouting) {
  EXPECT_DOUBLE_EQ(expected_experts_touched(8, 2, 1), 2.0);            // one token: its top-2
  EXPECT_DOUBLE_EQ(expected_experts_touched(8, 2, 2), 8 * (1 - 0.5625));  // 1 - (3/4)^2
  EXPECT_NEAR(expected_experts_touched(8, 2, 256), 8.0, 1e-9);  // 8 * (1 - (3/4)^256)
}

TEST(ModelSpecTest, ParallelBlocksCountTheirNorms) {
  // GPT-J: embed 50400*4096 = 206,438,400; per layer one LayerNorm 8,192, q/k/v/out 4*4096^2 =
  // 67,108,864, fc_in 4096*16384 + 16384 = 67,125,248, fc_out 16384*4096 + 4096 = 67,112,960
  // (201,355,264); ln_f 8,192; lm_head 206,438,400 + 50,400 bias:
  // 206,438,400 + 28 * 201,355,264 + 8,192 + 206,488,800 = 6,050,882,784 (HF num_parameters()).
  EXPECT_EQ(parameter_count(testing::gptj_6b()), 6050882784);
  // Falcon-180B: per layer fused QKV 14848 * (232 + 16) * 64 = 235,667,456, dense 14848^2 =
  // 220,463,104, MLP 2 * 14848 * 59392 = 1,763,704,832, ln_attn and ln_mlp 4 * 14848 = 59,392
  // (2,219,894,784); tied embedding 65024*14848 = 965,476,352; ln_f 29,696:
  // 80 * 2,219,894,784 + 965,476,352 + 29,696 = 178,557,088,768.
  EXPECT_EQ(parameter_count(testing::falcon_180b()), 178557088768);
  // Sharing one norm between the branches (Falcon-7B style) drops one LayerNorm per layer.
  ModelSpec shared = testing::falcon_180b();
  shared.parallel_ffn_norm = false;
  EXPECT_EQ(parameter_count(shared), 178557088768 - 80 * 2 * 14848);
  ModelSpec bad = testing::gptj_6b();
  bad.rotary_dim = 512;  // more than head_dim
  EXPECT_THROW(bad.validate(), ConfigError);
  bad = testing::gptj_6b();
  bad.post_norm = true;
  EXPECT_THROW(bad.validate(), ConfigError);
}

TEST(ModelSpecTest, Gpt2HasItsPublishedParameterCount) {
  // wte 50257*768 = 38,597,376; wpe 1024*768 = 786,432; per layer: attention 4*768^2 + 3*768 +
  // 768 biases = 2,362,368, MLP 2*768*3072 + 3072 + 768 = 4,722,432, two LayerNorms 3,072;
  // ln_f 1,536; lm_head tied: 38,597,376 + 786,432 + 12 * 7,087,872 + 1,536 = 124,439,808.
  ModelSpec gpt2{.name = "gpt2", .family = "gpt2", .hidden_size = 768, .num_layers = 12,
                 .num_heads = 12, .num_kv_heads = 12, .head_dim = 64, .ffn_size = 3072,
                 .vocab_size = 50257, .max_position_embeddings = 1024,
                 .activation = Activation::gelu_new, .gated_ffn = false,
                 .norm = NormKind::layer_norm, .rotary = false, .learned_positions = true,
                 .fused_qkv = true, .tied_embeddings = true, .qkv_bias = true,
                 .output_bias = true, .ffn_bias = true};
  EXPECT_EQ(parameter_count(gpt2), 124439808);
}

TEST(ModelSpecTest, BertBaseMlmHasItsPublishedParameterCount) {
  // Embeddings: 30522*768 + 512*768 + 2*768 + LayerNorm 1536 = 23,837,184; 12 layers of
  // 7,087,872 (attention 4*768^2 + 4*768, FFN 2*768*3072 + 3072 + 768, two LayerNorms);
  // MLM head: dense 768*768 + 768, LayerNorm 1536, decoder bias 30522 = 622,650;
  // decoder weight tied: 109,514,298 (HF BertForMaskedLM).
  ModelSpec bert{.name = "bert-base", .family = "bert", .causal = false, .hidden_size = 768,
                 .num_layers = 12, .num_heads = 12, .num_kv_heads = 12, .head_dim = 64,
                 .ffn_size = 3072, .vocab_size = 30522, .max_position_embeddings = 512,
                 .activation = Activation::gelu, .gated_ffn = false, .norm = NormKind::layer_norm,
                 .rotary = false, .learned_positions = true, .post_norm = true,
                 .type_vocab_size = 2, .embedding_norm = true, .final_norm = false,
                 .lm_head_transform = true, .lm_head_bias = true, .tied_embeddings = true,
                 .qkv_bias = true, .output_bias = true, .ffn_bias = true};
  EXPECT_EQ(parameter_count(bert), 109514298);
}

TEST(ModelSpecTest, VitEra5ParameterCount) {
  // Patch convolution 20*2*2*4096 + 4096 = 331,776; CLS 4,096; positions 259,201*4096 =
  // 1,061,687,296; 32 layers of 201,379,840 (attention 4*4096^2 + 4*4096, MLP 2*4096*16384 +
  // 16384 + 4096, two LayerNorms); final LayerNorm 8,192; pooler 4096^2 + 4096 = 16,781,312:
  // 331,776 + 4,096 + 1,061,687,296 + 32 * 201,379,840 + 8,192 + 16,781,312 = 7,522,967,552.
  // Tokens: (720 / 2) x (1440 / 2) patches of 2 x 2, plus the CLS token.
  EXPECT_EQ(testing::vit_era5().image_tokens(), 360 * 720 + 1);
  EXPECT_EQ(parameter_count(testing::vit_era5()), 7522967552);
}

TEST(ModelSpecTest, DeepSeekV3TotalAndActiveParameters) {
  // MLA per layer: q_a 7168*1536 + norm 1536 + q_b 1536*128*192 + kv_a 7168*576 + norm 512 +
  // kv_b 512*128*256 + o 128*128*7168 = 187,107,328; two norms 14,336. Dense FFN 3*7168*18432 =
  // 396,361,728 (3 layers). MoE FFN: router 256*7168 + 256 experts * 3*7168*2048 + shared
  // 3*7168*2048 = 11,320,164,352 (58 layers). Embedding and lm_head 2*129280*7168; final norm.
  // 3*583,483,392 + 58*11,507,286,016 + 1,853,358,080 + 7,168 = 671,026,404,352.
  EXPECT_EQ(parameter_count(testing::deepseek_v3()), 671026404352);
  // Active: 8 routed experts instead of 256 per MoE layer, 248 of 3*7168*2048 = 44,040,192 fewer
  // in each of 58 layers: 671,026,404,352 - 58 * 248 * 44,040,192 = 37,552,282,624.
  EXPECT_EQ(active_parameter_count(testing::deepseek_v3()), 37552282624);
  // MLA caches 512 + 64 values per token per layer: 61 * 576 * 2 bytes = 70,272 B per token.
  EXPECT_EQ(kv_cache_bytes(testing::deepseek_v3(), 1, 1), 70272);
}

TEST(ModelSpecTest, MoeLayerCountIsTheLayersThatAreMoe) {
  MoeSpec moe{.num_experts = 8, .top_k = 2, .expert_ffn_size = 64};
  EXPECT_EQ(moe.moe_layer_count(32), 32);  // Mixtral: every layer
  moe.first_dense_layers = 3;
  EXPECT_EQ(moe.moe_layer_count(61), 58);  // DeepSeek-V3: 61 layers, the first 3 dense: 61 - 3
  EXPECT_EQ(moe.moe_layer_count(3), 0);    // layers 0, 1, 2 all dense
  EXPECT_EQ(moe.moe_layer_count(4), 1);    // layer 3 only
  moe.first_dense_layers = 0;
  moe.sparse_step = 2;
  EXPECT_EQ(moe.moe_layer_count(24), 12);  // layers 1, 3, ..., 23: 24 / 2
  EXPECT_EQ(moe.moe_layer_count(1), 0);    // layer 0: (0 + 1) % 2 != 0
  moe.first_dense_layers = 3;
  EXPECT_EQ(moe.moe_layer_count(10), 4);  // layers 3, 5, 7, 9 (layer 1 is among the first 3 dense)
  // The count agrees with is_moe_layer layer by layer.
  for (int64_t step = 1; step <= 4; ++step) {
    for (int64_t dense = 0; dense <= 5; ++dense) {
      moe.sparse_step = step;
      moe.first_dense_layers = dense;
      int64_t count = 0;
      for (int64_t layers = 0; layers <= 12; ++layers) {
        EXPECT_EQ(moe.moe_layer_count(layers), count) << step << " " << dense << " " << layers;
        count += moe.is_moe_layer(layers) ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(MoeSpec{}.moe_layer_count(32), 0);  // dense
}

TEST(ModelSpecTest, KvCacheBytes) {
  // 2 (K, V) * 32 layers * 8 kv heads * 128 dims * 2 bytes = 131,072 bytes per token.
  EXPECT_EQ(kv_cache_bytes(testing::llama3_8b(), 4, 1000), 4 * 1000 * 131072);
}

TEST(ModelSpecTest, ValidateRejectsInconsistentHeads) {
  ModelSpec m = testing::llama3_8b();
  m.num_kv_heads = 5;
  EXPECT_THROW(m.validate(), ConfigError);
  m = testing::llama3_8b();
  m.hidden_size = 0;
  EXPECT_THROW(m.validate(), ConfigError);
}

// GPT-J-6B's config with n_embd = 2^28 (head_dim 2^24, n_inner 2^30): each weight matrix fits in
// 64 bits, but 28 layers of 12 x 2^56 parameters do not (2.4e19 > 2^63 = 9.2e18).
ModelSpec gptj_wide() {
  ModelSpec m = testing::gptj_6b();
  m.name = "gptj-wide";
  m.hidden_size = int64_t{1} << 28;
  m.head_dim = m.hidden_size / m.num_heads;
  m.ffn_size = 4 * m.hidden_size;
  m.rotary_dim = 64;
  return m;
}

TEST(ModelSpecTest, CountsThatOverflow64BitsThrowNamingTheQuantity) {
  const ModelSpec wide = gptj_wide();
  try {
    parameter_count(wide);
    FAIL() << "parameter_count wrapped around instead of throwing";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "model 'gptj-wide': num_layers x a layer's parameters overflows 64-bit byte counts");
  }
  EXPECT_THROW(wide.validate(), ConfigError);
  // One layer (12 x 2^56 + 2 x 50400 x 2^28 parameters, about 8.65e17) counts; in fp32 its
  // bytes (3.5e18) still fit, three layers' (1.04e19) do not.
  ModelSpec one = wide;
  one.num_layers = 1;
  one.weight_dtype = DType::fp32;
  EXPECT_NO_THROW(one.validate());
  one.num_layers = 3;
  try {
    one.validate();
    FAIL() << "3 layers of 2^28-wide fp32 weights do not fit in 64-bit byte counts";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parameters x bytes overflows 64-bit byte counts"), std::string::npos)
        << e.what();
  }
  // The embedding alone: vocab 2^23 x hidden 2^40 = 2^63 parameters, one more than int64_t holds
  // (2^63 - 1); the parameter count names that term.
  ModelSpec embed = testing::llama3_8b();
  embed.hidden_size = int64_t{1} << 40;
  embed.vocab_size = int64_t{1} << 23;
  try {
    embed.validate();
    FAIL() << "a 2^63-parameter embedding passed validation";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "model 'llama-3-8b': vocab_size x hidden_size overflows 64-bit byte counts");
  }
  // KV cache: 2 x 32 layers x 8 heads x 128 x 2 bytes = 2^17 bytes per token; 2^47 tokens overflow.
  EXPECT_THROW(kv_cache_bytes(testing::llama3_8b(), int64_t{1} << 23, int64_t{1} << 24), ConfigError);
}

TEST(CheckedArithmeticTest, CeilDivAndNamesBuiltOnlyOnOverflow) {
  EXPECT_EQ(ceil_div(0, 16), 0);
  EXPECT_EQ(ceil_div(16, 16), 1);
  EXPECT_EQ(ceil_div(17, 16), 2);  // 16 tokens fill one block, the 17th opens a second
  // (2^63 - 1) / 2 = 2^62 - 1 remainder 1: 2^62, where (a + b - 1) / b would overflow.
  EXPECT_EQ(ceil_div(std::numeric_limits<int64_t>::max(), 2), int64_t{1} << 62);
  int named = 0;
  auto name = [&] {
    ++named;
    return std::string("the count");
  };
  EXPECT_EQ(checked_product(name, 3, 5, 7), 105);
  EXPECT_EQ(named, 0);
  try {
    checked_mul(int64_t{1} << 62, 2, name);  // 2^63 is one more than int64_t holds
    FAIL() << "2^63 did not overflow";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "the count overflows 64-bit byte counts");
  }
  EXPECT_EQ(named, 1);
}

TEST(ModelSpecTest, GraphSizeIsBounded) {
  // 2^14 layers build (a Llama-3-8B layer repeated); one more is refused before any graph is
  // built, as are more than 2^14 routed experts.
  ModelSpec m = testing::llama3_8b();
  m.num_layers = 1 << 14;
  EXPECT_NO_THROW(m.validate());
  m.num_layers = (1 << 14) + 1;
  EXPECT_THROW(m.validate(), ConfigError);
  ModelSpec moe = testing::mixtral_8x7b();
  moe.moe.num_experts = 1 << 14;
  EXPECT_NO_THROW(moe.validate());
  moe.moe.num_experts = (1 << 14) + 1;
  EXPECT_THROW(moe.validate(), ConfigError);
}

}  // namespace
}  // namespace accelsim
