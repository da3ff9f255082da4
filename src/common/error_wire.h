// Copyright 2026 the jaccl authors.
// An error's fields as bytes, for telling peers why this rank failed (the
// liveness monitor's ABORT) without flattening them into text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "jaccl/error.h"

namespace jaccl::detail {

// At most max_bytes: past that, the detail is sent as its text (no ranks)
// and cut.
std::string encode_error_info(const ErrorInfo& info, size_t max_bytes);
// nullopt for bytes encode_error_info did not make.
std::optional<ErrorInfo> decode_error_info(std::string_view bytes);

}  // namespace jaccl::detail
