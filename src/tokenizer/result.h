// Result<T>: a value or a sluice::Status naming what went wrong (C++20 has
// no std::expected). The library never prints and never exits.
#pragma once
#include <optional>
#include <utility>

#include "common/status.h"

namespace sluice::tok {

template <class T>
class Result {
public:
    Result(T value) : value_(std::move(value)) {}
    Result(Status error) : status_(std::move(error)) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    const Status &status() const { return status_; }
    const std::string &error() const { return status_.message(); }

    T &value() & { return *value_; }
    const T &value() const & { return *value_; }
    T &&value() && { return std::move(*value_); }
    T *operator->() { return &*value_; }
    const T *operator->() const { return &*value_; }
    T &operator*() { return *value_; }
    const T &operator*() const { return *value_; }

private:
    std::optional<T> value_;
    Status status_;
};

}  // namespace sluice::tok
