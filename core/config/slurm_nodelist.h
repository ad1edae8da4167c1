// SLURM's compressed host lists ("node[1-4,7]", "a[01-03]", "n1,gpu[2-3],x") expanded into host
// names, as `scontrol show hostnames` does. Used by launcher_env to find the controller's host
// (the first node of the job). Plain functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// Expands a whole list in order. Zero padding is kept ("a[08-10]" gives a08, a09, a10); a name
// may hold several bracket groups ("r[1-2]n[3-4]" gives r1n3, r1n4, r2n3, r2n4). Fails, naming
// the list, on unbalanced brackets, empty names, a range that runs backwards or an expansion of
// more than 1,000,000 names.
StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string& list);

// The first host of the list, without expanding the rest.
StatusOr<std::string> FirstSlurmNode(const std::string& list);

}  // namespace kolo
