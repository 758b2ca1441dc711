// Sizes read from files (tensor shapes, counts, offsets) are multiplied and
// added only through these: an overflow is an error the caller names, never
// undefined behaviour or a wrapped product that passes a later bound.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace sluice {

// a * b into *out; false (and *out unspecified) when it does not fit in T.
template <class T>
[[nodiscard]] inline bool checked_mul(T a, T b, T *out) {
    static_assert(std::is_integral_v<T>);
    return !__builtin_mul_overflow(a, b, out);
}
template <class T>
[[nodiscard]] inline bool checked_add(T a, T b, T *out) {
    static_assert(std::is_integral_v<T>);
    return !__builtin_add_overflow(a, b, out);
}
// The product of dims, each non-negative, no larger than limit; false when a
// dim is negative or the product (at any step) exceeds limit.
template <class T, class It>
[[nodiscard]] inline bool checked_product(It first, It last, T limit, T *out) {
    T p = 1;
    for (; first != last; ++first) {
        const auto d = *first;
        if constexpr (std::is_signed_v<std::remove_cv_t<std::remove_reference_t<decltype(d)>>>)
            if (d < 0) return false;
        if (!checked_mul<T>(p, (T)d, &p) || p > limit) return false;
    }
    *out = p;
    return true;
}
template <class T>
[[nodiscard]] inline bool checked_product(std::initializer_list<T> dims, T limit, T *out) {
    return checked_product<T>(dims.begin(), dims.end(), limit, out);
}

}  // namespace sluice
