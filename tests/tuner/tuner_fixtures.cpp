#include "tuner_fixtures.hpp"

#include "ztune/vocab/catalog.hpp"

namespace ztune::test {

Transformer gpt_13b() {
  Transformer m = load_transformer("gpt2-1.5b");  // a GPT-2 family file: learned positions, GELU, biases
  m.name = "gpt-13b";
  m.layers = 40;
  m.hidden = 5120;
  m.heads = 40;
  m.kv_heads = 40;
  m.ffn_hidden = 4 * 5120;
  m.seq_len = 1024;
  m.global_batch = 32;
  return m;
}

Cluster one_v100() {
  Cluster c = load_cluster("v100-workstation");
  c.nodes = 1;
  c.node.gpus = 1;
  return c;
}

Transformer korthikanti_model(int layers, int hidden, int heads, std::int64_t global_batch) {
  Transformer m = load_transformer("gpt3-175b");
  m.name = "korthikanti-" + std::to_string(layers) + "x" + std::to_string(hidden);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.global_batch = global_batch;
  return m;
}

}  // namespace ztune::test
