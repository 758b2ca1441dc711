// Internal error type. Every fallible internal call returns a Status whose
// message names the file, tensor or record at fault, so the C API can hand
// it to the caller verbatim (sluice_last_error) without printing anything.
#pragma once
#include <string>
#include <utility>

#include "sluice/sluice.h"

namespace sluice {

class Status {
public:
    Status() = default;
    Status(sluice_status code, std::string msg) : code_(code), msg_(std::move(msg)) {}
    static Status ok() { return {}; }
    bool is_ok() const { return code_ == SLUICE_OK; }
    explicit operator bool() const { return is_ok(); }
    sluice_status code() const { return code_; }
    const std::string &message() const { return msg_; }

private:
    sluice_status code_ = SLUICE_OK;
    std::string msg_;
};

inline Status io_error(std::string m) { return {SLUICE_E_IO, std::move(m)}; }
inline Status format_error(std::string m) { return {SLUICE_E_FORMAT, std::move(m)}; }
inline Status unsupported(std::string m) { return {SLUICE_E_UNSUPPORTED, std::move(m)}; }
inline Status arg_error(std::string m) { return {SLUICE_E_ARG, std::move(m)}; }

#define SLUICE_TRY(expr)                     \
    do {                                     \
        ::sluice::Status _st = (expr);       \
        if (!_st.is_ok()) return _st;        \
    } while (0)

}  // namespace sluice
