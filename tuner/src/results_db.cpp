#include "ztune/tuner/results_db.hpp"

#include "ztune/vocab/run_record.hpp"

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <sqlite3.h>
#include <fcntl.h>
#include <unistd.h>

#include "results_schema.hpp"
#include "sqlite_statement.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/tuner/digest.hpp"
#include "ztune/tuner/result_json.hpp"

#ifndef ZTUNE_VERSION
#define ZTUNE_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace ztune {

using db::DbFailure;
using db::Statement;
using db::WriteTransaction;

std::string default_db_path() {
  try {
    return (fs::path(user_data_dir()) / "results.db").string();
  } catch (const InputError&) {
    throw InputError("--db: neither XDG_DATA_HOME nor HOME is set; give the results database file with --db PATH");
  }
}

void ResultsDb::Closer::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

struct ResultsDbLockWait {
  sqlite3* db = nullptr;
  const std::atomic<bool>* give_up = nullptr;
};

ResultsDb::ResultsDb(std::unique_ptr<sqlite3, Closer> db, std::unique_ptr<ResultsDbLockWait> wait, std::string path)
    : wait_(std::move(wait)), db_(std::move(db)), path_(std::move(path)) {}
ResultsDb::ResultsDb(ResultsDb&&) noexcept = default;
ResultsDb& ResultsDb::operator=(ResultsDb&& o) noexcept {
  // The connection closes before the handler's context it may still call is freed.
  db_ = std::move(o.db_);
  wait_ = std::move(o.wait_);
  path_ = std::move(o.path_);
  return *this;
}
ResultsDb::~ResultsDb() = default;  // db_ (declared after wait_) closes first

namespace {

std::int64_t pragma_int(sqlite3* db, const char* sql) {
  Statement st(db, sql);
  return st.step() ? st.int64(0) : 0;
}

std::string hex(std::int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(v & 0xffffffff));
  return buf;
}

InputError untouched(const std::string& path, const std::string& why) {
  return InputError(path + ": " + why +
                    "; the file was left untouched (move it away, or choose another file with --db PATH)");
}

bool is_corruption(int code) {
  const int primary = code & 0xff;
  return primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT;
}

/// What an I/O failure most often means, for the message (a full disk had
/// read "cannot read the results database: prepare: disk I/O error" while a
/// run was being stored); "" for other failures.
std::string io_hint(int code) {
  switch (code & 0xff) {
    case SQLITE_FULL: return " (the disk is full: free space, or give another --db)";
    case SQLITE_IOERR: return " (an I/O error: most often a full disk or a failing device; check the space left)";
    case SQLITE_READONLY: return " (the file or its directory is read-only: give another --db)";
    case SQLITE_CANTOPEN: return " (its directory cannot be written: give another --db)";
    default: return "";
  }
}

/// Refuses foreign and newer files before anything is written to them.
void check_identity(sqlite3* db, const std::string& path, std::int64_t& version) {
  std::int64_t app = 0, objects = 0;
  try {
    // One statement, so the three are read from one snapshot (another process
    // may be creating the schema right now).
    Statement st(db,
                 "SELECT (SELECT application_id FROM pragma_application_id()), "
                 "(SELECT user_version FROM pragma_user_version()), (SELECT count(*) FROM sqlite_schema)");
    if (st.step()) {
      app = st.int64(0);
      version = st.int64(1);
      objects = st.int64(2);
    }
  } catch (const DbFailure& e) {
    // SQLITE_NOTADB: not a database at all; SQLITE_CORRUPT: a database whose
    // pages are damaged (a copy cut short, a disk error), which sqlite3's
    // .recover can often salvage.
    if ((e.code() & 0xff) == SQLITE_CORRUPT)
      throw untouched(path, std::string("a damaged SQLite database: SQLite says \"") + e.what() +
                                "\" (`sqlite3 " + path + " .recover > recovered.sql` salvages what it can)");
    if (is_corruption(e.code()))
      throw untouched(path, std::string("not a ztune results database: SQLite says \"") + e.what() + "\"");
    throw InputError(path + ": cannot read the results database: " + e.what() + io_hint(e.code()));
  }
  if (app != db::kApplicationId && (objects > 0 || version != 0))
    throw untouched(path, "an SQLite database of another program (application_id " + hex(app) + ", ztune's is " +
                              hex(db::kApplicationId) + ")");
  if (version > kResultsSchemaVersion)
    throw untouched(path, "written by a newer ztune (schema version " + std::to_string(version) +
                              "; this ztune reads up to version " + std::to_string(kResultsSchemaVersion) + ")");
  // migrate() writes the tables and the version in one transaction: tables
  // under version 0 mean the marker was reset, and migrating would fail half-way.
  if (version == 0 && objects > 0)
    throw untouched(path, "ztune's, but it holds tables under schema version 0 (PRAGMA user_version was reset; "
                          "this ztune writes version " + std::to_string(kResultsSchemaVersion) + ")");
}

