// llama.cpp's logits for a token-id prompt, as the second outside judge
// (issue 29). Built at test time against the headers of the llama.cpp
// revision that the npm prebuilt libllama was built from (the git bundle in
// node-llama-cpp), never against a copy of its declarations: the struct
// layouts change between revisions, and a mismatch fails at context creation.
//
//   llamacpp_logits MODEL.gguf --ids 1,2,3 --bins DIR --out LAST.f32
//                   [--all ALL.f32] [--threads N] [--verbose]
//                   [--yarn-beta-fast F --yarn-beta-slow S] [--no-repack]
//   llamacpp_logits MODEL.gguf --ids 1,2,3 --bins DIR --gen N [--threads N]
//   llamacpp_logits MODEL.gguf --bins DIR --tokenize TEXT_FILE
//   llamacpp_logits --dequant GGML_TYPE --in BLOCKS --out FLOATS
//   llamacpp_logits --quantize LLAMA_FTYPE --in F32.gguf --out OUT.gguf --bins DIR
//
// With --tokenize: llama.cpp's tokenization of the file's text (no BOS, no
// special-token parsing), the ids comma-separated on one line.
//
// With --gen (bench/vs_llamacpp.py): llama.cpp as its users run it (the
// model mmap'ed, flash attention and KV type at their defaults, batches of
// 512), the prompt evaluated and N tokens decoded greedily; each token id is
// written to stdout as it is chosen (the first one is the first token a user
// sees) and the phase times to stderr.
//
// Writes the last position's full-vocabulary logits as little-endian f32 (the
// layout of the oracle's --dump and of sluice logits --dump), and with --all
// every position's. Exact-compare mode: flash attention off and an F32 KV
// cache, since flash attention on the CPU runs partly in F16 and would add
// about 1e-3 of its own rounding to the comparison. The YaRN betas are
// context parameters: llama.cpp's deepseek2 loader does not read them from
// the file (it keeps 32 / 1, right for DeepSeek-V3, not for Kimi K2's 1 / 1).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

bool g_verbose = false;

void log_cb(ggml_log_level level, const char *text, void *) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "llamacpp_logits: %s\n", msg.c_str());
  return 2;
}

bool parse_ids(const char *s, std::vector<llama_token> *out) {
  while (*s) {
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (end == s || errno || v < 0 || v > 0x7fffffff) return false;
    out->push_back(static_cast<llama_token>(v));
    s = end;
    if (*s == ',') ++s;
    else if (*s) return false;
  }
  return !out->empty();
}

