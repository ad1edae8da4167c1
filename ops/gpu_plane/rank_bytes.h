// AllgatherRankBytes: one byte from every rank over the data mesh — a vote taken at a point of
// the response sequence every rank reaches (the first GPU response: which GPU path, did the
// communicator init finish).
//
// Threading: the background thread only (it uses the mesh between responses, as executors do).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "kolo/status.h"

namespace kolo {

// Every rank's byte, by rank (`mine` at `rank`). A one-rank job sends nothing. A failure is
// job-fatal (the mesh's state is unknown) and starts with `what`.
StatusOr<std::vector<uint8_t>> AllgatherRankBytes(DataPlane& mesh, int rank, int size, uint8_t mine,
                                                  const std::string& what);

}  // namespace kolo