void migrate(sqlite3* db, const std::string& path) {
  WriteTransaction tx(db);
  // Re-read under the write lock: another process may have migrated meanwhile.
  const std::int64_t version = pragma_int(db, "PRAGMA user_version");
  if (version > kResultsSchemaVersion)
    throw untouched(path, "written by a newer ztune (schema version " + std::to_string(version) + ")");
  for (auto v = static_cast<std::size_t>(version); v < db::kMigrations.size(); ++v) db::exec(db, db::kMigrations[v]);
  db::exec(db, ("PRAGMA application_id = " + std::to_string(db::kApplicationId)).c_str());
  db::exec(db, ("PRAGMA user_version = " + std::to_string(kResultsSchemaVersion)).c_str());
  tx.commit();
}

/// A table's column names, in order (none when there is no such table).
std::vector<std::string> columns_of(sqlite3* db, const std::string& table) {
  std::vector<std::string> columns;
  Statement info(db, "SELECT name FROM pragma_table_info(?)");
  info.bind(1, table);
  while (info.step()) columns.push_back(info.text(0));
  return columns;
}
/// Every table and its columns as the migrations lay them out (built once,
/// in memory, from kMigrations: the schema has one owner).
using TableColumns = std::vector<std::pair<std::string, std::vector<std::string>>>;
const TableColumns& expected_tables() {
  static const TableColumns tables = [] {
    sqlite3* raw = nullptr;
    sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    struct Close {
      void operator()(sqlite3* d) const { sqlite3_close(d); }
    };
    std::unique_ptr<sqlite3, Close> mem(raw);
    for (const char* m : db::kMigrations) db::exec(mem.get(), m);
    TableColumns out;
    Statement names(mem.get(), "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
    while (names.step()) out.emplace_back(names.text(0), std::vector<std::string>{});
    for (auto& [table, columns] : out) columns = columns_of(mem.get(), table);
    return out;
  }();
  return tables;
}

/// A database at the current schema version whose tables are not the
/// schema's (a table dropped, a column renamed by hand) is refused at the
/// open: it had been found only when a run was stored, after the run.
void check_tables(sqlite3* db, const std::string& path) {
  for (const auto& [table, want] : expected_tables()) {
    const std::vector<std::string> have = columns_of(db, table);
    std::string why;
    if (have.empty()) {
      why = "table " + table + " is missing";
    } else {
      for (const auto& column : want)
        if (std::find(have.begin(), have.end(), column) == have.end()) {
          why = "table " + table + " has no column " + column;
          break;
        }
    }
    if (!why.empty())
      throw untouched(path, "a ztune results database (schema version " + std::to_string(kResultsSchemaVersion) +
                                ") whose tables were changed outside ztune: " + why);
  }
}

/// The busy handler: another connection holds the lock. Retries every 10 ms
/// for up to kLockWaitMs (SQLITE_BUSY after), or until the caller's give-up
/// flag is set, and says once, after two seconds, what ztune is waiting for: a
/// silent 30 s had looked like a hang.
constexpr int kLockWaitMs = 30000, kLockRetryMs = 10, kLockSayAfterMs = 2000;
bool given_up(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(std::memory_order_relaxed); }
int wait_for_lock(void* context, int retries) {
  const auto& wait = *static_cast<const ResultsDbLockWait*>(context);
  if (retries * kLockRetryMs >= kLockWaitMs || given_up(wait.give_up)) return 0;
  static std::atomic<bool> said{false};
  if (retries * kLockRetryMs >= kLockSayAfterMs && !said.exchange(true)) {
    const char* file = sqlite3_db_filename(wait.db, "main");
    std::fprintf(stderr, "ztune: waiting for the results database %s: another process holds its lock (up to %d s)\n",
                 file != nullptr ? file : "", kLockWaitMs / 1000);
  }
  sqlite3_sleep(kLockRetryMs);
  return 1;
}

/// Switches to WAL (persistent in the file). Changing the journal mode needs
/// the file to itself, and SQLite reports a conflict with a reader at once
/// instead of calling the busy handler, so retry for as long as the busy timeout.
void set_wal(sqlite3* db, const std::atomic<bool>* give_up) {
  for (int attempt = 0;; ++attempt) {
    try {
      Statement wal(db, "PRAGMA journal_mode = WAL");
      wal.run();
      return;
    } catch (const DbFailure& e) {
      if ((e.code() & 0xff) != SQLITE_BUSY && (e.code() & 0xff) != SQLITE_LOCKED) throw;
      if (attempt >= kLockWaitMs / kLockRetryMs || given_up(give_up)) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(kLockRetryMs));
    }
  }
}

