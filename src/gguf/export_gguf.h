// `sluice export-gguf`: a WASTE container as a GGUF file that llama.cpp
// loads, for a second, independent engine to run the same weights (issue
// 29). The trunk is dequantized to f32 (or f16 / q8_0 as asked); each
// routed expert is rebuilt dense from its VQ codes (FORMAT.md §6.9) to f32
// or f16. With f32 both, llama.cpp runs exactly the weights sluice runs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/gguf.h"

namespace sluice::gguf {

struct ExportOptions {
    std::string container;  // WASTE v0 directory
    std::string out;        // the .gguf to write (PATH.tmp, then renamed)
    TensorType trunk = TensorType::F32;    // matrices of the trunk: f32, f16, q8_0, q4_0
    TensorType experts = TensorType::F32;  // routed experts: f32, f16 (exact) or q8_0, q4_0 (requantized)
};

struct ExportReport {
    std::string arch;  // the GGUF general.architecture written
    uint64_t tensors = 0, bytes = 0;
    std::vector<std::string> notes;  // what was approximated or left out, one line each
};

Status export_gguf(const ExportOptions &o, ExportReport *report,
                   const std::function<void(uint64_t done, uint64_t total)> &progress = {});

}  // namespace sluice::gguf
