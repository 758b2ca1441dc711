#include "server/session_shelf.h"

#include <algorithm>

namespace sluice::server {

size_t shared_prefix(const std::vector<int32_t> &have, const std::vector<int32_t> &prompt) {
    const size_t most = std::min(have.size(), prompt.empty() ? 0 : prompt.size() - 1);
    size_t k = 0;
    while (k < most && have[k] == prompt[k] && have[k] >= 0) k++;
    return k;
}

bool SessionShelf::keep_live(Keeper &k, const std::vector<int32_t> &live) {
    // A kept copy whose tokens are a prefix of the live ones is the same
    // conversation, earlier: the live one replaces it.
    kept_.remove_if([&](const std::unique_ptr<Keeper::Kept> &c) {
        return c->tokens.size() <= live.size() && std::equal(c->tokens.begin(), c->tokens.end(), live.begin());
    });
    for (;;) {
        bool full = false;
        std::unique_ptr<Keeper::Kept> c = k.keep(&full);
        if (c) {
            kept_.push_front(std::move(c));
            st_.kept++;
            return true;
        }
        if (!full || kept_.empty()) return false;  // cannot be kept, or larger than the limit on its own
        kept_.pop_back();                 // least recently used out
        st_.dropped++;
    }
}

void SessionShelf::before_prompt(Keeper &k, std::vector<int32_t> *live, const std::vector<int32_t> &prompt) {
    const size_t here = shared_prefix(*live, prompt);
    auto best = kept_.end();
    size_t best_k = 0;
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        const size_t s = shared_prefix((*it)->tokens, prompt);
        if (s > best_k) best_k = s, best = it;
    }
    const bool cuts_live = live->size() >= here + kMinTokens;
    if (best != kept_.end() && best_k >= here + kMinTokens) {
        std::unique_ptr<Keeper::Kept> take = std::move(*best);
        kept_.erase(best);
        if (cuts_live) keep_live(k, *live);
        if (k.resume(*take)) {
            st_.resumed++;
            *live = take->tokens;
            return;  // its copy goes: the live session is that conversation now
        }
        kept_.push_front(std::move(take));  // not restored: still kept
        return;
    }
    if (cuts_live) keep_live(k, *live);
}

ShelfStats SessionShelf::stats() const {
    ShelfStats s = st_;
    s.held = kept_.size();
    s.bytes = 0;
    for (const auto &c : kept_) s.bytes += c->bytes;
    return s;
}

}  // namespace sluice::server