/// Inserts a document once per content digest; returns its row id.
std::int64_t upsert_doc(sqlite3* db, const char* table, const std::string& name, const nlohmann::json& doc) {
  const std::string digest = json_digest(doc);
  const std::string text = doc.dump();
  Statement ins(db, std::string("INSERT INTO ") + table + "(digest, name, doc) VALUES(?, ?, ?) ON CONFLICT(digest) DO NOTHING");
  ins.bind(1, digest).bind(2, name).bind(3, text).run();
  Statement sel(db, std::string("SELECT id FROM ") + table + " WHERE digest = ?");
  sel.bind(1, digest);
  if (!sel.step()) throw DbFailure(SQLITE_INTERNAL, std::string("lost the row just stored in ") + table);
  return sel.int64(0);
}

/// A stored JSON document. A row damaged outside ztune (malformed JSON, 1e309,
/// deep nesting) is an InputError naming the database, the row and the column.
nlohmann::json parse_column(const Statement& st, int col, const std::string& where) {
  if (st.is_null(col)) return nullptr;
  return parse_json_text(st.text(col), where + ", column " + st.column_name(col) + ")");
}

// A row's id and created_at as ztune writes them (INTEGER PRIMARY KEY from 1;
// strftime('%Y-%m-%dT%H:%M:%SZ')): a row edited by hand into another id or
// date had listed as-is ("r-5" that show refused, "not a date").
void require_row_id(std::int64_t id) {
  if (id < 1) throw DbFailure(SQLITE_MISMATCH, "column \"id\": expected a positive id, got " + std::to_string(id));
}
void require_timestamp(const std::string& t) {
  static constexpr char kShape[] = "dddd-dd-ddTdd:dd:ddZ";
  bool ok = t.size() == sizeof kShape - 1;
  for (std::size_t i = 0; ok && i < t.size(); ++i)
    ok = kShape[i] == 'd' ? t[i] >= '0' && t[i] <= '9' : t[i] == kShape[i];
  if (!ok)
    throw DbFailure(SQLITE_MISMATCH, "column \"created_at\": expected a UTC time YYYY-MM-DDTHH:MM:SSZ, got \"" +
                                         t.substr(0, 40) + "\"");
}

// A row of `SELECT id, created_at, name, doc FROM profiles`.
ProfileSummary profile_row(const Statement& st, const std::string& path) {
  ProfileSummary p;
  p.id = st.int64(0);
  p.created_at = st.text(1);
  require_row_id(p.id);
  require_timestamp(p.created_at);
  p.name = st.text(2);
  p.doc = parse_column(st, 3, path + " (table profiles, row " + std::to_string(p.id));
  return p;
}

/// Reads one row, naming it ("run 5") in a DbFailure from one of its columns.
template <class F>
auto reading_row(const std::string& which, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const DbFailure& e) {
    throw DbFailure(e.code(), which + ": " + e.what());
  }
}

/// Every row `st` steps to, each made by `read`. A row one of whose columns
/// cannot be read (a value of the wrong type, edited in by hand) is kept with
/// its id (column 0) and the reason, naming it "<kind> <id>", in `damaged`:
/// one bad row does not hide the others from a list.
template <class F>
auto read_rows(Statement& st, const char* kind, F&& read) {
  using Row = decltype(read());
  std::vector<Row> out;
  while (st.step()) {
    const std::int64_t id = st.int64(0);
    try {
      out.push_back(read());
    } catch (const DbFailure& e) {
      Row r{};
      r.id = id;
      r.damaged = std::string(kind) + " " + std::to_string(id) + ": " + e.what();
      out.push_back(std::move(r));
    }
  }
  return out;
}

// The longest search or predicted iteration a stored row may hold: about 116
// days; beyond it a row was edited by hand, and printing it would mislead.
constexpr double kMaxStoredSeconds = 1e7;

// A summary column's value within [lo, hi] (or (lo, hi] without `closed`),
// else a DbFailure naming it and what was expected: the row lists as damaged.
void require_in(const char* column, double v, double lo, double hi, const std::string& expected, bool closed = true) {
  if ((closed ? v >= lo : v > lo) && v <= hi) return;
  char got[64];
  std::snprintf(got, sizeof got, "%.6g", v);
  char most[64];
  std::snprintf(most, sizeof most, "%.6g", hi);
  throw DbFailure(SQLITE_MISMATCH, std::string("column \"") + column + "\": expected " + expected + " and at most " +
                                       most + ", got " + got);
}

// A search's cluster or model row, left-joined: gone (a database edited or
// damaged by hand) is a DbFailure naming the table and the id it lacks.
void missing_row(const Statement& st, int joined_col, const char* table, int id_col) {
  if (!st.is_null(joined_col)) return;
  throw DbFailure(SQLITE_MISMATCH, "its " + std::string(table, std::strlen(table) - 1) + " (table " + table + ", id " +
                                      (st.is_null(id_col) ? std::string("null") : std::to_string(st.int64(id_col))) +
                                      ") is not in the database");
}

