// Grammar as a sampler constraint (see constraint.h).
#include "grammar/constraint.h"

#include <algorithm>

namespace sluice::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTable> vocab,
                                     std::vector<int32_t> end_tokens)
    : g_(std::move(g)), vocab_(std::move(vocab)), end_(std::move(end_tokens)), m_(g_.get()) {}

void GrammarConstraint::allowed(std::vector<uint8_t> *allowed) {
    if (done_) {
        allowed->assign((size_t)vocab_->vocab(), 0);
    } else if (m_.finished()) {
        allowed->assign((size_t)vocab_->vocab(), 0);  // complete: only an end token
    } else {
        vocab_->mask(m_, allowed);
    }
    if (done_ || m_.accepting())
        for (int32_t e : end_)
            if (e >= 0 && e < vocab_->vocab()) (*allowed)[(size_t)e] = 1;
}

void GrammarConstraint::accept(int32_t id) {
    if (std::find(end_.begin(), end_.end(), id) != end_.end()) {
        done_ = true;
        return;
    }
    if (id >= 0 && id < vocab_->vocab()) m_.step_bytes(vocab_->bytes(id));
}

}  // namespace sluice::grammar
