// kolo-timeline: merges, summarises and plots the per-rank traces of a kolo job.
//   kolo-timeline merge -o trace.json trace.rank*.json
//   kolo-timeline summary trace.rank*.json
//   kolo-timeline plot -o steps.svg trace.json
// The commands live in kolo_timeline_tool (timeline_commands.h) so that tests can run them.
#include <iostream>
#include <string>
#include <vector>

#include "tools/timeline/timeline_commands.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  const std::vector<std::string> args(argv + 1, argv + argc);
  return kolo::timeline::TimelineMain(args, std::cout, std::cerr);
}