template <class F>
auto guarded(const std::string& path, const char* doing, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const DbFailure& e) {
    // Damage past the pages the open read (one page overwritten deep in the
    // file) surfaces here: the same salvage is said as at the open.
    // A constraint ztune's own writes keep (a foreign key, a unique id)
    // failing is damage too, whose pages still read: say how to check it.
    const int primary = e.code() & 0xff;
    const std::string salvage =
        primary == SQLITE_CORRUPT
            ? " (a damaged SQLite database: `sqlite3 " + path + " .recover > recovered.sql` salvages what it can)"
        : primary == SQLITE_CONSTRAINT
            ? " (ztune's own rows keep this constraint, so the database is likely damaged: `sqlite3 " + path +
                  " 'PRAGMA integrity_check'` says, and `sqlite3 " + path +
                  " .recover > recovered.sql` salvages what it can)"
            : "";
    throw InputError(path + ": " + doing + " failed: " + e.what() + salvage + io_hint(e.code()));
  }
}

}  // namespace

namespace {

/// `path` as an SQLite URI filename (RFC 3986 percent-encoding of the
/// characters a URI path gives a meaning: '%', '?', '#').
std::string uri_path(const std::string& path) {
  std::string out = "file:";
  for (const char ch : fs::absolute(path).string()) {
    if (ch == '%' || ch == '?' || ch == '#') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto u = static_cast<unsigned char>(ch);
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

ResultsDb ResultsDb::open(const std::string& path, DbAccess access, const std::atomic<bool>* give_up) {
  // Named by the flag that gave it, or as the default database when no --db
  // did (the user typed no "--db" to look for).
  std::string named = "--db " + path;
  try {
    if (path == default_db_path()) named = "the default results database " + path;
  } catch (const InputError&) {
  }
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (exists && fs::is_directory(path, ec))
    throw InputError(named + ": is a directory, expected a results database file");
  // A device or a FIFO (--db /dev/null): SQLite would try to migrate it and
  // leave its journal beside it (/dev/null-journal).
  if (exists && !fs::is_regular_file(path, ec))
    throw InputError(named + ": not a regular file (expected an SQLite results database)");
  // A symbolic link to nothing: SQLite would say only "unable to open database file".
  if (!exists && fs::is_symlink(fs::symlink_status(path, ec)))
    throw InputError(named + ": a symbolic link to " + fs::read_symlink(path, ec).string() +
                     ", which does not exist");
  // A reader does not create a database (and its directories) where none is,
  // nor lay out the schema in an empty file (`touch results.db`), as SQLite
  // and migrate() would.
  const std::string created_by = "search, run and calibrate create one";
  if (access == DbAccess::read && !exists)
    throw InputError(named + ": no such file (expected a results database; " + created_by + ")");
  if (access == DbAccess::read && fs::file_size(path, ec) == 0 && !ec)
    throw InputError(named + ": an empty file (0 bytes), not yet a results database (" + created_by +
                     " in it); left as it is");
  if (!exists) {
    const fs::path parent = fs::path(path).parent_path();
    // create_directories returns false when another process made the directory
    // a moment ago (two ztune processes starting on a fresh data directory):
    // only an error code, with the directory still missing, is a failure.
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      fs::create_directories(parent, ec);
      if (ec && !fs::is_directory(parent))
        throw InputError(named + ": cannot create the directory " + parent.string() + ": " + ec.message());
    }
  }
  // A database this user cannot write (another user's, one made read-only, or
  // one in a directory this user cannot write, where SQLite's WAL journal
  // cannot make its -wal and -shm files) is read as it stands, immutable: a
  // reading connection in WAL mode would leave -wal and -shm files of this
  // user's beside it, which its owner could not write past ("attempt to write
  // a readonly database") until removed.
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const bool read_only = exists && (::access(path.c_str(), W_OK) != 0 || ::access(dir.c_str(), W_OK) != 0);
  // Immutable ignores the -wal file: commits a writer made and has not yet
  // merged into the database (it was killed, or still runs) would be silently
  // missing. Said instead.
  if (read_only) {
    const auto wal = fs::file_size(path + "-wal", ec);
    if (!ec && wal > 0)
      throw InputError(path + ": " + std::to_string(wal) + " bytes of commits are in " + path +
                       "-wal, not yet merged into the database, and this user cannot write it or its directory to "
                       "read them; ask its owner to run `ztune history --db " + path +
                       "` once (which merges them), or copy the database with its -wal file");
  }
  sqlite3* raw = nullptr;
  const int flags = read_only ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
                              : SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE);
  const std::string name = read_only ? uri_path(path) + "?immutable=1" : path;
  const int rc = sqlite3_open_v2(name.c_str(), &raw, flags, nullptr);
  std::unique_ptr<sqlite3, Closer> handle(raw);
  if (rc != SQLITE_OK) {
    // SQLite says only "unable to open database file" for a new database in
    // a directory this user cannot write: the reason is said.
    std::string why = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    if (!exists && ::access(dir.c_str(), W_OK) != 0) {
      why += " (the directory " + dir.string() + " cannot be written by this user: " + std::strerror(errno) +
             "; expected a --db path in a writable directory)";
    } else if (!exists) {
      // access() passes for root anywhere (/proc, a read-only mount): creating
      // the file says why SQLite could not. One this probe made is removed.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        why += " (cannot create " + path + ": " + std::strerror(errno) +
               "; expected a --db path in a directory that holds files)";
      } else {
        ::close(fd);
        ::unlink(path.c_str());
      }
    }
    throw InputError(path + ": cannot open the results database: " + why);
  }
  sqlite3* db = handle.get();
  sqlite3_extended_result_codes(db, 1);
  // Several ztune processes may write at once: wait for the lock, do not fail.
  auto wait = std::make_unique<ResultsDbLockWait>(ResultsDbLockWait{db, give_up});
  sqlite3_busy_handler(db, wait_for_lock, wait.get());
  std::int64_t version = 0;
  check_identity(db, path, version);
  // An SQLite file with no tables (`sqlite3 x.db VACUUM`): a writer lays out
  // the schema in it, a reader has nothing to read.
  if (access == DbAccess::read && version == 0)
    throw InputError(named + ": an SQLite database without ztune's tables, not yet a results database (" +
                     created_by + " in it); left as it is");
  // Nor does a reader upgrade an older ztune's database (which that ztune
  // would then refuse): the writers do.
  if (access == DbAccess::read && version < kResultsSchemaVersion)
    throw InputError(named + ": schema version " + std::to_string(version) + " of an older ztune; search, " +
                     "run or calibrate upgrade it to version " + std::to_string(kResultsSchemaVersion) +
                     " (a reader leaves it as it is)");
  if (read_only) {
    if (version < kResultsSchemaVersion)
      throw InputError(path + ": the results database has schema version " + std::to_string(version) +
                       ", which ztune must migrate to " + std::to_string(kResultsSchemaVersion) +
                       ", and this user cannot write it (expected write permission, or its owner to run ztune once)");
    guarded(path, "reading the results database's tables", [&] { check_tables(db, path); });
    return ResultsDb(std::move(handle), std::move(wait), path);
  }
  guarded(path, "migrating the results database", [&] {
    if (version < kResultsSchemaVersion) migrate(db, path);
    set_wal(db, give_up);
    db::exec(db, "PRAGMA foreign_keys = ON");
    db::exec(db, "PRAGMA synchronous = NORMAL");
    check_tables(db, path);
    return 0;
  });
  return ResultsDb(std::move(handle), std::move(wait), path);
}

