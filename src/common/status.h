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
    // detail: a finer reason than sluice_status can say, for a front end
    // whose exit codes tell more failures apart (the KLD suite's identity
    // mismatch, non-finite data and engine failure, ../shared/spec/KLD.md
    // §7.9; without it those would share one code and the documented exit
    // codes could only be recovered by matching message text).
    Status(sluice_status code, std::string msg, int detail)
        : code_(code), msg_(std::move(msg)), detail_(detail) {}
    static Status ok() { return {}; }
    bool is_ok() const { return code_ == SLUICE_OK; }
    explicit operator bool() const { return is_ok(); }
    sluice_status code() const { return code_; }
    const std::string &message() const { return msg_; }
    int detail() const { return detail_; }  // 0: none given

private:
    sluice_status code_ = SLUICE_OK;
    std::string msg_;
    int detail_ = 0;
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
