#pragma once
// An enum whose names are a table in its order (plan.hpp's kAttentionKernelNames,
// kRecomputeNames, ...; collective.cpp's run-record names): value → name,
// name → value, and the table as a list (CLI11's IsMember). One owner of the
// pattern every enum of the vocabulary uses.
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ztune {

template <class E, std::size_t N>
[[nodiscard]] const char* name_in(const char* const (&names)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "?";
}

template <class E, std::size_t N>
[[nodiscard]] std::optional<E> value_in(const char* const (&names)[N], std::string_view n) {
  for (std::size_t i = 0; i < N; ++i)
    if (n == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

template <std::size_t N>
[[nodiscard]] std::vector<std::string> names_of(const char* const (&names)[N]) {
  return {std::begin(names), std::end(names)};
}

}  // namespace ztune
