// A grammar as a sampler constraint: the token mask before each draw, the
// matcher advanced by each chosen token, and the end tokens (EOS, the chat
// stop token) allowed exactly when the output is a complete value.
#pragma once
#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "sample/sample.h"

namespace sluice::grammar {

class GrammarConstraint final : public sample::Constraint {
public:
    GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTable> vocab,
                      std::vector<int32_t> end_tokens);
    void allowed(std::vector<uint8_t> *allowed) override;
    void accept(int32_t id) override;
    bool done() const override { return done_; }
    // Finish-now (see sample::Constraint): with a limit, a token is allowed
    // only if the value can still be completed, and its end token drawn,
    // within the draws left. The bound is in bytes, so it holds in tokens
    // when every byte is a token (TokenTable::has_all_bytes, true of
    // byte-level BPE vocabularies); when no token meets it, the tokens that
    // leave the fewest bytes to write are allowed.
    void set_draw_limit(int32_t draws) override { limit_ = draws; }
    int32_t draws_to_finish() const override;
    const Matcher &matcher() const { return m_; }

private:
    std::shared_ptr<const Grammar> g_;
    std::shared_ptr<const TokenTable> vocab_;
    std::vector<int32_t> end_;
    Matcher m_;
    bool done_ = false;  // an end token was accepted
    int32_t limit_ = -1;
};

}  // namespace sluice::grammar
