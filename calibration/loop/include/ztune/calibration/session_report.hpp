#pragma once
// What a calibration session prints: the fit, the runs before and after, the
// cross-validation, the reference plans, the machine's noise and the verdict
// (as tables, or one JSON document).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ztune/calibration/calibrate_session.hpp"

namespace ztune::calibration {

void print_session(std::FILE* out, const SessionResult& r);
/// The verdict alone: accepted, or refused with each reason.
void print_verdict(std::FILE* out, const SessionResult& r, bool forced);
nlohmann::json session_json(const SessionResult& r);

}  // namespace ztune::calibration