int ResultsDb::schema_version() const {
  return static_cast<int>(pragma_int(db_.get(), "PRAGMA user_version"));
}

std::int64_t ResultsDb::store_profile(const HardwareProfile& p) {
  return guarded(path_, "storing a hardware profile", [&] {
    WriteTransaction tx(db_.get());
    const auto id = upsert_doc(db_.get(), "profiles", p.name, profile_to_json(p));
    tx.commit();
    return id;
  });
}

std::int64_t ResultsDb::store_search(const SearchToStore& s) {
  return guarded(path_, "storing the search", [&] {
    sqlite3* db = db_.get();
    WriteTransaction tx(db);
    const auto cluster_id = upsert_doc(db, "clusters", s.cluster.name, cluster_to_json(s.cluster));
    const auto model_id = upsert_doc(db, "models", s.model.name, transformer_to_json(s.model));
    std::optional<std::int64_t> profile_id;
    if (s.profile != nullptr) profile_id = upsert_doc(db, "profiles", s.profile->name, profile_to_json(*s.profile));
    const auto& r = s.result;
    nlohmann::json pruned = nlohmann::json::object();
    for (const auto& [name, n] : r.pruned.named()) pruned[name] = n;
    Statement ins(db,
                  "INSERT INTO searches(cluster_id, model_id, profile_id, options, space, evaluated, feasible, "
                  "pruned_by, passes, elapsed_s, threads, interrupted, ztune_version) "
                  "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, cluster_id).bind(2, model_id).bind(3, profile_id).bind(4, s.options.dump());
    ins.bind(5, r.space).bind(6, r.evaluated).bind(7, r.feasible).bind(8, pruned.dump());
    ins.bind(9, passes_to_json(r).dump()).bind(10, r.elapsed_s).bind(11, r.threads);
    ins.bind(12, r.interrupted ? 1 : 0).bind(13, ZTUNE_VERSION);
    ins.run();
    const std::int64_t search_id = sqlite3_last_insert_rowid(db);
    Statement cand(db,
                   "INSERT INTO candidates(search_id, rank, summary, plan, prediction, gpu_bytes, iteration_s, "
                   "tokens_per_s, mfu, objective, simulated_iteration_s) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    int rank = 0;
    for (std::size_t k = 0; k < std::min(r.plans.size(), s.max_plans); ++k) {
      const Candidate& c = r.plans[k];
      const auto j = candidate_to_json(c, r);
      cand.bind(1, search_id).bind(2, ++rank).bind(3, c.plan.summary()).bind(4, j["plan"].dump());
      cand.bind(5, j["prediction"].dump()).bind(6, c.prediction.memory.gpu_total_bytes);
      if (c.timed) {
        cand.bind(7, c.prediction.time.iteration_s).bind(8, c.time().tokens_per_s).bind(9, c.time().mfu);
        cand.bind(10, c.objective);
      } else {
        cand.bind_null(7).bind_null(8).bind_null(9).bind_null(10);
      }
      if (c.simulated) cand.bind(11, c.simulated->iteration_s);
      else cand.bind_null(11);
      cand.run();
      cand.reset();
    }
    tx.commit();
    return search_id;
  });
}

std::int64_t ResultsDb::store_run(const RunToStore& r) {
  return guarded(path_, "storing the run", [&] {
    sqlite3* db = db_.get();
    WriteTransaction tx(db);
    std::optional<std::int64_t> cluster_id, model_id;
    if (r.cluster) cluster_id = upsert_doc(db, "clusters", r.cluster->name, cluster_to_json(*r.cluster));
    if (r.model) model_id = upsert_doc(db, "models", r.model->name, transformer_to_json(*r.model));
    const auto plan = plan_to_json(r.plan);
    Statement ins(db,
                  "INSERT INTO runs(cluster_id, model_id, plan, plan_digest, summary, prediction, "
                  "predicted_iteration_s, measured_iteration_s, status, record) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, cluster_id).bind(2, model_id).bind(3, plan.dump()).bind(4, json_digest(plan));
    ins.bind(5, r.plan.summary());
    if (r.prediction) {
      const nlohmann::json pred{{"memory", memory_to_json(r.prediction->memory)},
                                {"time", time_to_json(r.prediction->time)}};
      ins.bind(6, pred.dump()).bind(7, r.prediction->time.iteration_s);
    } else {
      ins.bind_null(6).bind_null(7);
    }
    ins.bind(8, r.measured_iteration_s).bind(9, r.status).bind(10, r.record.dump());
    ins.run();
    const std::int64_t run_id = sqlite3_last_insert_rowid(db);
    Statement m(db, "INSERT INTO measurements(run_id, name, value, unit) VALUES(?, ?, ?, ?)");
    for (const auto& x : r.measurements) {
      m.bind(1, run_id).bind(2, x.name).bind(3, x.value).bind(4, x.unit);
      m.run();
      m.reset();
    }
    tx.commit();
    return run_id;
  });
}

std::vector<SearchSummary> ResultsDb::searches(int limit) const {
  return guarded(path_, "listing searches", [&] {
    Statement st(db_.get(),
                 "SELECT s.id, s.created_at, c.name, m.name, s.space, s.feasible, s.elapsed_s, s.interrupted, "
                 "k.summary, k.tokens_per_s, "
                 // The engine searched for, from the stored options; a row
                 // edited into malformed JSON lists without it (show names it).
                 "CASE WHEN json_valid(s.options) THEN json_extract(s.options, '$.engine') END, "
                 "s.cluster_id, s.model_id "
                 // Left joins: a search whose cluster or model row is gone is
                 // listed as damaged, not left out of the list without a word.
                 "FROM searches s LEFT JOIN clusters c ON c.id = s.cluster_id "
                 "LEFT JOIN models m ON m.id = s.model_id LEFT JOIN candidates k ON k.search_id = s.id AND k.rank = 1 "
                 "ORDER BY s.id DESC LIMIT ?");
    st.bind(1, limit);
    return read_rows(st, "search", [&] {
      SearchSummary s;
      s.id = st.int64(0);
      missing_row(st, 2, "clusters", 11);
      missing_row(st, 3, "models", 12);
      s.created_at = st.text(1);
      require_row_id(s.id);
      require_timestamp(s.created_at);
      s.cluster = st.text(2);
      s.model = st.text(3);
      s.space = st.int64(4);
      s.feasible = st.int64(5);
      s.elapsed_s = st.real(6);
      s.interrupted = st.int64(7) != 0;
      s.best = st.text(8);
      s.best_tokens_per_s = st.optional_real(9);
      // Figures a search cannot have stored ("10/-5 plans fit", "-100 tokens/s"): a row edited by hand.
      require_in("space", static_cast<double>(s.space), 0, 1e18, "a plan count >= 0");
      require_in("feasible", static_cast<double>(s.feasible), 0, static_cast<double>(s.space),
                 "a count of plans that fit, at most the space's " + std::to_string(s.space));
      require_in("elapsed_s", s.elapsed_s, 0, kMaxStoredSeconds, "a time >= 0 s");
      if (s.best_tokens_per_s) require_in("tokens_per_s", *s.best_tokens_per_s, 0, 1e15, "a throughput > 0", false);
      if (!st.is_null(10)) s.engine = st.text(10);
      return s;
    });
  });
}

namespace {

std::int64_t count_of(sqlite3* db, const std::string& path, const char* table) {
  return guarded(path, "counting rows", [&] {
    Statement st(db, std::string("SELECT count(*) FROM ") + table);
    return st.step() ? st.int64(0) : std::int64_t{0};
  });
}

}  // namespace

std::int64_t ResultsDb::search_count() const { return count_of(db_.get(), path_, "searches"); }
std::int64_t ResultsDb::run_count() const { return count_of(db_.get(), path_, "runs"); }

std::vector<RunSummary> ResultsDb::runs(int limit) const {
  return guarded(path_, "listing runs", [&] {
    Statement st(db_.get(),
                 "SELECT r.id, r.created_at, coalesce(c.name, ''), coalesce(m.name, ''), r.summary, r.status, "
                 "r.predicted_iteration_s, r.measured_iteration_s, c.id, m.id, r.cluster_id, r.model_id FROM runs r "
                 "LEFT JOIN clusters c ON c.id = r.cluster_id LEFT JOIN models m ON m.id = r.model_id "
                 "ORDER BY r.id DESC LIMIT ?");
    st.bind(1, limit);
    return read_rows(st, "run", [&] {
      RunSummary r;
      r.id = st.int64(0);
      r.created_at = st.text(1);
      require_row_id(r.id);
      require_timestamp(r.created_at);
      r.cluster = st.text(2);
      r.model = st.text(3);
      r.plan = st.text(4);
      r.status = st.text(5);
      // The statuses store_run writes; another (a row edited by hand) had
      // listed as-is and been left out of calibration without a word.
      if (r.status != "ok" && r.status != "failed" && r.status != "interrupted")
        throw DbFailure(SQLITE_MISMATCH, "column \"status\": expected ok, failed or interrupted, got \"" +
                                             r.status.substr(0, 40) + "\"");
      // A cluster or model id that names no stored row (listed as "on ?");
      // a run stored without a cluster or model has none to name.
      if (!st.is_null(10)) missing_row(st, 8, "clusters", 10);
      if (!st.is_null(11)) missing_row(st, 9, "models", 11);
      r.predicted_iteration_s = st.optional_real(6);
      r.measured_iteration_s = st.optional_real(7);
      // A time is > 0 (an edited -5 had listed as "measured -5.000 s") and
      // within kMaxStoredSeconds (1e300 had printed as 300 digits).
      // A measured time comes from a run record, whose reader owns its ceiling.
      if (r.predicted_iteration_s)
        require_in("predicted_iteration_s", *r.predicted_iteration_s, 0, kMaxStoredSeconds, "a time > 0 s", false);
      if (r.measured_iteration_s)
        require_in("measured_iteration_s", *r.measured_iteration_s, 0, kMaxRecordStepSeconds, "a time > 0 s", false);
      return r;
    });
  });
}

std::vector<ProfileSummary> ResultsDb::profiles(const std::string& name, int limit) const {
  return guarded(path_, "listing profiles", [&] {
    Statement st(db_.get(),
                 "SELECT id, created_at, name, doc FROM profiles WHERE (? = '' OR name = ?) ORDER BY id ASC LIMIT ?");
    st.bind(1, name).bind(2, name).bind(3, limit);
    // One damaged row (its document edited into malformed JSON) is listed as
    // such, not a failure of the whole list.
    std::vector<ProfileSummary> out;
    while (st.step()) {
      try {
        out.push_back(profile_row(st, path_));
      } catch (const std::exception& e) {  // DbFailure from a column, InputError from the JSON
        ProfileSummary p;
        p.id = st.int64(0);
        p.damaged = e.what();
        out.push_back(std::move(p));
      }
    }
    return out;
  });
}

std::optional<ProfileSummary> ResultsDb::profile(std::int64_t id) const {
  return guarded(path_, "reading a profile", [&]() -> std::optional<ProfileSummary> {
    Statement st(db_.get(), "SELECT id, created_at, name, doc FROM profiles WHERE id = ?");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    return profile_row(st, path_);
  });
}

std::optional<nlohmann::json> ResultsDb::search(std::int64_t id) const {
  return guarded(path_, "reading a search", [&]() -> std::optional<nlohmann::json> {
    Statement st(db_.get(),
                 "SELECT s.id, s.created_at, c.doc AS cluster, m.doc AS model, p.doc AS profile, s.options, s.space, s.evaluated, s.feasible, "
                 "s.pruned_by, s.passes, s.elapsed_s, s.threads, s.interrupted, s.ztune_version, s.cluster_id, "
                 "s.model_id "
                 "FROM searches s LEFT JOIN clusters c ON c.id = s.cluster_id LEFT JOIN models m ON m.id = s.model_id "
                 "LEFT JOIN profiles p ON p.id = s.profile_id WHERE s.id = ?");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    const std::string row = path_ + " (search " + std::to_string(id);
    auto doc = [&](const Statement& s, int col) { return parse_column(s, col, row); };
    return reading_row("search " + std::to_string(id), [&]() -> std::optional<nlohmann::json> {
      missing_row(st, 2, "clusters", 15);
      missing_row(st, 3, "models", 16);
      nlohmann::json j{{"id", st.int64(0)},           {"created_at", st.text(1)},
                       {"cluster", doc(st, 2)}, {"model", doc(st, 3)},
                       {"profile", doc(st, 4)}, {"options", doc(st, 5)},
                       {"space", st.int64(6)},        {"evaluated", st.int64(7)},
                       {"feasible", st.int64(8)},     {"pruned_by", doc(st, 9)},
                       {"passes", doc(st, 10)}, {"elapsed_s", st.real(11)},
                       {"threads", st.int64(12)},     {"interrupted", st.int64(13) != 0},
                       {"ztune_version", st.text(14)}};
      Statement cands(db_.get(),
                      "SELECT rank, summary, plan, prediction, tokens_per_s, simulated_iteration_s, mfu FROM candidates "
                      "WHERE search_id = ? ORDER BY rank");
      cands.bind(1, id);
      nlohmann::json list = nlohmann::json::array();
      // With each candidate the throughput it was ranked by (simulated where
      // the simulator re-timed it), beside the analytical prediction.
      while (cands.step()) {
        const auto simulated = cands.optional_real(5);
        list.push_back({{"rank", cands.int64(0)},
                        {"summary", cands.text(1)},
                        {"plan", doc(cands, 2)},
                        {"prediction", doc(cands, 3)},
                        // null for a plan the search did not time (--no-rank stores it so)
                        {"ranked_tokens_per_s", cands.optional_real(4) ? nlohmann::json(*cands.optional_real(4)) : nullptr},
                        {"ranked_mfu", cands.optional_real(6) ? nlohmann::json(*cands.optional_real(6)) : nullptr},
                        {"simulated_iteration_s", simulated ? nlohmann::json(*simulated) : nlohmann::json(nullptr)}});
      }
      j["candidates"] = list;
      return j;
    });
  });
}

std::optional<nlohmann::json> ResultsDb::run(std::int64_t id) const {
  return guarded(path_, "reading a run", [&]() -> std::optional<nlohmann::json> {
    Statement st(db_.get(),
                 "SELECT r.id, r.created_at, c.doc AS cluster, m.doc AS model, r.plan, r.summary, r.prediction, r.predicted_iteration_s, "
                 "r.measured_iteration_s, r.status, r.record FROM runs r LEFT JOIN clusters c ON c.id = r.cluster_id "
                 "LEFT JOIN models m ON m.id = r.model_id WHERE r.id = ?");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    const std::string row = path_ + " (run " + std::to_string(id);
    auto doc = [&](const Statement& s, int col) { return parse_column(s, col, row); };
    return reading_row("run " + std::to_string(id), [&]() -> std::optional<nlohmann::json> {
      nlohmann::json j{{"id", st.int64(0)},
                       {"created_at", st.text(1)},
                       {"cluster", doc(st, 2)},
                       {"model", doc(st, 3)},
                       {"plan", doc(st, 4)},
                       {"summary", st.text(5)},
                       {"prediction", doc(st, 6)},
                       {"predicted_iteration_s", st.optional_real(7) ? nlohmann::json(*st.optional_real(7)) : nullptr},
                       {"measured_iteration_s", st.optional_real(8) ? nlohmann::json(*st.optional_real(8)) : nullptr},
                       {"status", st.text(9)},
                       {"record", doc(st, 10)}};
      Statement m(db_.get(), "SELECT name, value, unit FROM measurements WHERE run_id = ? ORDER BY rowid");
      m.bind(1, id);
      nlohmann::json list = nlohmann::json::array();
      while (m.step()) list.push_back({{"name", m.text(0)}, {"value", m.real(1)}, {"unit", m.text(2)}});
      j["measurements"] = list;
      return j;
    });
  });
}

}  // namespace ztune
