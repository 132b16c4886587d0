// UTF-8 well-formedness (RFC 3629 §4's syntax: Table 3-7 of the Unicode
// standard) and the flag-value rules both programs share.
#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "ztune/vocab/flag_values.hpp"
#include "ztune/vocab/text.hpp"

using ztune::invalid_utf8_offset;

TEST_CASE("UTF-8 is checked as RFC 3629 defines it", "[text]") {
  constexpr auto npos = std::string_view::npos;
  CHECK(invalid_utf8_offset("") == npos);
  CHECK(invalid_utf8_offset("dp4×tp4 → ≥ 𝄞") == npos);  // 2-, 3- and 4-byte forms
  CHECK(invalid_utf8_offset("\x7f") == npos);
  CHECK(invalid_utf8_offset("\xf4\x8f\xbf\xbf") == npos);  // U+10FFFF, the last code point
  CHECK(invalid_utf8_offset("\xed\x9f\xbf") == npos);      // U+D7FF, just below the surrogates
  CHECK(invalid_utf8_offset("ab\x80") == 2);               // a lone continuation byte
  CHECK(invalid_utf8_offset("a\xc0\xaf") == 1);            // overlong '/' (C0, C1 never appear)
  CHECK(invalid_utf8_offset("\xe0\x80\xaf") == 0);         // overlong in three bytes
  CHECK(invalid_utf8_offset("\xf0\x80\x80\xaf") == 0);     // overlong in four bytes
  CHECK(invalid_utf8_offset("\xed\xa0\x80") == 0);         // U+D800, a UTF-16 surrogate
  CHECK(invalid_utf8_offset("\xf4\x90\x80\x80") == 0);     // U+110000, beyond Unicode
  CHECK(invalid_utf8_offset("\xf5\x80\x80\x80") == 0);     // F5..FF never appear
  CHECK(invalid_utf8_offset("x\xe2\x86") == 1);            // truncated at the end
  CHECK(invalid_utf8_offset("\xe2\x28\xa1") == 0);         // a non-continuation inside
  CHECK(invalid_utf8_offset(std::string("a\0b", 3)) == npos);
}

TEST_CASE("a flag's value parses whole, finite and in range", "[text]") {
  using ztune::finite_number_complaint;
  using ztune::integer_complaint;
  CHECK(finite_number_complaint("0.5", 0, false, 1, "x").empty());
  CHECK(finite_number_complaint("0", 0, true, 1, "x").empty());
  CHECK(finite_number_complaint("0", 0, false, 1, "a number > 0") == "expected a number > 0, got \"0\"");
  for (const char* bad : {"nan", "inf", "-inf", "1e400", "2", "0.5x", "", "0x"})
    CHECK(finite_number_complaint(bad, 0, true, 1, "e") == std::string("expected e, got \"") + bad + "\"");
  CHECK(integer_complaint("7", 1, 7, "n").empty());
  CHECK(integer_complaint("8", 1, 7, "a count") == "expected a count from 1 to 7, got \"8\"");
  CHECK(integer_complaint("99999999999999999999", 0, 9, "n") == "expected n from 0 to 9, got \"99999999999999999999\"");
  CHECK(integer_complaint("1.5", 0, 9, "n") == "expected n from 0 to 9, got \"1.5\"");
}

TEST_CASE("grouped prints thousands separators, and powers of ten past a 64-bit integer", "[text]") {
  CHECK(ztune::grouped(1234567.4) == "1,234,567");
  CHECK(ztune::grouped(-1500) == "-1,500");
  CHECK(ztune::grouped(0) == "0");
  // A cost of 2.5e20 had printed as 0 (llround past the int64 range).
  CHECK(ztune::grouped(2.5e20) == "2.5e+20");
  CHECK(ztune::grouped(-9.3e18) == "-9.3e+18");
}

TEST_CASE("nearest_name: within two edits and case-blind", "[text]") {
  const std::vector<std::string> names{"llama-7b", "llama-70b", "predict", "hidden"};
  CHECK(ztune::nearest_name("llama-7", names) == "llama-7b");   // one edit
  CHECK(ztune::nearest_name("LLAMA-7B", names) == "llama-7b");  // case alone: no edit
  CHECK(ztune::nearest_name("Predcit", names) == "predict");    // two edits
  CHECK(ztune::nearest_name("gpt5", names).empty());
}

// Oracle: Linux's signal numbers and names (signal(7)).
TEST_CASE("a signal's name for messages", "[vocab][text]") {
  CHECK(ztune::signal_name(SIGTERM) == "SIGTERM");
  CHECK(ztune::signal_name(9) == "SIGKILL");
  CHECK(ztune::signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(ztune::signal_name(77) == "signal 77");
  CHECK(ztune::signal_name(-1) == "signal -1");
}
