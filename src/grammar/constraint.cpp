// Grammar as a sampler constraint (see constraint.h).
#include "grammar/constraint.h"

#include <algorithm>
#include <climits>

namespace sluice::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTable> vocab,
                                     std::vector<int32_t> end_tokens)
    : g_(std::move(g)), vocab_(std::move(vocab)), end_(std::move(end_tokens)), m_(g_.get()) {}

void GrammarConstraint::allowed(std::vector<uint8_t> *allowed) {
    const bool limited = limit_ >= 0;
    if (done_) {
        allowed->assign((size_t)vocab_->vocab(), 0);
    } else if (m_.finished() || (limited && limit_ <= 1 && m_.accepting())) {
        allowed->assign((size_t)vocab_->vocab(), 0);  // complete (or out of draws): only an end token
    } else if (!limited) {
        vocab_->mask(m_, allowed);
    } else {
        // This draw and the end token leave limit_ - 2 draws for the rest.
        const uint32_t cap = limit_ >= 2 ? (uint32_t)(limit_ - 2) : 0;
        uint32_t least = TokenTable::kNoLimit;
        const size_t n = vocab_->mask(m_, allowed, cap, &least);
        // Over budget already (max_tokens below any valid answer, which the
        // server refuses up front): the tokens that make the most progress.
        if (n == 0 && !m_.accepting() && least != TokenTable::kNoLimit) vocab_->mask(m_, allowed, least);
    }
    if (done_ || m_.accepting())
        for (int32_t e : end_)
            if (e >= 0 && e < vocab_->vocab()) (*allowed)[(size_t)e] = 1;
}

int32_t GrammarConstraint::draws_to_finish() const {
    if (done_) return 0;
    const uint32_t b = m_.min_bytes_to_accept();
    return b >= (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)b + 1;
}

void GrammarConstraint::accept(int32_t id) {
    if (std::find(end_.begin(), end_.end(), id) != end_.end()) {
        done_ = true;
        return;
    }
    if (id >= 0 && id < vocab_->vocab()) m_.step_bytes(vocab_->bytes(id));
}

}  // namespace sluice::grammar
