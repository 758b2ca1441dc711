// `sluice synth`, `sluice convert`, `sluice verify` and `sluice export-gguf`: the subcommands
// that write or check container files (src/synth, src/convert), apart from
// the commands that run a model (cli/main.cpp).
#pragma once
#include <string>

#include "convert/convert.h"
#include "gguf/export_gguf.h"
#include "synth/synth.h"

namespace CLI {
class App;
}

// Writes the synthetic container o describes; with a tokenizer directory,
// copies its side files in and checks BOS/EOS against the vocabulary.
int cmd_synth(const sluice::SynthOptions &o, const std::string &tokenizer);

struct ConvertArgs {
    sluice::convert::ConvertOptions o;
    std::string src, dst;
};
void add_convert_command(CLI::App &app, ConvertArgs *a, CLI::App **out);
int cmd_convert(ConvertArgs &a);

struct VerifyArgs {
    sluice::convert::VerifyOptions o;
};
CLI::App *add_verify_command(CLI::App &app, VerifyArgs *a);
int cmd_verify(VerifyArgs &a);

// `sluice export-gguf CONTAINER OUT.gguf`: the container for llama.cpp (src/gguf).
struct ExportGgufArgs {
    std::string container, out, trunk_type = "f32", expert_type = "f32";
    bool quiet = false;
};
CLI::App *add_export_gguf_command(CLI::App &app, ExportGgufArgs *a);
int cmd_export_gguf(ExportGgufArgs &a);
