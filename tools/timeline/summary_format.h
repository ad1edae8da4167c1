// Printing a Summary: plain-text tables for people, one JSON object for machines
// (`kolo-timeline summary [--json]`). Pure functions; the caller writes the text.
#pragma once

#include <string>

#include "tools/timeline/json_value.h"
#include "tools/timeline/summary.h"

namespace kolo::timeline {

// The tables, ending in a newline. Times in ms, shares in %, bytes and rates in binary /
// decimal units as nccl-tests prints them. Warnings are not included (the caller prints
// them to stderr).
std::string FormatSummaryText(const Summary& summary);

// The same numbers, unrounded and in base units (us, bytes, bytes/s), with the warnings:
// {"ranks":[...],"begin_us":..,"end_us":..,"negotiations":{"tensors":[...],"all":{...}},
//  "stragglers":[...],"phases":{"per_rank":[...],"all":{...}},"fusion":{...},"warnings":[...]}
JsonValue SummaryToJson(const Summary& summary);

}  // namespace kolo::timeline
