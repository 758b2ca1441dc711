// `sluice plan --config config.json`: plan a model from its Hugging Face
// config alone, before downloading it. The config is mapped onto the shape
// `sluice synth` lays out at the default recipe (Q4G trunk, Q8G embedding and
// head, F32 norms and convolutions, VQ3R experts), so sizes come from the
// same layout code that writes real containers, and the manifest it would
// get goes through the engine's own memory plan.
#pragma once
#include <string>

#include "common/status.h"
#include "synth/synth.h"

namespace sluice {

// Reads the config text (text_config flattened, DeepSeek key spellings
// aliased as the converter does) into a synth shape. *family: "kimi-k3",
// "kimi-linear" or "deepseek" (DeepSeek-V3 / R1 / Kimi K2). Bad or missing
// keys are refused naming `where` and the key.
Status shape_from_hf_config(const std::string &text, const std::string &where, SynthOptions *out, std::string *family);

}  // namespace sluice
