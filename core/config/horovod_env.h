// Horovod's environment variables that are not aliases of a config table row: what kolo does
// with each one that Horovod's launchers (horovodrun, with Gloo or MPI) and its test suites
// set. Each either works (it means nothing kolo must act on, or it maps onto kolo's options)
// or fails init() with a message saying why and what to use instead; the list with the
// reasons is README "Environment variables", "Horovod's other variables". Pure functions over
// the environment map; safe from any thread.
#pragma once

#include <map>
#include <string>

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

// Applies and checks the Horovod variables of `env` to `options`, whose identity (rank, size,
// local rank and size) is already resolved. Fails, naming the variable and its value, on a
// variable whose value kolo cannot honor (HOROVOD_HIERARCHICAL_ALLGATHER=1,
// HOROVOD_CONTROLLER=gloo, HOROVOD_RANK differing from kolo's rank, ...).
Status ApplyHorovodVariables(const std::map<std::string, std::string>& env, Options* options);

// Whether `name` is one of the variables ApplyHorovodVariables handles (they are no near
// misses of the table's names).
bool IsHandledHorovodVariable(const std::string& name);

}  // namespace kolo
