#pragma once
// Content digests: clusters, models, profiles and plans are stored once per
// content in the results database, keyed by the SHA-256 of their canonical JSON
// (nlohmann::json's dump() sorts object keys, so equal documents hash equally).
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace ztune {

/// SHA-256 (FIPS 180-4) of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);
/// sha256_hex(doc.dump()).
std::string json_digest(const nlohmann::json& doc);

}  // namespace ztune
