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
    const Matcher &matcher() const { return m_; }

private:
    std::shared_ptr<const Grammar> g_;
    std::shared_ptr<const TokenTable> vocab_;
    std::vector<int32_t> end_;
    Matcher m_;
    bool done_ = false;  // an end token was accepted
};

}  // namespace sluice::grammar