// Writes to PATH.tmp and renames: a run that fails leaves no file that looks complete.
bool write_f32(const std::string &path, const float *data, size_t n) {
  const std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(data, sizeof(float), n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  std::string model_path, bins, out, all, tokenize, dequant_in;
  int dequant_type = -1, quantize_ftype = -1;
  std::vector<llama_token> ids;
  int threads = 2;
  float beta_fast = -1, beta_slow = -1;  // < 0: llama.cpp's own
  int gen = 0;
  bool no_repack = false;
  const auto t_start = std::chrono::steady_clock::now();
  auto since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char *v = nullptr;
    if (a == "--verbose") { g_verbose = true; continue; }
    if (a == "--no-repack") { no_repack = true; continue; }
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {  // every other option takes a value
      if (i + 1 >= argc) return fail(a + " needs a value");
      v = argv[++i];
    }
    if (a == "--ids") { if (!parse_ids(v, &ids)) return fail(std::string("--ids: not a list of token ids: ") + v); }
    else if (a == "--bins") bins = v;
    else if (a == "--out") out = v;
    else if (a == "--all") all = v;
    else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--gen") gen = std::atoi(v);
    else if (a == "--tokenize") tokenize = v;
    else if (a == "--dequant") dequant_type = std::atoi(v);
    else if (a == "--in") dequant_in = v;
    else if (a == "--quantize") quantize_ftype = std::atoi(v);
    else if (a == "--yarn-beta-fast") beta_fast = std::strtof(v, nullptr);
    else if (a == "--yarn-beta-slow") beta_slow = std::strtof(v, nullptr);
    else if (!a.empty() && a[0] != '-' && model_path.empty()) model_path = a;
    else return fail("unknown argument " + a);
  }
  if (quantize_ftype >= 0) {
    // llama.cpp's own quantizer (llama-quantize's library call): an f32
    // GGUF to the mixes users download (15 = Q4_K_M, 10 = Q2_K, ...), for
    // the K-quant import test (kquant_import.py).
    if (dequant_in.empty() || out.empty() || bins.empty()) return fail("--quantize FTYPE needs --in F32.gguf --out OUT.gguf --bins DIR");
    llama_log_set(log_cb, nullptr);
    ggml_backend_load_all_from_path(bins.c_str());
    llama_backend_init();
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = static_cast<llama_ftype>(quantize_ftype);
    qp.nthread = threads;
    if (llama_model_quantize(dequant_in.c_str(), out.c_str(), &qp) != 0) return fail("llama_model_quantize failed (run with --verbose for its log)");
    llama_backend_free();
    return 0;
  }
  if (dequant_type >= 0) {
    // ggml's own to_float for a file of raw blocks of one type: the oracle
    // for sluice's GGUF dequantizers (kquant_dequant.py).
    if (dequant_in.empty() || out.empty()) return fail("--dequant TYPE needs --in BLOCKS --out FLOATS");
    if (dequant_type >= GGML_TYPE_COUNT) return fail("--dequant: no ggml type " + std::to_string(dequant_type));
    const ggml_type t = static_cast<ggml_type>(dequant_type);
    const ggml_type_traits *tr = ggml_get_type_traits(t);
    if (!tr || !tr->to_float || tr->blck_size <= 0 || tr->type_size == 0) return fail("--dequant: ggml has no to_float for this type");
    FILE *f = std::fopen(dequant_in.c_str(), "rb");
    if (!f) return fail("cannot read " + dequant_in);
    std::vector<char> raw;
    char buf[65536];
    size_t k;
    while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) raw.insert(raw.end(), buf, buf + k);
    std::fclose(f);
    if (raw.empty() || raw.size() % tr->type_size) return fail(dequant_in + ": not a whole number of blocks");
    const int64_t n = (int64_t)(raw.size() / tr->type_size) * tr->blck_size;
    std::vector<float> y((size_t)n);
    tr->to_float(raw.data(), y.data(), n);
    FILE *o = std::fopen(out.c_str(), "wb");
    if (!o || std::fwrite(y.data(), 4, y.size(), o) != y.size() || std::fclose(o) != 0) return fail("cannot write " + out);
    return 0;
  }
  if (!tokenize.empty() && !model_path.empty() && !bins.empty()) {
    llama_log_set(log_cb, nullptr);
    ggml_backend_load_all_from_path(bins.c_str());
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) return fail(model_path + ": llama.cpp could not load its vocabulary");
    FILE *f = std::fopen(tokenize.c_str(), "rb");
    if (!f) { llama_model_free(model); return fail("cannot read " + tokenize); }
    std::string text;
    char buf[65536];
    size_t k;
    while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, k);
    std::fclose(f);
    std::vector<llama_token> toks(text.size() + 16);
    const int n = llama_tokenize(llama_model_get_vocab(model), text.data(), (int32_t)text.size(), toks.data(),
                                 (int32_t)toks.size(), false, false);
    if (n < 0) { llama_model_free(model); return fail("llama_tokenize failed"); }
    for (int i = 0; i < n; ++i) std::printf(i ? ",%d" : "%d", toks[i]);
    std::printf("\n");
    llama_model_free(model);
    llama_backend_free();
    return 0;
  }
  if (model_path.empty() || ids.empty() || bins.empty() || (out.empty() && gen <= 0))
    return fail("usage: llamacpp_logits MODEL.gguf --ids 1,2,3 --bins DIR --out LAST.f32 [--all ALL.f32] [--threads N]");
  if (threads < 1) threads = 1;

  llama_log_set(log_cb, nullptr);
  ggml_backend_load_all_from_path(bins.c_str());
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  // Repacking copies every Q4_0/Q8_0 weight into anonymous memory for its
  // AVX2 kernels: a model bigger than RAM then fails to load (25 GiB
  // malloc). Off, the weights stay mmap'ed, how llama.cpp pages a model
  // bigger than RAM (its --no-repack). Always so with --gen; --no-repack
  // asks for it when exact logits are wanted from a model bigger than RAM.
  if (gen > 0 || no_repack) mp.use_extra_bufts = false;
  llama_model *model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return fail(model_path + ": llama.cpp could not load it (run with --verbose for its log)");
  const int n = static_cast<int>(ids.size());
  const double load_s = since(t_start);
  llama_context_params cp = llama_context_default_params();
  if (gen > 0) {
    cp.n_ctx = static_cast<uint32_t>(n + gen + 16);
    cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n < 512 ? n : 512);
  } else {
    cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n < 64 ? 64 : n);
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
  }
  cp.n_threads = cp.n_threads_batch = threads;
  if (beta_fast > 0) cp.yarn_beta_fast = beta_fast;
  if (beta_slow > 0) cp.yarn_beta_slow = beta_slow;
  llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) { llama_model_free(model); return fail(model_path + ": llama.cpp could not create a context"); }
  const llama_vocab *vocab = llama_model_get_vocab(model);
  const int V = llama_vocab_n_tokens(vocab);
  for (llama_token t : ids)
    if (t >= V) { llama_free(ctx); llama_model_free(model); return fail("token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V)); }
  if (gen > 0) {
    // The prompt in batches of n_batch, logits for its last token only; then
    // greedy decoding one token at a time.
    const auto t_prompt = std::chrono::steady_clock::now();
    llama_batch b = llama_batch_init((int)cp.n_batch, 0, 1);
    int status = 0;
    for (int i0 = 0; i0 < n && status == 0; i0 += (int)cp.n_batch) {
      const int m = std::min(n - i0, (int)cp.n_batch);
      for (int i = 0; i < m; ++i) {
        b.token[i] = ids[i0 + i];
        b.pos[i] = i0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = (i0 + i == n - 1);
      }
      b.n_tokens = m;
      if (llama_decode(ctx, b) != 0) status = fail("llama_decode failed on the prompt");
    }
    const double prompt_s = since(t_prompt);
    const auto t_decode = std::chrono::steady_clock::now();
    int produced = 0;
    for (int k = 0; k < gen && status == 0; ++k) {
      const float *l = llama_get_logits_ith(ctx, -1);
      int best = 0;
      for (int v = 1; v < V; ++v)
        if (l[v] > l[best]) best = v;
      std::printf("%d\n", best);
      std::fflush(stdout);
      ++produced;
      if (k + 1 == gen) break;
      b.token[0] = best;
      b.pos[0] = n + k;
      b.n_seq_id[0] = 1;
      b.seq_id[0][0] = 0;
      b.logits[0] = 1;
      b.n_tokens = 1;
      if (llama_decode(ctx, b) != 0) status = fail("llama_decode failed while decoding");
    }
    const double decode_s = since(t_decode);
    // The first token came at the end of the prompt; the rest are decode steps.
    std::fprintf(stderr, "llamacpp: load %.3f s, prompt %d tokens %.3f s, decode %d tokens %.3f s (%.3f tok/s), total %.3f s\n",
                 load_s, n, prompt_s, produced - 1, decode_s, produced > 1 ? (produced - 1) / decode_s : 0.0,
                 since(t_start));
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return status;
  }
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = ids[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = n;
  int rc = llama_decode(ctx, b);
  int status = 0;
  if (rc != 0) {
    status = fail("llama_decode returned " + std::to_string(rc));
  } else {
    std::vector<float> every(static_cast<size_t>(n) * V);
    for (int i = 0; i < n; ++i) std::memcpy(&every[static_cast<size_t>(i) * V], llama_get_logits_ith(ctx, i), sizeof(float) * V);
    if (!write_f32(out, &every[static_cast<size_t>(n - 1) * V], V)) status = fail("cannot write " + out);
    else if (!all.empty() && !write_f32(all, every.data(), every.size())) status = fail("cannot write " + all);
  }
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return status;
}
