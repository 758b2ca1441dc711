// The definition of the opaque sluice_ctx, shared by the C API's own
// translation units (sluice.cpp, text.cpp). Not installed, not public.
#pragma once
#include <memory>
#include <string>

#include "model/engine.h"
#include "sluice/sluice.h"

namespace sluice {
// Tokenizer and chat format of a context, loaded on first use (text.cpp).
struct TextState;
struct TextStateDeleter {
    void operator()(TextState *t) const noexcept;
};
namespace grammar {
class TokenTable;
}
}  // namespace sluice

struct sluice_ctx {
    sluice::Engine engine;
    bool opened = false;
    // An eval that failed part-way has advanced some layers' state and not
    // others; the session is unusable until reset.
    bool broken = false;
    std::string error;
    sluice_trace_fn trace_fn = nullptr;
    void *trace_user = nullptr;
    std::unique_ptr<sluice::TextState, sluice::TextStateDeleter> text;
    // Constrained decoding's index of the vocabulary, built on first use (grammar.cpp).
    std::shared_ptr<const sluice::grammar::TokenTable> grammar_vocab;
};
