#pragma once
// Thin RAII over the SQLite C API (private to the tuner): a prepared statement
// with typed binds and column reads, and a write transaction that rolls back
// unless committed. Errors throw DbFailure carrying SQLite's message.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "ztune/vocab/text.hpp"

namespace ztune::db {

class DbFailure : public std::runtime_error {
 public:
  DbFailure(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  [[nodiscard]] int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] inline void fail(sqlite3* db, int rc, std::string_view doing) {
  throw DbFailure(rc, std::string(doing) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, "prepare");
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  Statement& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, int v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, double v) { return check(sqlite3_bind_double(stmt_, i, v)); }
  Statement& bind(int i, std::string_view v) {
    return check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  template <class T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  /// Steps once: true when a row is ready, false when done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, "step");
  }
  void run() {
    while (step()) {
    }
  }
  /// Makes the statement ready to bind and run again.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  [[nodiscard]] bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  /// A whole-number column, refused (DbFailure naming the column) unless it
  /// holds one: text edited into it would read as 0 ("0/0 plans fit").
  [[nodiscard]] std::int64_t int64(int col) const {
    const int type = sqlite3_column_type(stmt_, col);
    if (type != SQLITE_INTEGER)
      throw DbFailure(SQLITE_MISMATCH, "column \"" + column_name(col) + "\": expected a whole number, got " +
                                           (type == SQLITE_NULL    ? "NULL"
                                            : type == SQLITE_TEXT  ? "text"
                                            : type == SQLITE_FLOAT ? "a fraction"
                                                                   : "a blob"));
    return sqlite3_column_int64(stmt_, col);
  }
  /// A number column, refused (DbFailure naming the column) unless it holds a
  /// finite number: ztune stores none other, and text would read as 0.
  [[nodiscard]] double real(int col) const {
    const int type = sqlite3_column_type(stmt_, col);
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
      throw DbFailure(SQLITE_MISMATCH, "column \"" + column_name(col) + "\": expected a number, got " +
                                           (type == SQLITE_NULL ? "NULL" : type == SQLITE_TEXT ? "text" : "a blob"));
    const double v = sqlite3_column_double(stmt_, col);
    if (!std::isfinite(v))
      throw DbFailure(SQLITE_MISMATCH, "column \"" + column_name(col) + "\": expected a finite number, got " +
                                           (std::isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf"));
    return v;
  }
  [[nodiscard]] std::optional<double> optional_real(int col) const {
    return is_null(col) ? std::nullopt : std::optional<double>(real(col));
  }
  /// The column's name as the SELECT gave it ("doc", "options").
  [[nodiscard]] std::string column_name(int col) const {
    const char* n = sqlite3_column_name(stmt_, col);
    return n == nullptr ? std::string() : std::string(n);
  }
  /// A text column, refused (DbFailure naming the column) unless it is UTF-8:
  /// rows become JSON, and another program may have written any bytes.
  [[nodiscard]] std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    std::string out = p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
    if (const std::size_t at = invalid_utf8_offset(out); at != std::string::npos)
    {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(out[at])));
      throw DbFailure(SQLITE_MISMATCH, "column \"" + column_name(col) + "\": expected UTF-8 text, byte " + byte +
                                           " at offset " + std::to_string(at) + " is not");
    }
    return out;
  }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) fail(db_, rc, "bind");
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

inline void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw DbFailure(rc, msg);
  }
}

/// BEGIN IMMEDIATE (takes the write lock up front, waiting out the busy
/// timeout, so two writers never deadlock upgrading read locks); rolls back
/// unless commit() ran.
class WriteTransaction {
 public:
  explicit WriteTransaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  ~WriteTransaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace ztune::db
